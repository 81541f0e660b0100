// Package executortest is the conformance suite of executor.Executor. Every
// executor (simulated, process, and any later one) runs the same suite, so
// the daemon can rely on one contract: Start and Stop are idempotent by
// attempt ID, exit codes and signals are reported the same way, a stop is
// polite first and forced after the grace period, Wait returns only when the
// attempt is really gone, and a new executor over the same data directory
// recovers what the old one started. It covers every method of
// executor.Executor, the daemon's and the log endpoint's alike: validation
// of a parsed payload as of its text, forgetting an ended attempt, and
// serving an attempt's log; and the optional executor.PendingReasoner of
// the executors that implement it.
//
// An executor takes part by describing, in a Harness, how to build itself
// and how to express a test Job (run this long, exit with this code, react to
// a stop this way) as a payload it understands.
package executortest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/trainingjob"
)

// OnStop says how a test job reacts to the polite stop signal (SIGTERM).
type OnStop int

// Reactions to a stop.
const (
	// StopDie: the job does not handle the signal and dies of it.
	StopDie OnStop = iota
	// StopCheckpoint: the job traps the signal, spends Job.CheckpointTime
	// saving a checkpoint, and exits with code 0.
	StopCheckpoint
	// StopIgnore: the job ignores the signal and must be killed.
	StopIgnore
)

// Job describes a test job in executor-neutral terms.
type Job struct {
	// Run is how long the job runs on its own before it exits.
	Run time.Duration
	// ExitCode is the code it exits with when it ends on its own.
	ExitCode int
	// OnStop is how it reacts to a stop.
	OnStop OnStop
	// CheckpointTime is how long a StopCheckpoint job takes to exit.
	CheckpointTime time.Duration
	// Env is added to the payload's Environment.
	Env map[string]string
	// RecordEnv asks the job to record the environment it sees, for
	// Harness.Observed.
	RecordEnv bool
	// Output is a line (letters, digits and spaces) the job writes to its
	// standard output as it starts, for the Logs subtest.
	Output string
	// CheckpointConfig makes the payload name a CheckpointConfig (its
	// default LocalPath). An executor that gives every attempt a
	// checkpoint directory may ignore it.
	CheckpointConfig bool
}

// Harness describes an executor to the suite.
type Harness struct {
	// New returns an executor whose state lives under dir. Calling it again
	// with the same dir, after Close of the first, is a restart.
	New func(t testing.TB, dir string) executor.Executor
	// Payload returns a CreateTrainingJob payload that makes the executor
	// run j. It must ask for capacity the executor can always give (no GPUs).
	Payload func(t testing.TB, j Job) string
	// Observed returns the environment a RecordEnv job saw, once it has
	// exited. Nil means the executor runs no process, and the environment
	// subtest is skipped.
	Observed func(t testing.TB, s executor.Spec, h executor.Handle) map[string]string
	// Ready blocks until a started job has installed its reaction to a stop
	// (a real process needs a moment to set its signal trap). Nil means
	// jobs are ready as soon as Start returns.
	Ready func(t testing.TB, s executor.Spec, h executor.Handle)
	// Slack bounds how long any attempt may take beyond what the test
	// expects (process start-up, a loaded machine). Zero means 30s.
	Slack time.Duration
	// Concurrent is how many attempts the concurrent subtest starts at
	// once, each with two racing Starts, every other one stopped. Zero
	// means 16. An executor whose attempts are costly may ask for fewer
	// in a short run: 4 still race, stop, and exit with 0, 1 and 2.
	Concurrent int
	// Durable says that attempts outlive the executor and their records
	// live under its dir, so a new executor must recover an attempt from its
	// ID alone: a server killed while Start ran never saved Handle.State,
	// and answering Lost for an attempt that runs makes the daemon run the
	// job twice at once. An executor whose attempts die with it (simulated)
	// leaves it false and skips that subtest.
	Durable bool
	// KeepsLogs says that the executor keeps its attempts' output and
	// serves it through Logs; false means Logs must answer ErrNoLog.
	KeepsLogs bool
	// CheckpointOnRequest says that, as on SageMaker, only a payload with
	// a CheckpointConfig gets a checkpoint directory (SM_CHECKPOINT_DIR):
	// the environment subtest then asks for one, and checks that a job
	// without one has none. False: every attempt has one.
	CheckpointOnRequest bool
	// NetworkIsolation says that the executor honours the payload's
	// EnableNetworkIsolation; false means Validate must refuse a payload
	// that sets it (EINVALID, naming the field).
	NetworkIsolation bool
}

// Run runs the conformance suite against the executor h describes.
func Run(t *testing.T, h Harness) {
	if h.Slack == 0 {
		h.Slack = 30 * time.Second
	}
	s := &suite{Harness: h}
	t.Run("ExitCodes", s.exitCodes)
	t.Run("ValidateRejectsGarbage", s.validate)
	t.Run("UnknownAttempt", s.unknown)
	t.Run("IdempotentStart", s.idempotentStart)
	t.Run("StopDies", s.stopDies)
	t.Run("StopCheckpointsWithinGrace", s.stopCheckpoint)
	t.Run("KillAfterGrace", s.killAfterGrace)
	t.Run("JobGraceFromEnvironment", s.jobGrace)
	t.Run("IdempotentStop", s.idempotentStop)
	t.Run("RecoverAfterRestart", s.recover)
	t.Run("RecoverWithoutState", s.recoverWithoutState)
	t.Run("StopDeadlineOutlivesRestart", s.stopAcrossRestart)
	t.Run("Environment", s.environment)
	t.Run("Concurrent", s.concurrent)
	t.Run("ValidateRequestIsValidate", s.validateRequest)
	t.Run("Forget", s.forget)
	t.Run("Logs", s.logs)
	t.Run("PendingReason", s.pendingReason)
}

// pendingReason: an executor that reports why a started attempt waits in a
// scheduler of its own (executor.PendingReasoner) reports nothing for an
// attempt it does not know, for one whose processes run (within the
// slack: it answers from what it last learned) and for one that has ended.
// When an attempt really waits is the executor's own test to show (it
// needs that scheduler full). An executor without the method skips this.
func (s *suite) pendingReason(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	pr, ok := e.(executor.PendingReasoner)
	if !ok {
		t.Skip("the executor does not implement executor.PendingReasoner")
	}
	if r := pr.PendingReason("no-such-attempt"); r != "" {
		t.Errorf("PendingReason(unknown) = %q, want \"\"", r)
	}
	sp := s.spec(t, Job{Run: time.Hour})
	h := s.start(t, e, sp)
	s.ready(t, sp, h)
	deadline := time.Now().Add(s.Slack)
	for r := pr.PendingReason(sp.AttemptID); r != ""; r = pr.PendingReason(sp.AttemptID) {
		if time.Now().After(deadline) {
			t.Fatalf("PendingReason of an attempt whose job runs = %q after %v, want \"\"", r, s.Slack)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := e.Stop(context.Background(), sp.AttemptID, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s.wait(t, e, sp.AttemptID, 0)
	if r := pr.PendingReason(sp.AttemptID); r != "" {
		t.Errorf("PendingReason of an ended attempt = %q, want \"\"", r)
	}
}

// validateRequest: the daemon parses a submit's payload once and validates
// the parsed request; that must answer what Validate answers for the text.
func (s *suite) validateRequest(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	demand := qshare.Capacity{"ml.m5.large": 1}
	for _, p := range []string{
		s.Payload(t, Job{Run: time.Second}),
		s.Payload(t, Job{Run: time.Second, ExitCode: 3, OnStop: StopCheckpoint, CheckpointTime: time.Second}),
		`{"TrainingJobName":"t","ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":1}}`,
		`{"TrainingJobName":"t","AlgorithmSpecification":{"ContainerEntrypoint":[""]},"ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":1}}`,
	} {
		req, err := trainingjob.Parse(p)
		if err != nil {
			t.Fatalf("Parse(%s): %v", p, err)
		}
		want, got := e.Validate(p, demand), e.ValidateRequest(req, demand)
		if (want == nil) != (got == nil) || (want != nil && (want.Error() != got.Error() || qshare.ErrorCodeOf(want) != qshare.ErrorCodeOf(got))) {
			t.Errorf("payload %s: ValidateRequest = %v, Validate = %v", p, got, want)
		}
	}
}

// forget: the daemon forgets every attempt whose end it has recorded, so
// that a server that runs for months does not keep them all in memory.
func (s *suite) forget(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.Slack)
	defer cancel()
	ended := s.spec(t, Job{Run: 20 * time.Millisecond})
	s.start(t, e, ended)
	s.wait(t, e, ended.AttemptID, 20*time.Millisecond)
	e.Forget(ended.AttemptID)
	if _, err := e.Wait(ctx, ended.AttemptID); !errors.Is(err, executor.ErrUnknownAttempt) {
		t.Errorf("Wait after Forget = %v, want ErrUnknownAttempt: the executor still holds the ended attempt", err)
	}
	if err := e.Stop(ctx, ended.AttemptID, 0); !errors.Is(err, executor.ErrUnknownAttempt) {
		t.Errorf("Stop after Forget = %v, want ErrUnknownAttempt", err)
	}
	e.Forget("no-such-attempt") // a no-op

	// An attempt that runs is not forgotten: its end is still reported.
	running := s.spec(t, Job{Run: time.Hour})
	h := s.start(t, e, running)
	s.ready(t, running, h)
	e.Forget(running.AttemptID)
	if err := e.Stop(ctx, running.AttemptID, 10*time.Millisecond); err != nil {
		t.Fatalf("Stop of a running attempt after Forget: %v", err)
	}
	if x := s.wait(t, e, running.AttemptID, 0); !x.Stopped {
		t.Errorf("exit = %+v, want stopped", x)
	}
}

// readLog reads an attempt's log to its end within the slack.
func (s *suite) readLog(t *testing.T, e executor.Executor, id string, follow bool) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), s.Slack)
	defer cancel()
	rc, err := e.Logs(ctx, id, follow)
	if err != nil {
		return "", err
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading the log of %s (follow %v): %v", id, follow, err)
	}
	return string(b), nil
}

// logs: the log endpoint reads attempts' output through Logs, whatever the
// executor keeps it in.
func (s *suite) logs(t *testing.T) {
	t.Parallel()
	e, dir := s.newExec(t)
	const line = "hello from the conformance suite"
	sp := s.spec(t, Job{Run: 300 * time.Millisecond, Output: line})
	s.start(t, e, sp)
	if !s.KeepsLogs {
		s.wait(t, e, sp.AttemptID, 300*time.Millisecond)
		for _, follow := range []bool{false, true} {
			if _, err := s.readLog(t, e, sp.AttemptID, follow); !errors.Is(err, executor.ErrNoLog) {
				t.Errorf("Logs(follow %v) of an executor that keeps no logs = %v, want ErrNoLog", follow, err)
			}
		}
		return
	}
	// A follow from the start ends once the attempt has ended, with all of
	// its output.
	got, err := s.readLog(t, e, sp.AttemptID, true)
	if err != nil {
		t.Fatalf("Logs(follow): %v", err)
	}
	if !strings.Contains(got, line+"\n") {
		t.Errorf("followed log %q, want the line %q", got, line)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	if _, err := e.Wait(ctx, sp.AttemptID); err != nil {
		t.Errorf("the follow ended before the attempt did (Wait: %v)", err)
	}
	cancel()
	// Read again, after Forget, and after a restart for a durable executor.
	check := func(when string, e executor.Executor) {
		t.Helper()
		got, err := s.readLog(t, e, sp.AttemptID, false)
		if err != nil || !strings.Contains(got, line+"\n") {
			t.Errorf("Logs %s = %q, %v; want the line %q", when, got, err, line)
		}
	}
	check("after the end", e)
	e.Forget(sp.AttemptID)
	check("after Forget", e)
	if s.Durable {
		e.Close()
		check("after a restart", s.New(t, dir))
	}
	if _, err := s.readLog(t, e, "no-such-attempt", false); !errors.Is(err, executor.ErrUnknownAttempt) && !errors.Is(err, executor.ErrNoLog) {
		t.Errorf("Logs(unknown) = %v, want ErrUnknownAttempt or ErrNoLog", err)
	}

	// Cancelling a follow ends it while the attempt runs on.
	long := s.spec(t, Job{Run: time.Hour, Output: line})
	e2, _ := s.newExec(t)
	h := s.start(t, e2, long)
	s.ready(t, long, h)
	fctx, fcancel := context.WithCancel(context.Background())
	rc, err := e2.Logs(fctx, long.AttemptID, true)
	if err != nil {
		t.Fatalf("Logs(follow) of a running attempt: %v", err)
	}
	done := make(chan struct{})
	go func() { io.ReadAll(rc); close(done) }()
	time.Sleep(50 * time.Millisecond)
	fcancel()
	select {
	case <-done:
	case <-time.After(s.Slack):
		t.Errorf("a cancelled follow did not end")
	}
	rc.Close()
	if err := e2.Stop(context.Background(), long.AttemptID, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	s.wait(t, e2, long.AttemptID, 0)
}

type suite struct {
	Harness
	n sync.Mutex
	k int
}

func (s *suite) spec(t testing.TB, j Job) executor.Spec {
	s.n.Lock()
	s.k++
	k := s.k
	s.n.Unlock()
	return executor.Spec{
		JobID:     fmt.Sprintf("job-%d", k),
		JobName:   fmt.Sprintf("conformance-%d", k),
		AttemptID: fmt.Sprintf("job-%d-attempt-1", k),
		Attempt:   1,
		Queue:     "q",
		Share:     "team-a",
		Demand:    qshare.Capacity{"ml.m5.large": 1},
		Payload:   s.Payload(t, j),
	}
}

func (s *suite) newExec(t *testing.T) (executor.Executor, string) {
	dir := t.TempDir()
	e := s.New(t, dir)
	t.Cleanup(func() { e.Close() })
	return e, dir
}

// wait waits for the attempt with a bound of d plus the slack.
func (s *suite) wait(t testing.TB, e executor.Executor, id string, d time.Duration) executor.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d+s.Slack)
	defer cancel()
	x, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	if x.AttemptID != id {
		t.Errorf("Exit.AttemptID = %q, want %q", x.AttemptID, id)
	}
	return x
}

// runsOn checks that an attempt that e recovered as Running goes on as it
// was: a Start of it returns the handle h it was started with, without a
// new run, and a Wait on it does not return while the job runs.
func (s *suite) runsOn(t testing.TB, e executor.Executor, sp executor.Spec, h executor.Handle) {
	t.Helper()
	if again := s.start(t, e, sp); !again.StartedAt.Equal(h.StartedAt) {
		t.Errorf("Start after Recover gave a new run: %v, was %v", again.StartedAt, h.StartedAt)
	}
	wctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := e.Wait(wctx, sp.AttemptID); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait on a recovered running attempt returned early: %v", err)
	}
}

func (s *suite) start(t testing.TB, e executor.Executor, sp executor.Spec) executor.Handle {
	t.Helper()
	return Start(t, e, sp, s.Slack)
}

// WaitForLog waits, at most d, until the file at path (a job's log)
// contains s, and returns what it holds then; it fails t otherwise.
func WaitForLog(t testing.TB, path, s string, d time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b, _ := os.ReadFile(path)
		if strings.Contains(string(b), s) {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never showed %q within %v; it holds:\n%s", path, s, d, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Start starts sp on e, allowing it within, and checks the handle it
// returns: its AttemptID sp's, a StartedAt set.
func Start(t testing.TB, e executor.Executor, sp executor.Spec, within time.Duration) executor.Handle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	h, err := e.Start(ctx, sp)
	if err != nil {
		t.Fatalf("Start(%s): %v", sp.AttemptID, err)
	}
	if h.AttemptID != sp.AttemptID {
		t.Fatalf("Handle.AttemptID = %q, want %q", h.AttemptID, sp.AttemptID)
	}
	if h.StartedAt.IsZero() {
		t.Errorf("Handle.StartedAt is zero")
	}
	return h
}

// ready waits until the job can react to a stop as its Job says.
func (s *suite) ready(t testing.TB, sp executor.Spec, h executor.Handle) {
	t.Helper()
	if s.Ready != nil {
		s.Ready(t, sp, h)
	}
}

func (s *suite) exitCodes(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	for _, code := range []int{0, 1, 3, 137} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			t.Parallel()
			sp := s.spec(t, Job{Run: 20 * time.Millisecond, ExitCode: code})
			s.start(t, e, sp)
			x := s.wait(t, e, sp.AttemptID, 20*time.Millisecond)
			if x.ExitCode != code || x.Signal != "" || x.Stopped {
				t.Fatalf("exit = %+v, want code %d, no signal, not stopped", x, code)
			}
			if want := fmt.Sprintf("Essential process exited with code %d", code); x.Reason != want {
				t.Errorf("reason = %q, want %q", x.Reason, want)
			}
			if got := x.Succeeded(); got != (code == 0) {
				t.Errorf("Succeeded() = %v for code %d", got, code)
			}
			if x.At.IsZero() {
				t.Errorf("Exit.At is zero")
			}
			// Wait again: the same answer.
			if y := s.wait(t, e, sp.AttemptID, 0); y != x {
				t.Errorf("second Wait = %+v, want %+v", y, x)
			}
		})
	}
}

func (s *suite) validate(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	for _, p := range []string{"", "not json", "[1,2]"} {
		err := e.Validate(p, qshare.Capacity{"ml.m5.large": 1})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("Validate(%q) = %v, want an EINVALID *qshare.Error", p, err)
		}
	}
	if err := e.Validate(s.Payload(t, Job{Run: time.Second}), qshare.Capacity{"ml.m5.large": 1}); err != nil {
		t.Errorf("Validate(good payload) = %v", err)
	}
	var isolated map[string]any
	if err := json.Unmarshal([]byte(s.Payload(t, Job{Run: time.Second})), &isolated); err != nil {
		t.Fatal(err)
	}
	isolated["EnableNetworkIsolation"] = true
	b, _ := json.Marshal(isolated)
	err := e.Validate(string(b), qshare.Capacity{"ml.m5.large": 1})
	if s.NetworkIsolation && err != nil {
		t.Errorf("Validate(payload with EnableNetworkIsolation) = %v, want nil: this executor honours it", err)
	}
	if !s.NetworkIsolation && (qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "EnableNetworkIsolation")) {
		t.Errorf("Validate(payload with EnableNetworkIsolation) = %v, want EINVALID naming it: this executor cannot honour it", err)
	}
	sp := s.spec(t, Job{})
	sp.Payload = "not json"
	if _, err := e.Start(context.Background(), sp); err == nil {
		t.Errorf("Start with a garbage payload succeeded")
	}
}

func (s *suite) unknown(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	ctx, cancel := context.WithTimeout(context.Background(), s.Slack)
	defer cancel()
	if _, err := e.Wait(ctx, "no-such-attempt"); !errors.Is(err, executor.ErrUnknownAttempt) {
		t.Errorf("Wait(unknown) = %v, want ErrUnknownAttempt", err)
	}
	if err := e.Stop(ctx, "no-such-attempt", 0); !errors.Is(err, executor.ErrUnknownAttempt) {
		t.Errorf("Stop(unknown) = %v, want ErrUnknownAttempt", err)
	}
}

func (s *suite) idempotentStart(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	sp := s.spec(t, Job{Run: 200 * time.Millisecond, RecordEnv: s.Observed != nil})
	h1 := s.start(t, e, sp)
	h2 := s.start(t, e, sp)
	if !h1.StartedAt.Equal(h2.StartedAt) || string(h1.State) != string(h2.State) || h1.LogPath != h2.LogPath {
		t.Errorf("second Start returned another handle:\n%+v\n%+v", h1, h2)
	}
	x := s.wait(t, e, sp.AttemptID, 200*time.Millisecond)
	if !x.Succeeded() {
		t.Errorf("exit = %+v, want success", x)
	}
	// Starting it again after its end must not run it again.
	h3 := s.start(t, e, sp)
	if !h3.StartedAt.Equal(h1.StartedAt) {
		t.Errorf("Start after the end started a new run: %v then %v", h1.StartedAt, h3.StartedAt)
	}
	if y := s.wait(t, e, sp.AttemptID, 0); y != x {
		t.Errorf("Wait after a repeated Start = %+v, want %+v", y, x)
	}
}

func (s *suite) stopDies(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	sp := s.spec(t, Job{Run: time.Hour})
	s.start(t, e, sp)
	if err := e.Stop(context.Background(), sp.AttemptID, time.Hour); err != nil {
		t.Fatal(err)
	}
	x := s.wait(t, e, sp.AttemptID, 0)
	if !x.Stopped || x.Signal != "SIGTERM" || x.ExitCode != -1 || x.Succeeded() {
		t.Errorf("exit = %+v, want stopped by SIGTERM, code -1", x)
	}
	if x.Reason == "" {
		t.Errorf("no reason")
	}
}

func (s *suite) stopCheckpoint(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	sp := s.spec(t, Job{Run: time.Hour, OnStop: StopCheckpoint, CheckpointTime: 200 * time.Millisecond})
	s.ready(t, sp, s.start(t, e, sp))
	t0 := time.Now()
	if err := e.Stop(context.Background(), sp.AttemptID, time.Hour); err != nil {
		t.Fatal(err)
	}
	x := s.wait(t, e, sp.AttemptID, 200*time.Millisecond)
	if el := time.Since(t0); el < 200*time.Millisecond {
		t.Errorf("Wait returned %v after Stop, before the job finished its %v checkpoint", el, 200*time.Millisecond)
	}
	if !x.Stopped || x.Signal != "" || x.ExitCode != 0 {
		t.Errorf("exit = %+v, want stopped, exit code 0, no signal", x)
	}
	if x.Succeeded() {
		t.Errorf("a stopped attempt reports Succeeded")
	}
}

func (s *suite) killAfterGrace(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	sp := s.spec(t, Job{Run: time.Hour, OnStop: StopIgnore})
	s.ready(t, sp, s.start(t, e, sp))
	const grace = 300 * time.Millisecond
	t0 := time.Now()
	if err := e.Stop(context.Background(), sp.AttemptID, grace); err != nil {
		t.Fatal(err)
	}
	x := s.wait(t, e, sp.AttemptID, grace)
	if el := time.Since(t0); el < grace {
		t.Errorf("the job was gone %v after Stop, before the %v grace period ended", el, grace)
	}
	if !x.Stopped || x.Signal != "SIGKILL" || x.ExitCode != -1 {
		t.Errorf("exit = %+v, want stopped by SIGKILL", x)
	}
}

func (s *suite) jobGrace(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t) // the executor's default grace is long (120s)
	sp := s.spec(t, Job{Run: time.Hour, OnStop: StopIgnore, Env: map[string]string{"QSHARE_STOP_GRACE": "300ms"}})
	s.ready(t, sp, s.start(t, e, sp))
	// The job's own grace wins over the caller's (the server's setting):
	// the job knows how long its checkpoint takes.
	if err := e.Stop(context.Background(), sp.AttemptID, time.Hour); err != nil {
		t.Fatal(err)
	}
	// Far less than an hour: the job's own grace applied.
	x := s.wait(t, e, sp.AttemptID, 300*time.Millisecond)
	if x.Signal != "SIGKILL" || !x.Stopped {
		t.Errorf("exit = %+v, want stopped by SIGKILL", x)
	}
}

func (s *suite) idempotentStop(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	sp := s.spec(t, Job{Run: time.Hour})
	s.start(t, e, sp)
	for i := 0; i < 3; i++ {
		if err := e.Stop(context.Background(), sp.AttemptID, time.Hour); err != nil {
			t.Fatalf("Stop #%d: %v", i+1, err)
		}
	}
	x := s.wait(t, e, sp.AttemptID, 0)
	if err := e.Stop(context.Background(), sp.AttemptID, 0); err != nil {
		t.Errorf("Stop after the end = %v, want nil", err)
	}
	if !x.Stopped {
		t.Errorf("exit = %+v, want stopped", x)
	}
	// Stop of an attempt that ended on its own is a no-op too.
	sp2 := s.spec(t, Job{Run: 10 * time.Millisecond, ExitCode: 2})
	s.start(t, e, sp2)
	x2 := s.wait(t, e, sp2.AttemptID, 10*time.Millisecond)
	if err := e.Stop(context.Background(), sp2.AttemptID, 0); err != nil {
		t.Errorf("Stop after a natural end = %v", err)
	}
	if y := s.wait(t, e, sp2.AttemptID, 0); y != x2 || y.Stopped {
		t.Errorf("Wait after Stop of an ended attempt = %+v, want %+v", y, x2)
	}
}

func (s *suite) recover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e1 := s.New(t, dir)
	long := s.spec(t, Job{Run: time.Hour, OnStop: StopCheckpoint, CheckpointTime: 50 * time.Millisecond})
	short := s.spec(t, Job{Run: 50 * time.Millisecond, ExitCode: 4})
	hl := s.start(t, e1, long)
	hs := s.start(t, e1, short)
	s.ready(t, long, hl)
	// The short one has begun before the executor goes (on a loaded engine a
	// container can take seconds to start), so it ends in the sleep below.
	s.ready(t, short, hs)
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	// The short one ends while no executor watches it.
	ctx := context.Background()
	e2 := s.recoverEnded(t, dir, "Recover(short)", hs)
	t.Cleanup(func() { e2.Close() })
	xs := s.wait(t, e2, short.AttemptID, 0)
	if xs.ExitCode != 4 || xs.Stopped {
		t.Errorf("recovered exit = %+v, want code 4", xs)
	}
	if r, err := e2.Recover(ctx, hl); err != nil || r != executor.Running {
		t.Fatalf("Recover(long) = %v, %v; want Running", r, err)
	}
	// Recovering twice is harmless.
	if r, err := e2.Recover(ctx, hl); err != nil || r != executor.Running {
		t.Fatalf("second Recover(long) = %v, %v; want Running", r, err)
	}
	// Start after Recover returns the handle; it does not run the job again.
	s.runsOn(t, e2, long, hl)
	if err := e2.Stop(ctx, long.AttemptID, time.Hour); err != nil {
		t.Fatalf("Stop(recovered): %v", err)
	}
	xl := s.wait(t, e2, long.AttemptID, 50*time.Millisecond)
	if !xl.Stopped || xl.ExitCode != 0 {
		t.Errorf("recovered attempt's exit after Stop = %+v, want stopped with code 0", xl)
	}

	// A handle the executor knows nothing about is Lost, not an error.
	bogus := executor.Handle{AttemptID: "never-started", StartedAt: time.Now(), State: []byte(`{}`)}
	if r, err := e2.Recover(ctx, bogus); err != nil || r != executor.Lost {
		t.Errorf("Recover(bogus) = %v, %v; want Lost", r, err)
	}
}

// stopAcrossRestart: a stop whose grace period was running when the
// executor went (the server restarted) keeps its deadline. The daemon
// issues the stop again once the new executor has recovered the attempt,
// with a grace of its own (here an hour): the job, which ignores SIGTERM,
// is killed when the first stop's grace ends, not a whole grace later,
// nor never. The wait's bound is the first grace and the slack, far under
// the hour. An executor whose attempts end with it skips this.
func (s *suite) stopAcrossRestart(t *testing.T) {
	if !s.Durable {
		t.Skip("the executor's attempts end with it")
	}
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	e1 := s.New(t, dir)
	sp := s.spec(t, Job{Run: time.Hour, OnStop: StopIgnore})
	h := s.start(t, e1, sp)
	s.ready(t, sp, h)
	const grace = 2 * time.Second
	if err := e1.Stop(ctx, sp.AttemptID, grace); err != nil {
		t.Fatal(err)
	}
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	e2 := s.New(t, dir)
	t.Cleanup(func() { e2.Close() })
	if r, err := e2.Recover(ctx, h); err != nil || r == executor.Lost {
		t.Fatalf("Recover of an attempt being stopped = %v, %v; want Running or Exited", r, err)
	}
	if err := e2.Stop(ctx, sp.AttemptID, time.Hour); err != nil {
		t.Fatalf("Stop again after the restart: %v", err)
	}
	x := s.wait(t, e2, sp.AttemptID, grace)
	if !x.Stopped || x.Signal != "SIGKILL" {
		t.Errorf("exit = %+v, want stopped by SIGKILL at the first stop's deadline", x)
	}
}

// recoverEnded makes a new executor on dir and recovers h, an attempt
// whose program ends on its own while no executor watches it, which must
// be Exited. How soon an engine reports a container gone depends on the
// machine's load, so a new executor that still finds it running is closed
// and another is made later, for up to 20 s: what is tested is the report
// of an end that no executor saw. The caller closes the executor returned.
func (s *suite) recoverEnded(t *testing.T, dir, what string, h executor.Handle) executor.Executor {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		time.Sleep(500 * time.Millisecond)
		e := s.New(t, dir)
		r, err := e.Recover(context.Background(), h)
		if err == nil && r == executor.Running && time.Now().Before(deadline) {
			e.Close()
			continue
		}
		if err != nil || r != executor.Exited {
			e.Close()
			t.Fatalf("%s = %v, %v; want Exited", what, r, err)
		}
		return e
	}
}

// recoverWithoutState restarts the executor and recovers attempts by their
// IDs alone, as the daemon must after a crash during Start: the one still
// running is Running (not Lost, which would run the job twice), the one
// that ended is Exited with its code, a Start of a running one without a
// Recover adopts it, and an ID never started is Lost.
func (s *suite) recoverWithoutState(t *testing.T) {
	if !s.Durable {
		t.Skip("the executor's attempts do not outlive it")
	}
	t.Parallel()
	dir := t.TempDir()
	e1 := s.New(t, dir)
	long := s.spec(t, Job{Run: time.Hour, OnStop: StopCheckpoint, CheckpointTime: 50 * time.Millisecond})
	again := s.spec(t, Job{Run: time.Hour})
	short := s.spec(t, Job{Run: 50 * time.Millisecond, ExitCode: 6})
	hl := s.start(t, e1, long)
	ha := s.start(t, e1, again)
	hs := s.start(t, e1, short)
	s.ready(t, long, hl)
	s.ready(t, again, ha)
	s.ready(t, short, hs) // begun before the executor goes, as in recover
	if err := e1.Close(); err != nil {
		t.Fatal(err)
	}
	// The short one ends while no executor watches it.
	ctx := context.Background()
	e2 := s.recoverEnded(t, dir, "Recover(short, no state)", executor.Handle{AttemptID: short.AttemptID})
	t.Cleanup(func() { e2.Close() })
	if xs := s.wait(t, e2, short.AttemptID, 0); xs.ExitCode != 6 || xs.Stopped {
		t.Errorf("recovered exit = %+v, want code 6", xs)
	}
	if r, err := e2.Recover(ctx, executor.Handle{AttemptID: long.AttemptID}); err != nil || r != executor.Running {
		t.Fatalf("Recover(long, no state) = %v, %v; want Running: the daemon would run the job a second time", r, err)
	}
	// The daemon may instead start a STARTING attempt again: it adopts it.
	if h := s.start(t, e2, again); !h.StartedAt.Equal(ha.StartedAt) {
		t.Errorf("Start of a running attempt after a restart gave a new run: %v, was %v", h.StartedAt, ha.StartedAt)
	}
	s.runsOn(t, e2, long, hl)
	for _, sp := range []executor.Spec{long, again} {
		if err := e2.Stop(ctx, sp.AttemptID, time.Hour); err != nil {
			t.Fatalf("Stop(%s): %v", sp.AttemptID, err)
		}
	}
	if xl := s.wait(t, e2, long.AttemptID, 50*time.Millisecond); !xl.Stopped || xl.ExitCode != 0 {
		t.Errorf("recovered attempt's exit after Stop = %+v, want stopped with code 0", xl)
	}
	if xa := s.wait(t, e2, again.AttemptID, 0); !xa.Stopped {
		t.Errorf("adopted attempt's exit after Stop = %+v, want stopped", xa)
	}
	if r, err := e2.Recover(ctx, executor.Handle{AttemptID: "never-started"}); err != nil || r != executor.Lost {
		t.Errorf("Recover(never started, no state) = %v, %v; want Lost", r, err)
	}
}

func (s *suite) environment(t *testing.T) {
	if s.Observed == nil {
		t.Skip("the executor runs no process")
	}
	t.Parallel()
	e, _ := s.newExec(t)
	j := Job{Run: 10 * time.Millisecond, RecordEnv: true, Env: map[string]string{"MY_SETTING": "a b=c"}, CheckpointConfig: s.CheckpointOnRequest}
	sp := s.spec(t, j)
	sp.Share = "team-b"
	h := s.start(t, e, sp)
	if x := s.wait(t, e, sp.AttemptID, 0); !x.Succeeded() {
		t.Fatalf("env job: %+v", x)
	}
	env := s.Observed(t, sp, h)
	want := map[string]string{
		"QSHARE_JOB_ID":      sp.JobID,
		"QSHARE_ATTEMPT":     "1",
		"QSHARE_QUOTA_SHARE": "team-b",
		"MY_SETTING":         "a b=c",
	}
	CheckEnv(t, env, want)
	ckpt := env["SM_CHECKPOINT_DIR"]
	if ckpt == "" {
		t.Fatalf("SM_CHECKPOINT_DIR not set")
	}
	// The second attempt of the same job sees the same checkpoint directory.
	sp2 := sp
	sp2.Attempt = 2
	sp2.AttemptID = sp.JobID + "-attempt-2"
	h2 := s.start(t, e, sp2)
	if x := s.wait(t, e, sp2.AttemptID, 0); !x.Succeeded() {
		t.Fatalf("env job, attempt 2: %+v", x)
	}
	env2 := s.Observed(t, sp2, h2)
	if env2["QSHARE_ATTEMPT"] != "2" {
		t.Errorf("QSHARE_ATTEMPT = %q on attempt 2", env2["QSHARE_ATTEMPT"])
	}
	if env2["SM_CHECKPOINT_DIR"] != ckpt {
		t.Errorf("SM_CHECKPOINT_DIR changed between attempts: %q then %q", ckpt, env2["SM_CHECKPOINT_DIR"])
	}
	if !s.CheckpointOnRequest {
		return
	}
	j.CheckpointConfig = false
	sp3 := s.spec(t, j)
	h3 := s.start(t, e, sp3)
	if x := s.wait(t, e, sp3.AttemptID, 0); !x.Succeeded() {
		t.Fatalf("env job without a CheckpointConfig: %+v", x)
	}
	if v, ok := s.Observed(t, sp3, h3)["SM_CHECKPOINT_DIR"]; ok {
		t.Errorf("SM_CHECKPOINT_DIR = %q for a payload without a CheckpointConfig, want none", v)
	}
}

func (s *suite) concurrent(t *testing.T) {
	t.Parallel()
	e, _ := s.newExec(t)
	n := s.Concurrent
	if n <= 0 {
		n = 16
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			sp := s.spec(t, Job{Run: time.Duration(i%4) * 20 * time.Millisecond, ExitCode: i % 3})
			// Two racing Starts of one attempt.
			var wg2 sync.WaitGroup
			for k := 0; k < 2; k++ {
				wg2.Go(func() { s.start(t, e, sp) })
			}
			wg2.Wait()
			if i%2 == 1 {
				if err := e.Stop(context.Background(), sp.AttemptID, time.Hour); err != nil {
					t.Errorf("Stop: %v", err)
				}
			}
			x := s.wait(t, e, sp.AttemptID, 100*time.Millisecond)
			if !x.Stopped && x.ExitCode != i%3 {
				t.Errorf("attempt %d: exit %+v, want code %d", i, x, i%3)
			}
		}(i)
	}
	wg.Wait()
}

// Script renders j as a POSIX shell script, for executors that run a
// command line (process, Slurm): it prints j.Output, reacts to SIGTERM as
// j.OnStop says, says "ready" once its sleep of j.Run is forked, and exits
// with j.ExitCode.
func Script(j Job) string {
	var b strings.Builder
	if j.RecordEnv {
		b.WriteString("env -0\n")
	}
	if j.Output != "" {
		fmt.Fprintf(&b, "echo '%s'\n", j.Output)
	}
	secs := func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }
	switch j.OnStop {
	case StopCheckpoint:
		// It ends its own sleep too: a SIGTERM that comes while the shell
		// forks it may be lost to the child, whose shell handler is still
		// in place until its exec. The checkpoint's sleep ignores SIGTERM
		// (inherited from the handler's trap): where the signal goes to
		// every process one by one (Slurm), it may reach that sleep too,
		// which would cut the checkpoint short.
		fmt.Fprintf(&b, "trap 'trap \"\" TERM; kill -9 $! 2>/dev/null; sleep %s; exit 0' TERM\n", secs(j.CheckpointTime))
	case StopIgnore:
		b.WriteString("trap '' TERM\n")
	}
	// Ready once the sleep is forked: a stop that came between "ready" and
	// the fork would leave the sleep out of its SIGTERM.
	fmt.Fprintf(&b, "sleep %s &\necho ready\nwait $!\n", secs(j.Run))
	if j.OnStop == StopDie {
		// Where the signal goes to every process one by one (Slurm), the
		// wait can return before the shell's own copy arrives, and the
		// shell would go on to exit normally: a job that dies on the
		// signal dies of it either way.
		b.WriteString("rc=$?; [ \"$rc\" -gt 128 ] && kill -$((rc - 128)) $$\n")
	}
	fmt.Fprintf(&b, "exit %d\n", j.ExitCode)
	return b.String()
}

// ReadEnv reads what `env -0` wrote to a file (NAME=value, each ended by
// a NUL), for an Observed whose jobs print their environment to their log.
// A line that the log carries before it (a newline before the first name)
// is passed over.
func ReadEnv(t testing.TB, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	env := map[string]string{}
	for _, kv := range bytes.Split(b, []byte{0}) {
		if k, v, ok := strings.Cut(string(kv), "="); ok {
			env[strings.TrimLeft(k, "\n")] = v
		}
	}
	return env
}

// CheckEnv reports, as errors of t, each variable of want that env does not
// hold with the value want gives it (an empty value: set empty, or unset).
func CheckEnv(t testing.TB, env, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if env[k] != v {
			t.Errorf("%s = %q, want %q", k, env[k], v)
		}
	}
}
