package processe2e_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// TestWorkedExample plays the spec's worked example (§6.10) with real job
// processes: three shares of one instance each (QS1 LEND_AND_BORROW with
// in-share preemption, QS2 LEND, QS3 RESERVE).
func TestWorkedExample(t *testing.T) {
	skipShort(t)
	workedExample(t, serverOpts{}, nil, shellJobs(t))
}

// exampleJobs are the worked example's jobs on one executor: plain ones,
// which print "NAME attempt N in SHARE" and wait until they are let go;
// the trainer of preempt_test.go, which checkpoints on SIGTERM and resumes;
// and the letting go of the server's jobs with the given IDs.
type exampleJobs struct {
	plain, trainer func(name, share string, prio int32) job
	release        func(s *server, ids ...string)
}

// shellJobs are the worked example's jobs as shell scripts that wait on
// gate files (the process and Slurm executors).
func shellJobs(t *testing.T) exampleJobs {
	g := newGates(t)
	script := `trap 'echo "SIGTERM: stopping"; exit 0' TERM; echo "$QSHARE_JOB_NAME attempt $QSHARE_ATTEMPT in $QSHARE_QUOTA_SHARE"; ` + waitGate + `echo done`
	return exampleJobs{
		plain: func(name, share string, prio int32) job {
			return job{name: name, share: share, priority: prio, env: g.env(), script: script}
		},
		trainer: func(name, share string, prio int32) job {
			return job{name: name, share: share, priority: prio, env: g.env(), script: trainer}
		},
		release: func(*server, ...string) { g.release("all") },
	}
}

// workedExample is the body of TestWorkedExample, on a server started
// with o (TestSlurm runs it on the Slurm executor, where running checks
// that exactly the named jobs have a running batch job; nil: nothing more
// to check). Its steps:
//  1. QS1 submits qs1-high (priority 3), qs1-med (2) and qs1-low (1):
//     high runs on QS1's instance, med on the one QS2 lends, and low waits
//     (QS3 reserves its own).
//  2. QS2 submits qs2-job-1: med, the borrower (the trainer of
//     preempt_test.go), is preempted (cross-share): it traps SIGTERM and
//     writes its checkpoint, and QS2's job runs.
//  3. qs1-low's priority is raised to 4: high is preempted (in-share) and
//     low runs.
//
// Then every job is let go and succeeds; the preempted ones on their
// second attempt, med's resumed from its checkpoint.
func workedExample(t *testing.T, o serverOpts, running func(t *testing.T, ids ...string), jobs exampleJobs) {
	s := startServer(t, newDataDir(t), o)
	s.setup(map[string]int32{cpu: 3},
		share{name: "QS1", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(200), inShare: true},
		share{name: "QS2", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyLend},
		share{name: "QS3", limits: map[string]int32{cpu: 1}, strategy: types.QuotaShareResourceSharingStrategyReserve})
	if running == nil {
		running = func(*testing.T, ...string) {}
	}
	sub := func(name, share string, prio int32) string { return s.submit(jobs.plain(name, share, prio)) }
	status := func(want map[string]types.ServiceJobStatus) {
		t.Helper()
		for id, st := range want {
			s.AwaitStatus(id, st)
		}
	}
	high := sub("qs1-high", "QS1", 3)
	s.awaitLog(high, 1, "qs1-high attempt 1 in QS1")
	med := s.submit(jobs.trainer("qs1-med", "QS1", 2))
	s.awaitLog(med, 1, "step 3\n")
	low := sub("qs1-low", "QS1", 1)

	// Step 1: QS1 borrows QS2's instance; low waits.
	status(map[string]types.ServiceJobStatus{high: types.ServiceJobStatusRunning, med: types.ServiceJobStatusRunning, low: types.ServiceJobStatusRunnable})
	running(t, high, med)
	if d := s.Describe(low); len(d.Attempts) != 0 {
		t.Errorf("step 1: qs1-low has %d attempts, want none (QS3 reserves its instance)", len(d.Attempts))
	}

	// Step 2: QS2 reclaims what it lent; med is preempted.
	q2 := sub("qs2-job-1", "QS2", 1)
	s.awaitLog(q2, 1, "qs2-job-1 attempt 1 in QS2")
	d := s.Await(med, "RUNNABLE after a cross-share preemption", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunnable && len(d.Attempts) == 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (cross-share)") {
		t.Errorf("step 2: qs1-med's attempt reason %q, want a cross-share preemption", r)
	}
	out := s.mustLogs(med, 1)
	ckpt := checkpointed(out)
	if ckpt < 3 {
		t.Errorf("step 2: qs1-med did not checkpoint on SIGTERM:\n%s", out)
	}
	status(map[string]types.ServiceJobStatus{high: types.ServiceJobStatusRunning, low: types.ServiceJobStatusRunnable, q2: types.ServiceJobStatusRunning})
	running(t, high, q2)

	// Step 3: a raised priority preempts inside QS1.
	_, err := s.C.UpdateServiceJob(context.Background(), &batch.UpdateServiceJobInput{JobId: aws.String(low), SchedulingPriority: aws.Int32(4)})
	must(t, err)
	s.awaitLog(low, 1, "qs1-low attempt 1 in QS1")
	d = s.Await(high, "RUNNABLE after an in-share preemption", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunnable && len(d.Attempts) == 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (in-share)") {
		t.Errorf("step 3: qs1-high's attempt reason %q, want an in-share preemption", r)
	}
	if p := aws.ToInt32(s.Describe(low).SchedulingPriority); p != 4 {
		t.Errorf("step 3: qs1-low has priority %d, want 4", p)
	}
	status(map[string]types.ServiceJobStatus{low: types.ServiceJobStatusRunning, med: types.ServiceJobStatusRunnable, q2: types.ServiceJobStatusRunning})
	running(t, low, q2)

	// The end: all let go; the preempted jobs run again and succeed.
	jobs.release(s, high, med, low, q2)
	for id, attempts := range map[string]int{high: 2, med: 2, low: 1, q2: 1} {
		d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
		if len(d.Attempts) != attempts {
			t.Errorf("%s: %d attempts, want %d", aws.ToString(d.JobName), len(d.Attempts), attempts)
		}
		if out := s.mustLogs(id, len(d.Attempts)); !strings.HasSuffix(out, "done\n") && !strings.Contains(out, "finished after step") {
			t.Errorf("%s: its last attempt did not run to its end:\n%s", aws.ToString(d.JobName), out)
		}
	}
	if out := s.mustLogs(med, 2); !strings.HasPrefix(out, fmt.Sprintf("resumed from step %d\n", ckpt)) {
		t.Errorf("qs1-med's attempt 2 did not resume from its checkpoint (step %d):\n%s", ckpt, out)
	}
	running(t)
}

// checkpointed returns the step of a trainer's "SIGTERM: checkpointed
// step N" line, or -1.
func checkpointed(out string) int {
	if m := checkpointRE.FindStringSubmatch(out); m != nil {
		n, _ := strconv.Atoi(m[1])
		return n
	}
	return -1
}

var checkpointRE = regexp.MustCompile(`(?m)^SIGTERM: checkpointed step (\d+)$`)

// sameIDs reports whether got, once sorted, is want sorted.
func sameIDs(got, want []string) bool {
	got, want = slices.Clone(got), slices.Clone(want)
	slices.Sort(got)
	slices.Sort(want)
	return slices.Equal(got, want)
}
