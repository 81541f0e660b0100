package processe2e_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// trainer is a preemptible "training" script: it counts steps until its
// gate opens, saves the step to $SM_CHECKPOINT_DIR/step (write, rename) on
// SIGTERM and exits 0, and resumes from that file when it starts again. It
// writes its pid to $GATE/<job name>.pid. With SAVE_GATE set, its save on
// SIGTERM waits until the gate file $GATE/$SAVE_GATE exists: a checkpoint
// that takes as long as the test wants.
const trainer = `step=0
if [ -f "$SM_CHECKPOINT_DIR/step" ]; then step=$(cat "$SM_CHECKPOINT_DIR/step"); echo "resumed from step $step"; fi
echo "attempt $QSHARE_ATTEMPT pid=$$ starts after step $step"
echo $$ > "$GATE/$QSHARE_JOB_NAME.pid"
trap 'if [ -n "$SAVE_GATE" ]; then echo "SIGTERM: saving"; i=0; while [ ! -e "$GATE/$SAVE_GATE" ] && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.1; done; fi
echo $step > "$SM_CHECKPOINT_DIR/step.tmp" && mv "$SM_CHECKPOINT_DIR/step.tmp" "$SM_CHECKPOINT_DIR/step"; echo "SIGTERM: checkpointed step $step"; exit 0' TERM
while [ ! -e "$GATE/$QSHARE_JOB_NAME" ] && [ ! -e "$GATE/all" ] && [ $step -lt 600 ]; do step=$((step+1)); echo "step $step"; sleep 0.1 & wait $!; done
echo "finished after step $step"
`

var stepRE = regexp.MustCompile(`(?m)^step (\d+)$`)

// steps lists the step lines of an output.
func steps(out string) []int { return numbered(stepRE, out) }

// TestInSharePreemptionResume: a low-priority trainer runs; a higher
// priority job in the same share (in-share preemption ENABLED, capacity
// for one) preempts it. The trainer gets SIGTERM, writes its checkpoint
// and exits; the job goes back to RUNNABLE, the high-priority job runs and
// succeeds, and the trainer's second attempt resumes from the checkpoint
// (its log says so and counts on from the next step) and succeeds.
func TestInSharePreemptionResume(t *testing.T) {
	skipShort(t)
	inSharePreemptionResume(t, serverOpts{})
}

// inSharePreemptionResume is the body of TestInSharePreemptionResume, on a server started with o
// (TestSlurm runs it on the Slurm executor).
func inSharePreemptionResume(t *testing.T, o serverOpts) {
	s := startServer(t, newDataDir(t), o)
	oneShare(s, 1, true)
	g := newGates(t)
	low := s.submit(job{name: "low", share: "s", priority: 1, env: g.env(), script: trainer})
	s.awaitRunning(low, 1)
	s.awaitLog(low, 1, "step 3\n")
	high := s.submit(job{name: "high", share: "s", priority: 9, env: g.env(),
		script: `echo "high runs"; ` + waitGate + `echo "high done"`})

	// The trainer is preempted: RUNNABLE again, its attempt stopped.
	d := s.Await(low, "RUNNABLE after a preemption", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunnable && len(d.Attempts) == 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (in-share)") {
		t.Errorf("low: attempt 1 reason %q, want an in-share preemption", r)
	}
	ps := d.PreemptionSummary
	if ps == nil || aws.ToInt32(ps.PreemptedAttemptCount) != 1 || len(ps.RecentPreemptedAttempts) != 1 ||
		!strings.Contains(aws.ToString(ps.RecentPreemptedAttempts[0].StatusReason), "in-share") {
		t.Errorf("low: preemptionSummary %+v, want the one preempted attempt", ps)
	}
	// Its checkpoint and its first log agree on the step it reached.
	b, err := os.ReadFile(filepath.Join(s.dataDir, "jobs", low, "checkpoints", "step"))
	must(t, err)
	ckpt, err := strconv.Atoi(strings.TrimSpace(string(b)))
	must(t, err)
	out1 := s.mustLogs(low, 1)
	if ckpt < 3 || !strings.HasSuffix(out1, "SIGTERM: checkpointed step "+strconv.Itoa(ckpt)+"\n") {
		t.Errorf("low: checkpoint says step %d; attempt 1 log:\n%s", ckpt, out1)
	}
	if st := steps(out1); len(st) == 0 || st[len(st)-1] != ckpt {
		t.Errorf("low: attempt 1 counted %v, checkpoint %d", st, ckpt)
	}

	// The high-priority job runs only once the trainer's attempt ended.
	h := s.awaitRunning(high, 1)
	if aws.ToInt64(h.Attempts[0].StartedAt) < aws.ToInt64(d.Attempts[0].StoppedAt) {
		t.Errorf("high started at %d, before the preempted attempt stopped at %d", aws.ToInt64(h.Attempts[0].StartedAt), aws.ToInt64(d.Attempts[0].StoppedAt))
	}
	if d := s.Describe(low); d.Status != types.ServiceJobStatusRunnable {
		t.Errorf("low is %s while high runs on the only instance", d.Status)
	}
	g.release("high")
	s.AwaitStatus(high, types.ServiceJobStatusSucceeded)

	// Attempt 2 resumes from the checkpoint.
	s.awaitRunning(low, 2)
	out2 := s.awaitLog(low, 2, "step "+strconv.Itoa(ckpt+2)+"\n")
	if !strings.HasPrefix(out2, "resumed from step "+strconv.Itoa(ckpt)+"\nattempt 2 ") {
		t.Errorf("low: attempt 2 did not resume from step %d:\n%s", ckpt, out2)
	}
	if st := steps(out2); st[0] != ckpt+1 {
		t.Errorf("low: attempt 2 counted %v, want to start at step %d", st, ckpt+1)
	}
	g.release("low")
	d = s.AwaitStatus(low, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 2 || aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Errorf("low: %d attempts, %+v preemptions; want 2 and 1", len(d.Attempts), d.PreemptionSummary)
	}
	if out := s.mustLogs(low, 2); !strings.Contains(out, "finished after step") {
		t.Errorf("low: attempt 2 did not finish:\n%s", out)
	}
}

// TestCrossShareReclaim: a LEND_AND_BORROW share runs two jobs on an
// environment of two instances, one of them on the idle instance that a
// LEND share lends it. When the lender submits, the borrowing job is
// preempted (cross-share) and the lender's job runs; the borrower's other
// job keeps running, and the preempted one runs again when the lender's
// job has finished.
func TestCrossShareReclaim(t *testing.T) {
	skipShort(t)
	crossShareReclaim(t, serverOpts{})
}

// crossShareReclaim is the body of TestCrossShareReclaim, on a server started with o
// (TestSlurm runs it on the Slurm executor).
func crossShareReclaim(t *testing.T, o serverOpts) {
	s := startServer(t, newDataDir(t), o)
	s.setup(map[string]int32{cpu: 2},
		share{name: "lender", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyLend},
		share{name: "borrower", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(100)})
	g := newGates(t)
	script := `trap 'echo "SIGTERM: stopping"; exit 0' TERM; echo "$QSHARE_JOB_NAME attempt $QSHARE_ATTEMPT in $QSHARE_QUOTA_SHARE"; ` + waitGate + `echo done`
	b1 := s.submit(job{name: "b1", share: "borrower", env: g.env(), script: script})
	s.awaitRunning(b1, 1)
	b2 := s.submit(job{name: "b2", share: "borrower", env: g.env(), script: script})
	s.awaitRunning(b2, 1)
	s.awaitLog(b2, 1, "b2 attempt 1")
	l1 := s.submit(job{name: "l1", share: "lender", env: g.env(), script: script})

	s.awaitRunning(l1, 1)
	// The job that borrowed, b2 (the one admitted last), was preempted.
	d2 := s.Await(b2, "preempted", func(d *batch.DescribeServiceJobOutput) bool { return d.PreemptionSummary != nil })
	if d2.Status == types.ServiceJobStatusRunning && len(d2.Attempts) == 1 {
		t.Fatalf("b2 is still running its first attempt beside l1")
	}
	if r := aws.ToString(d2.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (cross-share)") {
		t.Errorf("b2: attempt 1 reason %q, want a cross-share preemption", r)
	}
	// The trap ran, and the script went no further. Under Slurm every
	// process of the step gets the signal, so a sleep of the gate loop
	// that it kills may add the shell's "Terminated" notice after it.
	if out := s.mustLogs(b2, 1); !strings.Contains(out, "SIGTERM: stopping\n") || strings.Contains(out, "\ndone\n") {
		t.Errorf("b2: attempt 1 was not stopped with SIGTERM:\n%s", out)
	}
	if d := s.Describe(b1); d.Status != types.ServiceJobStatusRunning || d.PreemptionSummary != nil || len(d.Attempts) != 1 {
		t.Errorf("b1, within its own share's capacity, is %s with %d attempts, preemptions %+v", d.Status, len(d.Attempts), d.PreemptionSummary)
	}
	if d := s.Describe(b2); d.Status != types.ServiceJobStatusRunnable {
		t.Errorf("b2 is %s while l1 uses the capacity it lent", d.Status)
	}

	g.release("l1")
	s.AwaitStatus(l1, types.ServiceJobStatusSucceeded)
	s.awaitRunning(b2, 2)
	s.awaitLog(b2, 2, "b2 attempt 2")
	g.release("all")
	for id, attempts := range map[string]int{b1: 1, b2: 2, l1: 1} {
		if d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded); len(d.Attempts) != attempts {
			t.Errorf("%s: %d attempts, want %d", aws.ToString(d.JobName), len(d.Attempts), attempts)
		}
	}
}

// TestPreemptionEnds: a job with preemptionRetriesBeforeTermination 0 is
// FAILED at its first preemption, after its checkpoint; a job terminated
// while it is still saving for a preemption is FAILED with the
// termination's reason, not requeued; the preemptor, which needs both
// instances, starts only when both have ended.
func TestPreemptionEnds(t *testing.T) {
	skipShort(t)
	s := startServer(t, newDataDir(t), serverOpts{})
	oneShare(s, 2, true)
	g := newGates(t)
	once := s.submit(job{name: "once", share: "s", priority: 1, preemptRetries: aws.Int32(0), env: g.env(), script: trainer})
	saving := s.submit(job{name: "saving", share: "s", priority: 2, env: g.env("SAVE_GATE", "save", "QSHARE_STOP_GRACE", "300"), script: trainer})
	for _, id := range []string{once, saving} {
		s.awaitRunning(id, 1)
		s.awaitLog(id, 1, "step 2\n")
	}
	both := s.submit(job{name: "both", share: "s", priority: 9, count: 2, env: g.env(), script: `echo "both runs"`})

	d := s.AwaitStatus(once, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); !strings.Contains(r, "Preempted by quota management (in-share)") || !strings.Contains(r, "preemptionRetriesBeforeTermination 0") {
		t.Errorf("once: reason %q, want the preemption and the exhausted retries", r)
	}
	if len(d.Attempts) != 1 || d.PreemptionSummary == nil || aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Errorf("once: %d attempts, preemptionSummary %+v", len(d.Attempts), d.PreemptionSummary)
	}
	if out := s.mustLogs(once, 1); !strings.Contains(out, "SIGTERM: checkpointed step") {
		t.Errorf("once: no checkpoint before it failed:\n%s", out)
	}

	s.awaitLog(saving, 1, "SIGTERM: saving")
	const why = "e2e: terminated while saving"
	_, err := s.C.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(saving), Reason: aws.String(why)})
	must(t, err)
	if d := s.Describe(both); d.Status == types.ServiceJobStatusRunning || len(d.Attempts) != 0 {
		t.Errorf("both is %s with %d attempts while saving still holds an instance", d.Status, len(d.Attempts))
	}
	g.release("save")
	d = s.AwaitStatus(saving, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); !aws.ToBool(d.IsTerminated) || !strings.Contains(r, why) || len(d.Attempts) != 1 {
		t.Errorf("saving: isTerminated %v, reason %q, %d attempts; want the termination, once", aws.ToBool(d.IsTerminated), r, len(d.Attempts))
	}
	h := s.AwaitStatus(both, types.ServiceJobStatusSucceeded)
	if len(h.Attempts) != 1 || aws.ToInt64(h.Attempts[0].StartedAt) < aws.ToInt64(d.Attempts[0].StoppedAt) {
		t.Errorf("both: attempts %+v; saving's stopped at %d", h.Attempts, aws.ToInt64(d.Attempts[0].StoppedAt))
	}
}
