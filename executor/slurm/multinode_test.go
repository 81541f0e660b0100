package slurm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/aws/s3/s3test"
	"qshare/executor"
	"qshare/executor/slurm/slurmtest"
	"qshare/trainingjob"
)

func runToEnd(t *testing.T, e *Executor, s executor.Spec) (executor.Handle, executor.Exit) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := e.Start(ctx, s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	x, err := e.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return h, x
}

// twoNodeJob (TestWholeNodes) runs a job of two instances of a GPU type:
// one batch job on both nodes, whole nodes each, and every node sees
// both in SM_HOSTS, itself in SM_CURRENT_HOST and resourceconfig.json,
// and its GPUs.
func twoNodeJob(t *testing.T, c *slurmtest.Cluster) {
	e := newExecutorOn(t, c, t.TempDir())
	defer e.Close()
	sh := `echo "host=$SM_CURRENT_HOST hosts=$SM_HOSTS gpus=$SM_NUM_GPUS cuda=$CUDA_VISIBLE_DEVICES attempt=$QSHARE_ATTEMPT"; ` +
		`echo "rc=$(cat "$SM_INPUT_CONFIG_DIR/resourceconfig.json")"; test -f "$SM_INPUT_CONFIG_DIR/hyperparameters.json"`
	s := executor.Spec{JobID: "two", JobName: "two", AttemptID: "two-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.g5.12xlarge": 2}, Payload: payloadOf(sh, "ml.g5.12xlarge", 2, nil)}
	h, x := runToEnd(t, e, s)
	if !x.Succeeded() {
		t.Fatalf("exit = %+v", x)
	}
	b, err := os.ReadFile(h.LogPath)
	if err != nil {
		t.Fatal(err)
	}
	log := string(b)
	for _, host := range []string{"n1", "n2"} {
		want := `host=` + host + ` hosts=["n1","n2"] gpus=2 cuda=0,1 attempt=1`
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
		if !strings.Contains(log, `"current_host":"`+host+`"`) {
			t.Errorf("no resourceconfig.json with current_host %s:\n%s", host, log)
		}
	}

	// A failure on one node is the attempt's failure.
	s2 := s
	s2.AttemptID = "two-attempt-2"
	s2.Attempt = 2
	s2.Payload = payloadOf(`[ "$SM_CURRENT_HOST" = n2 ] && exit 3; exit 0`, "ml.g5.12xlarge", 2, nil)
	if _, x := runToEnd(t, e, s2); x.ExitCode != 3 || x.Reason != "Essential process exited with code 3" {
		t.Errorf("exit with n2 failing = %+v, want code 3", x)
	}
}

// preemptionResumesFromCheckpoint (TestWholeNodes) stops a job that
// traps SIGTERM and writes a checkpoint, then starts its next attempt,
// which finds the checkpoint in the same SM_CHECKPOINT_DIR and resumes
// from it.
func preemptionResumesFromCheckpoint(t *testing.T, c *slurmtest.Cluster) {
	e := newExecutorOn(t, c, t.TempDir())
	defer e.Close()
	sh := `ck="$SM_CHECKPOINT_DIR/step"
if [ -f "$ck" ]; then echo "resumed from step $(cat "$ck") on attempt $QSHARE_ATTEMPT"; exit 0; fi
trap 'kill $! 2>/dev/null; echo 41 > "$ck"; echo "checkpoint written"; exit 0' TERM
sleep 3600 &
echo ready
wait $!`
	s := executor.Spec{JobID: "ck", JobName: "ck", AttemptID: "ck-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.g5.12xlarge": 1}, Payload: payloadOf(sh, "ml.g5.12xlarge", 1, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	h, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, h.LogPath, "ready\n", time.Minute)
	if err := e.Stop(ctx, s.AttemptID, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	x, err := e.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if !x.Stopped || x.ExitCode != 0 || x.Signal != "" {
		t.Fatalf("preempted exit = %+v, want stopped with code 0", x)
	}
	if b, _ := os.ReadFile(filepath.Join(e.root, "jobs", "ck", "checkpoints", "step")); strings.TrimSpace(string(b)) != "41" {
		t.Fatalf("checkpoint = %q, want 41", b)
	}
	s2 := s
	s2.AttemptID, s2.Attempt = "ck-attempt-2", 2
	h2, x2 := runToEnd(t, e, s2)
	if !x2.Succeeded() {
		t.Fatalf("second attempt: %+v", x2)
	}
	b, _ := os.ReadFile(h2.LogPath)
	if !strings.Contains(string(b), "resumed from step 41 on attempt 2") {
		t.Errorf("second attempt's log %q, want it resumed from the checkpoint", b)
	}
}

// TestPlantedLinks: a job that replaces a directory qshare writes to, or
// its log, with a link gets a clear refusal naming the path in the job's
// directory, and no server path.
func TestPlantedLinks(t *testing.T) {
	t.Parallel() // its jobs share nodes (see TestMain)
	dir := t.TempDir()
	e := newTestExecutor(t, dir)
	defer e.Close()
	secret := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "jobs", "evil"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(secret, filepath.Join(dir, "jobs", "evil", "output")); err != nil {
		t.Fatal(err)
	}
	s := executor.Spec{JobID: "evil", JobName: "evil", AttemptID: "evil-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.m5.large": 1}, Payload: payloadOf("true", "ml.m5.large", 1, nil)}
	_, err := e.Start(context.Background(), s)
	if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "output") || strings.Contains(err.Error(), dir) {
		t.Errorf("Start over a planted link = %v, want EINVALID naming output and no server path", err)
	}
	if ents, _ := os.ReadDir(secret); len(ents) != 0 {
		t.Errorf("Start wrote through the link: %v", ents)
	}

	// A log replaced by a link is not served.
	s.JobID, s.AttemptID = "ok", "ok-attempt-1"
	_, x := runToEnd(t, e, s)
	if !x.Succeeded() {
		t.Fatalf("exit = %+v", x)
	}
	logPath := filepath.Join(dir, "attempts", s.AttemptID, "output.log")
	os.Remove(logPath)
	if err := os.Symlink("/etc/passwd", logPath); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Logs(context.Background(), s.AttemptID, false); qshare.ErrorCodeOf(err) != qshare.EINVALID || strings.Contains(err.Error(), dir) {
		t.Errorf("Logs of a linked log = %v, want EINVALID without server paths", err)
	}
}

// TestCancelledByHand: a batch job cancelled outside qshare ends its
// attempt with a reason that says so.
func TestCancelledByHand(t *testing.T) {
	t.Parallel() // its jobs share nodes (see TestMain)
	e := newTestExecutor(t, t.TempDir())
	defer e.Close()
	s := executor.Spec{JobID: "hand", JobName: "hand", AttemptID: "hand-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.m5.large": 1}, Payload: payloadOf("echo ready; exec sleep 3600", "ml.m5.large", 1, nil)}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, id := startReady(ctx, t, e, s)
	if _, err := testCluster(t).Command(ctx, "scancel", itoa(id)); err != nil {
		t.Fatal(err)
	}
	x, err := e.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit: %+v", x)
	if x.Succeeded() || x.Stopped || !strings.Contains(x.Reason, "cancelled in Slurm") {
		t.Errorf("exit = %+v, want a failure that says the job was killed or cancelled outside qshare", x)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// TestCheckCapacity counts the partition's nodes with sinfo.
func TestCheckCapacity(t *testing.T) {
	t.Parallel() // its jobs share nodes (see TestMain)
	e := newTestExecutor(t, t.TempDir())
	defer e.Close()
	if w := e.CheckCapacity(qshare.Capacity{"ml.g5.12xlarge": 2, "ml.m5.large": 100}); w != "" {
		t.Errorf("two nodes' worth: warning %q", w)
	}
	if w := e.CheckCapacity(qshare.Capacity{"ml.g5.12xlarge": 3}); !strings.Contains(w, "partition qs has 2 nodes") {
		t.Errorf("three nodes' worth: warning %q, want one that counts 2 nodes", w)
	}
	if w := e.CheckCapacity(qshare.Capacity{"ml.x.unknown": 1}); !strings.Contains(w, "not in the Slurm executor's configuration") {
		t.Errorf("unknown type: warning %q", w)
	}
}

// controllerStopped (TestOutages) stops slurmctld while an attempt
// runs: Start of another attempt waits, retrying, until its context ends
// (and is then retried by its caller), the running one keeps its state
// and, once its job has ended, Wait does not return; once slurmctld is
// back, the running attempt's exit is recorded and the retried Start
// submits one batch job. The job ends on a gate file once the executors
// say slurmctld is down, and slurmctld comes back as soon as the step
// runner has recorded the end: the job's slurmstepd, which tells
// slurmctld that the batch script ended, then still retries its first
// connection (for most of MessageTimeout), rather than waiting 15 s
// (Slurm's fixed delay) for its second try.
func controllerStopped(t *testing.T, c *slurmtest.Cluster) {
	dir := t.TempDir()
	e, err := New(context.Background(), Options{Config: testConfig(dir), Env: c.Env(), Step: []string{os.Args[0]},
		CommandTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// idle has no attempt to poll: it learns of the outage from its ping.
	idle := newExecutorOn(t, c, t.TempDir())
	defer idle.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gate := filepath.Join(t.TempDir(), "gate")
	run := executor.Spec{JobID: "down", JobName: "down", AttemptID: "down-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.m5.large": 1}, Payload: payloadOf("echo ready; while [ ! -e '"+gate+"' ]; do sleep 0.1; done; exit 5", "ml.m5.large", 1, nil)}
	h, err := e.Start(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, h.LogPath, "ready\n", time.Minute)
	if err := c.StopController(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	defer func() {
		if !restarted {
			c.StartController(context.Background())
		}
	}()
	later := run
	later.JobID, later.AttemptID = "later", "later-attempt-1"
	// A Start waits (and retries) while slurmctld is down: this one
	// gives up with its context.
	sctx, scancel := context.WithTimeout(ctx, 4*time.Second)
	if _, err := e.Start(sctx, later); err == nil {
		t.Errorf("Start with slurmctld down succeeded")
	}
	scancel()
	// The executors say so, for the environments' statusReason.
	if h := e.Health(); !strings.Contains(h, "slurmctld does not answer") {
		t.Errorf("Health with slurmctld down = %q", h)
	}
	if !eventually(45*time.Second, func() bool { return strings.Contains(idle.Health(), "slurmctld does not answer") }) {
		t.Errorf("Health of an idle executor with slurmctld down = %q", idle.Health())
	}
	// The running attempt's job ends (exit 5) while nobody can ask Slurm:
	// its attempt keeps its capacity, and Wait does not return.
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if !eventually(30*time.Second, func() bool { return len(e.exitRecords(run.AttemptID)) > 0 }) {
		t.Fatalf("the step runner recorded no exit of %s within 30 s of its gate", run.AttemptID)
	}
	wctx, wcancel := context.WithTimeout(ctx, 2*time.Second)
	if x, err := e.Wait(wctx, run.AttemptID); err == nil {
		t.Errorf("Wait returned %+v while slurmctld was down", x)
	}
	wcancel()
	if err := c.StartController(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	x, err := e.Wait(ctx, run.AttemptID)
	if err != nil || x.ExitCode != 5 {
		t.Errorf("exit after slurmctld came back = %+v, %v; want code 5", x, err)
	}
	for _, x := range []*Executor{e, idle} {
		if !eventually(30*time.Second, func() bool { return x.Health() == "" }) {
			t.Errorf("Health once slurmctld answers again = %q, want \"\"", x.Health())
		}
	}
	// The retried Start submits the job, once.
	if _, err := e.Start(ctx, later); err != nil {
		t.Fatalf("retried Start: %v", err)
	}
	if _, err := e.Start(ctx, later); err != nil {
		t.Fatalf("second retried Start: %v", err)
	}
	out, err := c.Command(ctx, "squeue", "-h", "--states=all", "--name="+jobName(later.AttemptID), "-o", "%i")
	if err != nil || len(strings.Fields(out)) != 1 {
		t.Errorf("batch jobs of the retried attempt: %q, %v; want exactly one", out, err)
	}
	e.Stop(ctx, later.AttemptID, time.Second)
	e.Wait(ctx, later.AttemptID)
}

// exitAfterSlurmForgot (TestOutages): the server is away for longer
// than MinJobAge; after the restart Slurm no longer knows the batch
// jobs, and the exits come from the step runners' records, one per node.
func exitAfterSlurmForgot(t *testing.T, c *slurmtest.Cluster) {
	one := testSpec("gone", "ml.m5.large", 1, "echo ready; exit 7")
	two := gpuSpec("gone2", 2, `echo ready; [ "$SM_CURRENT_HOST" = n2 ] && kill -USR1 $$; exit 0`)
	e2, ctx := awayAndBack(t, c, []executor.Spec{one, two}, func(context.Context, []int64) {})
	for _, tc := range []struct {
		s      executor.Spec
		code   int
		signal string
	}{{one, 7, ""}, {two, -1, "SIGUSR1"}} {
		if x := recoverExit(ctx, t, e2, tc.s, executor.Exited); x.ExitCode != tc.code || x.Signal != tc.signal {
			t.Errorf("%s: exit %+v; want code %d signal %q", tc.s.AttemptID, x, tc.code, tc.signal)
		}
	}
}

// twoNodeJobStagesItsShare (TestWholeNodes) runs a job of two instances
// whose channel is ShardedByS3Key, against the embedded S3 store: the
// step runner on each node stages that node's share of the keys (node k
// of 2 gets the keys i with i mod 2 = k, as the process and container
// executors split them) into a directory of its own before the command
// starts, and the first node's model is in S3 as model.tar.gz, under the
// attempt's training job name, once the job has ended.
func twoNodeJobStagesItsShare(t *testing.T, c *slurmtest.Cluster) {
	ep, s3c := s3test.Start(t, map[string]map[string]string{"qshare-data": {
		"train/a.csv": "a", "train/b.csv": "b", "train/c.csv": "c", "train/d.csv": "d"}})
	e, err := New(context.Background(), Options{Config: testConfig(t.TempDir()), Env: c.Env(), Step: []string{os.Args[0]}, S3: ep})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	sh := `echo "share of $SM_CURRENT_HOST: $(cd "$SM_CHANNEL_TRAIN" && echo *)"; ` +
		`if [ "$SM_CURRENT_HOST" = n1 ]; then echo "weights of $SM_CURRENT_HOST" > "$SM_MODEL_DIR/model.bin"; fi`
	var p map[string]any
	if err := json.Unmarshal([]byte(payloadOf(sh, "ml.g5.12xlarge", 2, nil)), &p); err != nil {
		t.Fatal(err)
	}
	p["InputDataConfig"] = []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{
		"S3DataType": "S3Prefix", "S3Uri": "s3://qshare-data/train/", "S3DataDistributionType": "ShardedByS3Key"}}}}
	p["OutputDataConfig"] = map[string]any{"S3OutputPath": "s3://qshare-data/output"}
	b, _ := json.Marshal(p)
	s := executor.Spec{JobID: "sharded", JobName: "sharded", AttemptID: "sharded-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.g5.12xlarge": 2}, Payload: string(b)}
	h, x := runToEnd(t, e, s)
	log, _ := os.ReadFile(h.LogPath)
	if !x.Succeeded() {
		t.Fatalf("exit = %+v\n%s", x, log)
	}
	for _, want := range []string{"share of n1: a.csv c.csv\n", "share of n2: b.csv d.csv\n"} {
		if !strings.Contains(string(log), want) {
			t.Errorf("the log lacks %q:\n%s", want, log)
		}
	}
	req, err := trainingjob.Parse(s.Payload)
	if err != nil {
		t.Fatal(err)
	}
	model := s3test.TarGz(t, s3c, "qshare-data", "output/"+s.TrainingJobName(req)+"/output/model.tar.gz")
	if model["model.bin"] != "weights of n1\n" || len(model) != 1 {
		t.Errorf("model.tar.gz holds %q, want model.bin of n1 alone", model)
	}
}
