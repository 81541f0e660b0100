package processe2e_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// ticker prints its pid once, then a numbered tick every 0.1 s until its
// gate opens, then exits with $CODE.
const ticker = `echo "start pid=$$ attempt $QSHARE_ATTEMPT"
n=0; while [ ! -e "$GATE/$QSHARE_JOB_NAME" ] && [ $n -lt 600 ]; do n=$((n+1)); echo "tick $n"; sleep 0.1 & wait $!; done
echo "end after tick $n"; exit $CODE
`

var tickRE = regexp.MustCompile(`(?m)^tick (\d+)$`)

// ticks lists the tick numbers of an output.
func ticks(out string) []int {
	var ns []int
	for _, m := range tickRE.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		ns = append(ns, n)
	}
	return ns
}

// awaitFile waits until a condition on the file system holds; the server
// is down, so there is no API to poll.
func awaitFile(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, waitLimit)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestKillAndRecover kills `qshare serve` with SIGKILL while two process
// jobs run and a third waits for capacity. While the server is down one
// running job goes on printing and the other ends with exit code 7. A
// server restarted on the same data directory re-attaches to the first
// (same pid, same attempt, its output goes on: no tick is repeated, and the
// job started once), records the second's end as FAILED with its exit code
// without running it again, starts the waiting job in the capacity that
// freed, and every job finishes with the right status and one attempt.
func TestKillAndRecover(t *testing.T) {
	skipShort(t)
	dataDir := newDataDir(t)
	s := startServer(t, dataDir, serverOpts{})
	oneShare(s, 2, false)
	g := newGates(t)
	keep := s.submit(job{name: "keep", share: "s", env: g.env("CODE", "0"), script: ticker})
	fail := s.submit(job{name: "fail", share: "s", env: g.env("CODE", "7"), script: ticker})
	s.awaitRunning(keep, 1)
	s.awaitRunning(fail, 1)
	waiter := s.submit(job{name: "waiter", share: "s", env: g.env("CODE", "0"), script: `echo "waiter ran attempt $QSHARE_ATTEMPT"`})
	pids := map[string]int{}
	for _, id := range []string{keep, fail} {
		pids[id] = pidIn(t, s.awaitLog(id, 1, "tick 3\n"))
	}
	if d := s.describe(waiter); d.Status != types.ServiceJobStatusRunnable {
		t.Fatalf("waiter is %s, want RUNNABLE behind the two running jobs", d.Status)
	}

	s.kill()
	for id, pid := range pids {
		if !alive(pid) {
			t.Fatalf("job %s (pid %d) died with the server", id, pid)
		}
	}
	keepLog := filepath.Join(s.attemptDir(keep, 1), "output.log")
	readTicks := func() []int {
		b, _ := os.ReadFile(keepLog)
		return ticks(string(b))
	}
	atKill := len(readTicks())
	// While the server is down, "fail" ends and its supervisor records how,
	// and "keep" goes on.
	g.release("fail")
	awaitFile(t, "the end of fail recorded while the server is down", func() bool {
		_, err := os.Stat(filepath.Join(s.attemptDir(fail, 1), "exit.json"))
		return err == nil
	})
	awaitFile(t, "keep printing while the server is down", func() bool { return len(readTicks()) >= atKill+3 })

	s2 := startServer(t, dataDir, serverOpts{})
	d := s2.describe(keep)
	if d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
		t.Fatalf("keep after the restart: %s with %d attempts, want RUNNING with its one attempt (%q)", d.Status, len(d.Attempts), aws.ToString(d.StatusReason))
	}
	if !alive(pids[keep]) {
		t.Fatalf("keep's process %d is gone after the restart", pids[keep])
	}
	// Its output goes on, through the restarted server's log endpoint.
	atRestart := len(readTicks())
	s2.awaitLog(keep, 1, "tick "+strconv.Itoa(atRestart+3)+"\n")

	d = s2.awaitStatus(fail, types.ServiceJobStatusFailed)
	if r := attemptReasons(d); len(r) != 1 || r[0] != "Essential process exited with code 7" {
		t.Errorf("fail: attempts %q, want one that exited with code 7", r)
	}
	if out := s2.mustLogs(fail, 1); strings.Count(out, "start pid=") != 1 || !strings.Contains(out, "end after tick") {
		t.Errorf("fail: its log does not show one run to its end:\n%s", out)
	}
	d = s2.awaitStatus(waiter, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 1 || s2.mustLogs(waiter, 1) != "waiter ran attempt 1\n" {
		t.Errorf("waiter: %d attempts, log %q", len(d.Attempts), s2.mustLogs(waiter, 1))
	}
	if d := s2.describe(keep); d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
		t.Errorf("keep: %s with %d attempts while the waiter ran, want RUNNING with one", d.Status, len(d.Attempts))
	}

	g.release("keep")
	d = s2.awaitStatus(keep, types.ServiceJobStatusSucceeded)
	if r := attemptReasons(d); len(r) != 1 || r[0] != "Essential process exited with code 0" {
		t.Errorf("keep: attempts %q, want one that exited with code 0", r)
	}
	out := s2.mustLogs(keep, 1)
	if n := strings.Count(out, "start pid="); n != 1 || pidIn(t, out) != pids[keep] {
		t.Errorf("keep started %d times (pid %d, was %d):\n%s", n, pidIn(t, out), pids[keep], out)
	}
	tk := ticks(out)
	for i, n := range tk {
		if n != i+1 {
			t.Fatalf("keep's ticks are not one run 1, 2, 3, …: %v", tk)
		}
	}
	if !strings.HasSuffix(out, "end after tick "+strconv.Itoa(len(tk))+"\n") {
		t.Errorf("keep's log does not end with its last tick:\n%s", out)
	}

	// No job was duplicated, nor any attempt run twice.
	var names []string
	pg := batch.NewListServiceJobsPaginator(s2.c, &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
		Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
	for pg.HasMorePages() {
		p, err := pg.NextPage(context.Background())
		must(t, err)
		for _, j := range p.JobSummaryList {
			names = append(names, aws.ToString(j.JobName))
		}
	}
	if len(names) != 3 {
		t.Errorf("the queue lists %v, want keep, fail and waiter once each", names)
	}
	for _, id := range []string{keep, fail, waiter} {
		if dirs, _ := filepath.Glob(filepath.Join(dataDir, "attempts", id, "*")); len(dirs) != 1 {
			t.Errorf("job %s has attempt directories %v, want one", id, dirs)
		}
	}
}
