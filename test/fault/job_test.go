package fault

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/daemon"
	"qshare/executor/process"
	"qshare/internal/longtest"
	"qshare/internal/soak"
)

// oneShareConfig is a pool of n instances with one share that may preempt
// in-share.
func oneShareConfig(n int) string { return onePool(n, "ENABLED") }

func submitJob(t *testing.T, c *batch.Client, name string, prio int, payload string) string {
	t.Helper()
	out, err := c.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("q"),
		QuotaShareName: aws.String("A"), SchedulingPriority: aws.Int32(int32(prio)), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(payload)})
	if err != nil {
		t.Fatalf("submit %s: %v", name, err)
	}
	return *out.JobId
}

// waitStatus waits until the job is in one of the statuses and returns it.
func waitStatus(t *testing.T, c *batch.Client, id string, limit time.Duration, want ...types.ServiceJobStatus) *batch.DescribeServiceJobOutput {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		d, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range want {
			if d.Status == s {
				return d
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is %s (%s) after %s, want %v", aws.ToString(d.JobName), d.Status, aws.ToString(d.StatusReason), limit, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitFile waits until path exists and holds a line.
func waitFile(t *testing.T, path string, limit time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		if b, err := os.ReadFile(path); err == nil && strings.Contains(string(b), "\n") {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within %s", path, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	// A zombie is dead: look at its state.
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	return len(f) > 2 && f[2] != "Z"
}

func pidsIn(t *testing.T, text string) []int {
	var out []int
	for _, f := range strings.Fields(text) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	return out
}

// TestMisbehavingJobs runs jobs that ignore SIGTERM, fork children, exit at
// once, or cannot start, through the real binary.
func TestMisbehavingJobs(t *testing.T) {
	parallelBinary(t)
	root := t.TempDir()
	srv := startServer(t, filepath.Join(root, "data"), "--events", filepath.Join(root, "events.jsonl"))
	applyConfig(t, srv.Endpoint, oneShareConfig(1))
	c := client(srv.Endpoint)
	ctx := context.Background()

	t.Run("IgnoresSIGTERM", func(t *testing.T) {
		pidf := filepath.Join(root, "stubborn.pid")
		id := submitJob(t, c, "stubborn", 0, soak.ShellJob(`trap '' TERM; echo $$ > "$PIDF"; while :; do sleep 0.2; done`, 1, map[string]string{"PIDF": pidf}))
		waitStatus(t, c, id, 20*time.Second, types.ServiceJobStatusRunning)
		pid := pidsIn(t, waitFile(t, pidf, 10*time.Second))[0]
		asked := time.Now()
		if _, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String("stop it")}); err != nil {
			t.Fatal(err)
		}
		d := waitStatus(t, c, id, 20*time.Second, types.ServiceJobStatusFailed)
		t.Logf("a job that ignores SIGTERM (grace 1s) FAILED %s after the terminate: %s", time.Since(asked).Round(100*time.Millisecond), aws.ToString(d.StatusReason))
		if alive(pid) {
			t.Errorf("pid %d still runs after the job failed", pid)
		}
	})

	t.Run("ForksAndIsPreempted", func(t *testing.T) {
		pidf := filepath.Join(root, "forker.pids")
		// The main process leaves two children behind in its group and one
		// grandchild in a subshell, then waits.
		low := submitJob(t, c, "forker", 0, soak.ShellJob(`sleep 300 & a=$!; (sleep 300 & echo $! > "$PIDF.gc"; wait) & b=$!; echo "$$ $a $b" > "$PIDF"; wait`, 1, map[string]string{"PIDF": pidf}))
		waitStatus(t, c, low, 20*time.Second, types.ServiceJobStatusRunning)
		pids := pidsIn(t, waitFile(t, pidf, 10*time.Second))
		pids = append(pids, pidsIn(t, waitFile(t, pidf+".gc", 10*time.Second))...)
		high := submitJob(t, c, "preemptor", 5, soak.ShellJob(`exit 0`, 1, nil))
		waitStatus(t, c, high, 30*time.Second, types.ServiceJobStatusSucceeded)
		d := waitStatus(t, c, low, 30*time.Second, types.ServiceJobStatusRunnable, types.ServiceJobStatusRunning, types.ServiceJobStatusScheduled, types.ServiceJobStatusStarting)
		if len(d.Attempts) == 0 {
			t.Fatalf("the forking job has no attempts: %+v", d)
		}
		for _, p := range pids {
			if alive(p) {
				t.Errorf("process %d of the preempted job's first attempt still runs", p)
			}
		}
		t.Logf("preempted a job with %d processes; none left; it is %s again (%s)", len(pids), d.Status, aws.ToString(d.StatusReason))
		if _, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(low), Reason: aws.String("done with it")}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, low, 30*time.Second, types.ServiceJobStatusFailed)
	})

	t.Run("ForksAndExits", func(t *testing.T) {
		pidf := filepath.Join(root, "orphan.pid")
		id := submitJob(t, c, "orphaner", 0, soak.ShellJob(`sleep 300 & echo $! > "$PIDF"; exit 0`, 1, map[string]string{"PIDF": pidf}))
		pid := pidsIn(t, waitFile(t, pidf, 20*time.Second))[0]
		// The main process is gone; its child still holds the attempt.
		time.Sleep(500 * time.Millisecond)
		d := waitStatus(t, c, id, 5*time.Second, types.ServiceJobStatusRunning, types.ServiceJobStatusSucceeded)
		t.Logf("main process exited, child %d left behind: the job is %s (%s)", pid, d.Status, aws.ToString(d.StatusReason))
		if _, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String("orphans")}); err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, id, 20*time.Second, types.ServiceJobStatusFailed, types.ServiceJobStatusSucceeded)
		deadline := time.Now().Add(10 * time.Second)
		for alive(pid) && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if alive(pid) {
			t.Errorf("the child %d of a job that exited still runs after the job ended", pid)
		}
	})

	t.Run("ExitsWhileStarting", func(t *testing.T) {
		id := submitJob(t, c, "quitter", 0, soak.ShellJob(`exit 3`, 1, nil))
		d := waitStatus(t, c, id, 20*time.Second, types.ServiceJobStatusFailed)
		if !strings.Contains(aws.ToString(d.StatusReason), "3") {
			t.Errorf("a job that exits 3 at once FAILED with %q", aws.ToString(d.StatusReason))
		}
		ok := submitJob(t, c, "instant", 0, soak.ShellJob(`true`, 1, nil))
		waitStatus(t, c, ok, 20*time.Second, types.ServiceJobStatusSucceeded)
		t.Logf("exit 3 at once: FAILED %q; true at once: SUCCEEDED", aws.ToString(d.StatusReason))
	})

	t.Run("CannotStart", func(t *testing.T) {
		payload := `{"AlgorithmSpecification":{"TrainingImage":"local","ContainerEntrypoint":["/nonexistent/bin/train.py","--epochs","3"]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":1}}`
		out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("missing"), JobQueue: aws.String("q"),
			QuotaShareName: aws.String("A"), ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload)})
		if err != nil {
			t.Logf("refused at submit: %v", err)
			if !strings.Contains(err.Error(), "ClientException") {
				t.Fatalf("a missing binary is refused with %v, want a ClientException", err)
			}
			return
		}
		d := waitStatus(t, c, *out.JobId, 20*time.Second, types.ServiceJobStatusFailed)
		reason := aws.ToString(d.StatusReason)
		if !strings.Contains(reason, "/nonexistent/bin/train.py") {
			t.Errorf("FAILED reason %q does not name the missing binary", reason)
		}
		t.Logf("missing binary: FAILED %q", reason)
	})

	srv.Stop()
	res, err := checkEventsCLI(t, filepath.Join(root, "events.jsonl"), writeTemp(t, oneShareConfig(1)))
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range res.Violations {
		t.Errorf("event log: %s", v)
	}
}

func writeTemp(t *testing.T, text string) string {
	p := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestHugeLog runs a job that writes a great deal of output (64 MiB by
// default, 512 MiB with QSHARE_LONG=1, QSHARE_LOG_MIB to change) through a
// process executor whose log cap is 1 MiB with 2 old files kept, in
// process so the cap can be set: the logs stay within the cap, the job
// succeeds, and the API answers throughout. 64 MiB is 64 rotations past
// the cap; the 448 MiB more cost about 3 s of CPU in `go test ./...`.
func TestHugeLog(t *testing.T) {
	parallelBinary(t)
	mib := longtest.Pick(64, 512)
	if v := os.Getenv("QSHARE_LOG_MIB"); v != "" {
		mib, _ = strconv.Atoi(v)
	}
	dir := t.TempDir()
	db := openDB(t, dir)
	ctx := context.Background()
	ex, err := process.New(ctx, process.Options{DataDir: dir, GPUs: []string{"0"}, Supervisor: []string{bin}, LogMaxBytes: 1 << 20, LogKeep: 2,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ex.Close() })
	url, _ := serveInProcess(t, daemon.Config{Store: db, Executor: ex, Tick: 50 * time.Millisecond})
	applyConfig(t, url, oneShareConfig(1))
	c := client(url)
	id := submitJob(t, c, "chatty", 0, soak.ShellJob(fmt.Sprintf(`yes "a line of training output that goes on and on" | head -c %d; echo end`, mib<<20), 1, nil))
	start := time.Now()
	var worst time.Duration
	polls := 0
	for {
		t0 := time.Now()
		dj, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			t.Fatalf("describe while the job writes: %v", err)
		}
		polls++
		worst = max(worst, time.Since(t0))
		if dj.Status == types.ServiceJobStatusSucceeded {
			break
		}
		if dj.Status == types.ServiceJobStatusFailed {
			t.Fatalf("the chatty job FAILED: %s", aws.ToString(dj.StatusReason))
		}
		if time.Since(start) > 5*time.Minute {
			t.Fatalf("the chatty job is still %s after 5 minutes", dj.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
	var total int64
	files := 0
	filepath.Walk(filepath.Join(dir, "attempts"), func(p string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() && strings.HasPrefix(info.Name(), "output.log") {
			total += info.Size()
			files++
		}
		return nil
	})
	if total > 3<<20+64<<10 {
		t.Errorf("the job's logs take %d bytes in %d files, above 3 MiB (1 MiB cap, 2 old files kept)", total, files)
	}
	t.Logf("%d MiB of output in %s: %d log files, %d bytes kept; %d describes answered meanwhile, the slowest in %s",
		mib, time.Since(start).Round(100*time.Millisecond), files, total, polls, worst.Round(time.Millisecond))
}
