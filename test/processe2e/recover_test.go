package processe2e_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
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
func ticks(out string) []int { return numbered(tickRE, out) }

// numbered lists the numbers that re's first group matches in out, in order.
func numbered(re *regexp.Regexp, out string) []int {
	var ns []int
	for _, m := range re.FindAllStringSubmatch(out, -1) {
		n, _ := strconv.Atoi(m[1])
		ns = append(ns, n)
	}
	return ns
}

// restartable starts a server on a new data directory, for a second server
// to start again on, with one share of n instances (in-share preemption
// as inShare) and gates for the jobs. It skips the test in -short mode.
func restartable(t *testing.T, n int32, inShare bool) (dataDir string, s *server, g *gates) {
	t.Helper()
	skipShort(t)
	dataDir = newDataDir(t)
	s = startServer(t, dataDir, serverOpts{})
	oneShare(s, n, inShare)
	return dataDir, s, newGates(t)
}

// awaitRequeuedInShare waits until the first attempt of job id has
// stopped, and checks that it was preempted in-share and the job requeued,
// not ended. It returns the job as it then was.
func awaitRequeuedInShare(t *testing.T, s *server, id string) *batch.DescribeServiceJobOutput {
	t.Helper()
	d := s.Await(id, "its first attempt stopped", func(d *batch.DescribeServiceJobOutput) bool {
		return len(d.Attempts) >= 1 && d.Attempts[0].StoppedAt != nil
	})
	if d.Status == types.ServiceJobStatusFailed || d.Status == types.ServiceJobStatusSucceeded {
		t.Fatalf("%s is %s (%q) after its preempted attempt ended; want it requeued", aws.ToString(d.JobName), d.Status, aws.ToString(d.StatusReason))
	}
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (in-share)") {
		t.Errorf("%s: attempt 1 reason %q, want the in-share preemption", aws.ToString(d.JobName), r)
	}
	return d
}

// killSupervisor kills with SIGKILL the supervisor of the job's first
// attempt, once the server is down, after checking that the supervisor the
// attempt's start recorded is the one running. It returns that start.
func killSupervisor(t *testing.T, s *server, id string) *attemptStart {
	t.Helper()
	st, _ := readAttempt(s.attemptDir(id, 1))
	if st == nil {
		t.Fatal("the attempt's start is not recorded")
	}
	if start, ok := startTime(st.Supervisor.PID); !ok || start != st.Supervisor.Start {
		t.Fatalf("the supervisor %d recorded at the start is not running", st.Supervisor.PID)
	}
	must(t, syscall.Kill(st.Supervisor.PID, syscall.SIGKILL))
	return st
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
	dataDir, s, g := restartable(t, 2, false)
	keep := s.submit(job{name: "keep", share: "s", env: g.env("CODE", "0"), script: ticker})
	fail := s.submit(job{name: "fail", share: "s", env: g.env("CODE", "7"), script: ticker})
	s.awaitRunning(keep, 1)
	s.awaitRunning(fail, 1)
	waiter := s.submit(job{name: "waiter", share: "s", env: g.env("CODE", "0"), script: `echo "waiter ran attempt $QSHARE_ATTEMPT"`})
	pids := map[string]int{}
	for _, id := range []string{keep, fail} {
		pids[id] = pidIn(t, s.awaitLog(id, 1, "tick 3\n"))
	}
	if d := s.Describe(waiter); d.Status != types.ServiceJobStatusRunnable {
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
		_, ended := readAttempt(s.attemptDir(fail, 1))
		return ended
	})
	awaitFile(t, "keep printing while the server is down", func() bool { return len(readTicks()) >= atKill+3 })

	s2 := startServer(t, dataDir, serverOpts{})
	d := s2.Describe(keep)
	if d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
		t.Fatalf("keep after the restart: %s with %d attempts, want RUNNING with its one attempt (%q)", d.Status, len(d.Attempts), aws.ToString(d.StatusReason))
	}
	if !alive(pids[keep]) {
		t.Fatalf("keep's process %d is gone after the restart", pids[keep])
	}
	// Its output goes on, through the restarted server's log endpoint.
	atRestart := len(readTicks())
	s2.awaitLog(keep, 1, "tick "+strconv.Itoa(atRestart+3)+"\n")

	d = s2.AwaitStatus(fail, types.ServiceJobStatusFailed)
	if r := attemptReasons(d); len(r) != 1 || r[0] != "Essential process exited with code 7" {
		t.Errorf("fail: attempts %q, want one that exited with code 7", r)
	}
	if out := s2.mustLogs(fail, 1); strings.Count(out, "start pid=") != 1 || !strings.Contains(out, "end after tick") {
		t.Errorf("fail: its log does not show one run to its end:\n%s", out)
	}
	d = s2.AwaitStatus(waiter, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 1 || s2.mustLogs(waiter, 1) != "waiter ran attempt 1\n" {
		t.Errorf("waiter: %d attempts, log %q", len(d.Attempts), s2.mustLogs(waiter, 1))
	}
	if d := s2.Describe(keep); d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
		t.Errorf("keep: %s with %d attempts while the waiter ran, want RUNNING with one", d.Status, len(d.Attempts))
	}

	g.release("keep")
	d = s2.AwaitStatus(keep, types.ServiceJobStatusSucceeded)
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
	pg := batch.NewListServiceJobsPaginator(s2.C, &batch.ListServiceJobsInput{JobQueue: aws.String("q"),
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
		if dirs, _ := filepath.Glob(filepath.Join(dataDir, "attempts", id+"-*")); len(dirs) != 1 {
			t.Errorf("job %s has attempt directories %v, want one", id, dirs)
		}
	}
}

// TestKillWhileStopping kills the server while two attempts are being
// stopped and are still writing their checkpoints: one preempted (in-share,
// for a higher-priority job) and one terminated. The restarted server must
// remember why each was stopped: once their checkpoints are written, the
// preempted job returns to RUNNABLE and later resumes from its checkpoint,
// the terminated one is FAILED with the termination's reason, and the
// preemptor starts only after its victim's process is gone.
func TestKillWhileStopping(t *testing.T) {
	dataDir, s, g := restartable(t, 2, true)
	low := s.submit(job{name: "low", share: "s", priority: 1, env: g.env("SAVE_GATE", "save-low", "QSHARE_STOP_GRACE", "300"), script: trainer})
	term := s.submit(job{name: "term", share: "s", priority: 5, env: g.env("SAVE_GATE", "save-term", "QSHARE_STOP_GRACE", "300"), script: trainer})
	for _, id := range []string{low, term} {
		s.awaitRunning(id, 1)
		s.awaitLog(id, 1, "step 2\n")
	}
	high := s.submit(job{name: "high", share: "s", priority: 9, env: g.env(), script: runningSh + `
if running "$(cat "$GATE/low.pid")"; then echo "OVERLAP: low still runs"; fi
echo "high runs"; ` + waitGate + `echo "high done"`})
	s.awaitLog(low, 1, "SIGTERM: saving")
	const why = "e2e: terminated before the crash"
	_, err := s.C.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(term), Reason: aws.String(why)})
	must(t, err)
	s.awaitLog(term, 1, "SIGTERM: saving")
	if d := s.Describe(high); d.Status == types.ServiceJobStatusRunning {
		t.Fatalf("high runs while its victim is still saving")
	}

	s.kill()
	s2 := startServer(t, dataDir, serverOpts{})
	for _, id := range []string{low, term} {
		if d := s2.Describe(id); d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
			t.Errorf("%s after the restart: %s with %d attempts, want RUNNING (still saving) with one", aws.ToString(d.JobName), d.Status, len(d.Attempts))
		}
	}
	if d := s2.Describe(high); d.Status == types.ServiceJobStatusRunning {
		t.Errorf("high runs after the restart while its victim is still saving")
	}
	if d := s2.Describe(term); !aws.ToBool(d.IsTerminated) {
		t.Errorf("term: the restarted server forgot the termination")
	}

	// low saves first: high can then run only in the capacity low held,
	// since term still holds the rest.
	g.release("save-low")
	d := awaitRequeuedInShare(t, s2, low)
	s2.awaitRunning(high, 1)
	if out := s2.awaitLog(high, 1, "high runs"); strings.Contains(out, "OVERLAP") {
		t.Errorf("high started while low's process was alive:\n%s", out)
	}
	if d := s2.Describe(term); d.Status != types.ServiceJobStatusRunning {
		t.Errorf("term is %s before its checkpoint is written", d.Status)
	}
	g.release("save-term")
	d = s2.AwaitStatus(term, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); !aws.ToBool(d.IsTerminated) || !strings.Contains(r, why) || len(d.Attempts) != 1 {
		t.Errorf("term: isTerminated %v, reason %q, %d attempts; want the termination, once", aws.ToBool(d.IsTerminated), r, len(d.Attempts))
	}
	if out := s2.mustLogs(term, 1); !strings.Contains(out, "SIGTERM: checkpointed step") {
		t.Errorf("term: its checkpoint was not written:\n%s", out)
	}
	out := s2.mustLogs(low, 1)
	m := regexp.MustCompile(`SIGTERM: checkpointed step (\d+)\n$`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("low: attempt 1 did not checkpoint:\n%s", out)
	}
	s2.awaitRunning(low, 2)
	if out := s2.awaitLog(low, 2, "step "); !strings.HasPrefix(out, "resumed from step "+m[1]+"\n") {
		t.Errorf("low: attempt 2 did not resume from step %s:\n%s", m[1], out)
	}
	g.release("all")
	for id, attempts := range map[string]int{low: 2, high: 1} {
		if d := s2.AwaitStatus(id, types.ServiceJobStatusSucceeded); len(d.Attempts) != attempts {
			t.Errorf("%s: %d attempts, want %d", aws.ToString(d.JobName), len(d.Attempts), attempts)
		}
	}
}

// TestKillWhilePreemptingPreemptorGone: while a preempted attempt is still
// writing its checkpoint, the preemptor is terminated and the server is
// killed. The restarted scheduler has no reason left to preempt anything:
// only the persisted decision says that the attempt was preempted. When
// the checkpoint is written the job must be requeued as preempted (not
// failed, though it exits 0 and the new server never decided to stop it)
// and resume from its checkpoint on attempt 2.
func TestKillWhilePreemptingPreemptorGone(t *testing.T) {
	dataDir, s, g := restartable(t, 1, true)
	low := s.submit(job{name: "low", share: "s", priority: 1, env: g.env("SAVE_GATE", "save", "QSHARE_STOP_GRACE", "300"), script: trainer})
	s.awaitRunning(low, 1)
	s.awaitLog(low, 1, "step 2\n")
	high := s.submit(job{name: "high", share: "s", priority: 9, env: g.env(), script: `echo "high runs"`})
	s.awaitLog(low, 1, "SIGTERM: saving")
	_, err := s.C.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(high), Reason: aws.String("e2e: not needed")})
	must(t, err)
	if d := s.AwaitStatus(high, types.ServiceJobStatusFailed); len(d.Attempts) != 0 {
		t.Errorf("high ran %d attempts while its victim was saving", len(d.Attempts))
	}

	s.kill()
	s2 := startServer(t, dataDir, serverOpts{})
	if d := s2.Describe(low); d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
		t.Errorf("low after the restart: %s with %d attempts, want RUNNING (still saving) with one", d.Status, len(d.Attempts))
	}
	g.release("save")
	d := awaitRequeuedInShare(t, s2, low)
	s2.awaitRunning(low, 2)
	m := regexp.MustCompile(`SIGTERM: checkpointed step (\d+)\n$`).FindStringSubmatch(s2.mustLogs(low, 1))
	if m == nil {
		t.Fatalf("low: attempt 1 did not checkpoint:\n%s", s2.mustLogs(low, 1))
	}
	if out := s2.awaitLog(low, 2, "step "); !strings.HasPrefix(out, "resumed from step "+m[1]+"\n") {
		t.Errorf("low: attempt 2 did not resume from step %s:\n%s", m[1], out)
	}
	g.release("all")
	d = s2.AwaitStatus(low, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 2 || d.PreemptionSummary == nil || aws.ToInt32(d.PreemptionSummary.PreemptedAttemptCount) != 1 {
		t.Errorf("low: %d attempts, preemptions %+v; want 2 and 1", len(d.Attempts), d.PreemptionSummary)
	}
}

// TestLostAttemptRequeued: the server and then the attempt's supervisor
// are killed with SIGKILL; the job, which loses its output pipe, dies of
// its next write, and no one records how it ended. The restarted server
// cannot know the attempt's fate, so it requeues the job with a reason
// that says so, and the job runs again (attempt 2) and succeeds.
func TestLostAttemptRequeued(t *testing.T) {
	dataDir, s, g := restartable(t, 1, false)
	id := s.submit(job{name: "orphan", share: "s", env: g.env("CODE", "0"), script: ticker})
	s.awaitRunning(id, 1)
	pid := pidIn(t, s.awaitLog(id, 1, "tick 2\n"))

	s.kill()
	killSupervisor(t, s, id)
	awaitFile(t, "the job dies once its output pipe is gone", func() bool { return !alive(pid) })

	s2 := startServer(t, dataDir, serverOpts{})
	d := s2.Await(id, "requeued and running again", func(d *batch.DescribeServiceJobOutput) bool { return len(d.Attempts) == 2 })
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Attempt lost") {
		t.Errorf("attempt 1 reason %q, want one that says the attempt was lost", r)
	}
	s2.awaitRunning(id, 2)
	if out := s2.awaitLog(id, 2, "tick 1\n"); !strings.HasPrefix(out, "start pid=") || pidIn(t, out) == pid {
		t.Errorf("attempt 2 did not start afresh:\n%s", out)
	}
	g.release("orphan")
	d = s2.AwaitStatus(id, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 2 || d.PreemptionSummary != nil {
		t.Errorf("%d attempts, preemptionSummary %+v: want 2 attempts and no preemption", len(d.Attempts), d.PreemptionSummary)
	}
}

// TestOrphanStillRunning: the server and the supervisor are killed with
// SIGKILL while two silent jobs run (they write nothing more, so they
// outlive their output pipe). The restarted server watches them from
// outside, by pid and start time: one ends on its own, and only then is it
// requeued as lost and run again (its attempt 2 checks that attempt 1's
// process is gone); the other is terminated, which signals its process
// group directly, and ends FAILED with the reason, its group gone.
func TestOrphanStillRunning(t *testing.T) {
	dataDir, s, g := restartable(t, 2, false)
	const silent = runningSh + `echo $$ > "$GATE/$QSHARE_JOB_NAME.pid.$QSHARE_ATTEMPT"
if [ "$QSHARE_ATTEMPT" != 1 ] && running "$(cat "$GATE/$QSHARE_JOB_NAME.pid.1")"; then echo "OVERLAP: attempt 1 still runs"; fi
echo "attempt $QSHARE_ATTEMPT pid=$$"
i=0; while [ ! -e "$GATE/$QSHARE_JOB_NAME.go$QSHARE_ATTEMPT" ] && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.1; done`
	ends := s.submit(job{name: "ends", share: "s", env: g.env(), script: silent})
	stopped := s.submit(job{name: "stopped", share: "s", env: g.env(), script: silent})
	pids := map[string]int{}
	for _, id := range []string{ends, stopped} {
		s.awaitRunning(id, 1)
		pids[id] = pidIn(t, s.awaitLog(id, 1, "pid="))
	}

	s.kill()
	st := killSupervisor(t, s, ends)
	awaitFile(t, "the supervisor is gone", func() bool { s, ok := startTime(st.Supervisor.PID); return !ok || s != st.Supervisor.Start })

	s2 := startServer(t, dataDir, serverOpts{})
	for id, pid := range pids {
		if !alive(pid) {
			t.Fatalf("job %s (pid %d) died with its supervisor", id, pid)
		}
		if d := s2.Describe(id); d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
			t.Fatalf("job %s after the restart: %s with %d attempts, want RUNNING with one (its process lives)", id, d.Status, len(d.Attempts))
		}
	}

	const why = "e2e: stop the orphan"
	_, err := s2.C.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(stopped), Reason: aws.String(why)})
	must(t, err)
	d := s2.AwaitStatus(stopped, types.ServiceJobStatusFailed)
	if r := aws.ToString(d.StatusReason); !aws.ToBool(d.IsTerminated) || !strings.Contains(r, why) || len(d.Attempts) != 1 {
		t.Errorf("stopped: isTerminated %v, reason %q, %d attempts", aws.ToBool(d.IsTerminated), r, len(d.Attempts))
	}
	if groupAlive(pids[stopped]) {
		t.Errorf("stopped: its process group %d is still there after FAILED", pids[stopped])
	}

	g.release("ends.go1")
	d = s2.Await(ends, "requeued and running again", func(d *batch.DescribeServiceJobOutput) bool {
		return len(d.Attempts) == 2 || d.Status == types.ServiceJobStatusFailed
	})
	if d.Status == types.ServiceJobStatusFailed {
		t.Fatalf("ends: an orphan recovered as running ended, and the job is FAILED (%q) instead of requeued", aws.ToString(d.StatusReason))
	}
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Attempt lost") {
		t.Errorf("ends: attempt 1 reason %q, want one that says the attempt was lost", r)
	}
	if out := s2.awaitLog(ends, 2, "pid="); strings.Contains(out, "OVERLAP") {
		t.Errorf("ends: attempt 2 started while attempt 1 ran:\n%s", out)
	}
	g.release("ends.go2")
	if d := s2.AwaitStatus(ends, types.ServiceJobStatusSucceeded); len(d.Attempts) != 2 {
		t.Errorf("ends: %d attempts, want 2", len(d.Attempts))
	}
}
