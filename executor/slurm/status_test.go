package slurm

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/slurm/slurmtest"
)

// testSpec is the first attempt of job id: n instances of typ running sh.
func testSpec(id, typ string, n int, sh string) executor.Spec {
	return executor.Spec{JobID: id, JobName: id, AttemptID: id + "-attempt-1", Attempt: 1, Queue: "q", Share: "s",
		Demand: qshare.Capacity{typ: int64(n)}, Payload: payloadOf(sh, typ, n, nil)}
}

// gpuSpec is a job of nodes whole nodes of a GPU type running sh.
func gpuSpec(id string, nodes int, sh string) executor.Spec {
	return testSpec(id, "ml.g5.12xlarge", nodes, sh)
}

// eventually polls f every 50 ms until it is true or d passes.
func eventually(d time.Duration, f func() bool) bool {
	for deadline := time.Now().Add(d); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if f() {
			return true
		}
	}
	return f()
}

// beforeRestart is the start of a restart test on the cluster c: a
// shared directory, the first executor over it and a context of two
// minutes.
func beforeRestart(t *testing.T, c *slurmtest.Cluster) (string, *Executor, context.Context) {
	dir := t.TempDir()
	e1 := newExecutorOn(t, c, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return dir, e1, ctx
}

// pendingReason (TestWholeNodes): while both nodes are held by one job,
// a second whole-node job waits in Slurm, and PendingReason says why in
// Slurm's words (Resources); once the first ends, the second runs and
// the reason is gone.
func pendingReason(t *testing.T, c *slurmtest.Cluster) {
	e, err := New(context.Background(), Options{Config: testConfig(t.TempDir()), Env: c.Env(), Step: []string{os.Args[0]},
		StartWait: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	big, small := gpuSpec("hold", 2, "echo ready; exec sleep 3600"), gpuSpec("waits", 1, "echo ran")
	h, err := e.Start(ctx, big)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, h.LogPath, "ready\n", time.Minute)
	if _, err := e.Start(ctx, small); err != nil {
		t.Fatal(err)
	}
	var r string
	if !eventually(30*time.Second, func() bool { r = e.PendingReason(small.AttemptID); return r == "Resources" }) {
		t.Fatalf("PendingReason of a job that waits for nodes = %q, want Resources", r)
	}
	if r := e.PendingReason(big.AttemptID); r != "" {
		t.Errorf("PendingReason of the running job = %q, want \"\"", r)
	}
	if err := e.Stop(ctx, big.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Wait(ctx, big.AttemptID); err != nil {
		t.Fatal(err)
	}
	x, err := e.Wait(ctx, small.AttemptID)
	if err != nil || !x.Succeeded() {
		t.Fatalf("the waiting job, once the nodes were free: %+v, %v", x, err)
	}
	if r := e.PendingReason(small.AttemptID); r != "" {
		t.Errorf("PendingReason after the end = %q", r)
	}
}

// nodeFailure (TestOutages): a node of a running job is set DOWN;
// Slurm ends the job NODE_FAIL, and the attempt ends Lost (the daemon
// requeues it without using a retry) with a reason that says so.
func nodeFailure(t *testing.T, c *slurmtest.Cluster) {
	e := newExecutorOn(t, c, t.TempDir())
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := gpuSpec("nodefail", 1, "echo ready; exec sleep 3600")
	h, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, h.LogPath, "ready\n", time.Minute)
	id, err := e.findJob(ctx, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	node := nodeOf(ctx, t, c, id)
	if _, err := c.Command(ctx, "scontrol", "update", "NodeName="+node, "State=DOWN", "Reason=qshare-test"); err != nil {
		t.Fatal(err)
	}
	defer resumeNode(t, c, node)
	x, err := e.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("exit: %+v", x)
	if !x.Lost || x.Stopped || !strings.Contains(x.Reason, "NODE_FAIL") || !strings.Contains(x.Reason, "without using a retry") {
		t.Errorf("exit = %+v, want Lost with a NODE_FAIL reason", x)
	}
}

// nodeOf is the node that runs the one-node batch job id.
func nodeOf(ctx context.Context, t *testing.T, c *slurmtest.Cluster, id int64) string {
	t.Helper()
	node, err := c.Command(ctx, "squeue", "-h", "--jobs="+itoa(id), "-o", "%N")
	node = strings.TrimSpace(node)
	if err != nil || node == "" {
		t.Fatalf("the node of batch job %d: %q, %v", id, node, err)
	}
	return node
}

// resumeNode brings a node set DOWN back and waits until it is up. The
// node must be up again for the next tests: ReturnToService=2 brings it
// back once its slurmd registers, and RESUME makes sure.
func resumeNode(t *testing.T, c *slurmtest.Cluster, node string) {
	t.Helper()
	c.Command(context.Background(), "scontrol", "update", "NodeName="+node, "State=RESUME") //nolint:errcheck
	var out string
	if !eventually(time.Minute, func() bool {
		var err error
		out, err = c.Command(context.Background(), "sinfo", "-h", "-N", "-n", node, "-o", "%T")
		st := strings.TrimSpace(out)
		return err == nil && (st == "idle" || st == "mixed" || st == "allocated") // up, whatever else runs there
	}) {
		t.Errorf("node %s is %q a minute after RESUME, not up", node, out)
	}
}

// TestSweep: a batch job of this shared directory whose attempt the store
// does not hold (here: a server restarted over the same directory, with
// a store that never heard of the attempt) is cancelled by Sweep; one the
// store holds is kept, and so is one started since through the new
// executor.
func TestSweep(t *testing.T) {
	t.Parallel() // its jobs share nodes (see TestMain)
	c := testCluster(t)
	dir, e1, ctx := beforeRestart(t, c)
	small := func(id string) executor.Spec { return testSpec(id, "ml.m5.large", 1, "echo ready; exec sleep 3600") }
	stray, kept, fresh := small("stray"), small("kept"), small("fresh")
	for _, s := range []executor.Spec{stray, kept} {
		if _, err := e1.Start(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e1.Close()
	e2 := newTestExecutor(t, dir)
	defer e2.Close()
	if _, err := e2.Start(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	swept, err := e2.Sweep(ctx, map[string]bool{kept.AttemptID: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(swept) != 1 || swept[0] != stray.AttemptID {
		t.Fatalf("Sweep cancelled %v, want only %s", swept, stray.AttemptID)
	}
	state := func(s executor.Spec) string {
		out, _ := c.Command(ctx, "squeue", "-h", "--states=all", "--name="+jobName(s.AttemptID), "-o", "%T")
		return strings.TrimSpace(out)
	}
	if !eventually(30*time.Second, func() bool { st := state(stray); return st == "CANCELLED" || st == "" }) {
		t.Errorf("the stray job is %q after Sweep, want cancelled", state(stray))
	}
	for _, s := range []executor.Spec{kept, fresh} {
		if st := state(s); st != "RUNNING" && st != "PENDING" {
			t.Errorf("%s is %q after Sweep, want it left running", s.AttemptID, st)
		}
	}
	// A second sweep finds nothing more to do.
	if swept, err := e2.Sweep(ctx, map[string]bool{kept.AttemptID: true}); err != nil || len(swept) != 0 {
		t.Errorf("second Sweep = %v, %v; want nothing", swept, err)
	}
	if r, err := e2.Recover(ctx, executor.Handle{AttemptID: kept.AttemptID}); err != nil || r != executor.Running {
		t.Fatalf("Recover(kept) = %v, %v", r, err)
	}
	for _, s := range []executor.Spec{kept, fresh} {
		e2.Stop(ctx, s.AttemptID, time.Second)
		e2.Wait(ctx, s.AttemptID)
	}
}

func TestParseJobID(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"42\n", 42, true},
		{"17;qsharebench\n", 17, true},
		{"sbatch: error: Batch job submission failed\n", 0, false},
		{"", 0, false},
		{"0\n", 0, false},
	} {
		got, err := ParseJobID(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseJobID(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
}
