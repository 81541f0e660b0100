package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"qshare"
	"qshare/config"
	"qshare/daemon"
	"qshare/event"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/sqlite"
)

// setup's configuration, for the checker.
const setupConfig = `serviceEnvironments:
  - serviceEnvironmentName: e
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
schedulingPolicies:
  - name: p
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: q
    priority: 1
    schedulingPolicy: p
    serviceEnvironment: e
    quotaShares:
      - quotaShareName: A
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: RESERVE}
        preemptionConfiguration: {inSharePreemption: ENABLED}
`

// openWithEvents opens a daemon on dir with its event log at dir/events.jsonl.
func openWithEvents(t *testing.T, dir string, log *slog.Logger) (*instance, *event.File) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "q.db"))
	must(t, err)
	evf, err := event.OpenFile(filepath.Join(dir, "events.jsonl"))
	must(t, err)
	ex := simulated.New(simulated.Options{})
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Tick: 10 * time.Millisecond, Events: evf, Logger: log})
	must(t, err)
	must(t, d.Start(context.Background()))
	return &instance{d, db, ex}, evf
}

func checkLog(t *testing.T, path string) ([]event.Violation, event.Summary, string) {
	t.Helper()
	cfg, err := config.Parse("setup.yaml", []byte(setupConfig), config.Options{})
	must(t, err)
	b, err := os.ReadFile(path)
	must(t, err)
	vs, sum, err := event.Check(cfg, bytes.NewReader(b), event.CheckOptions{Settle: 1})
	must(t, err)
	return vs, sum, string(b)
}

// closeAndCheck closes the daemon and its event file in dir, fails t on
// every violation the checker finds in the log, and returns the log's
// summary and text.
func closeAndCheck(t *testing.T, a *instance, evf *event.File, dir string) (event.Summary, string) {
	t.Helper()
	a.close()
	must(t, evf.Close())
	vs, sum, text := checkLog(t, filepath.Join(dir, "events.jsonl"))
	for _, v := range vs {
		t.Errorf("event log: %s", v)
	}
	return sum, text
}

// TestEventLogRetriesAndPreemptions: a failed attempt that is retried gives
// its capacity back as a fail that says so (not as a preemption for
// nobody), and a preemption under a stop grace is logged when decided (a
// stopping line with "for") and when its capacity is given back. The
// checker finds the log clean, and its first line is the daemon's lead.
func TestEventLogRetriesAndPreemptions(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, evf := openWithEvents(t, dir, nil)
	setup(t, a.d, 1, true)
	ctx := context.Background()
	prio := int64(0)
	fj, err := a.d.Submit(ctx, daemon.SubmitInput{Name: "flaky", Queue: "q", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
		RetryStrategy: &qshare.RetryStrategy{Attempts: 2},
		Payload:       `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":"20ms","QSHARE_SIM_EXIT_CODE":"3"}}`})
	must(t, err)
	waitFor(t, a.d, fj.ID, status(qshare.JobFailed), "FAILED after two attempts")
	low := submit(t, a.d, "low", 0, `"QSHARE_SIM_DURATION":"1h","QSHARE_SIM_ON_STOP":"ignore","QSHARE_STOP_GRACE":"200ms"`)
	waitFor(t, a.d, low, status(qshare.JobRunning), "RUNNING")
	high := submit(t, a.d, "high", 5, `"QSHARE_SIM_DURATION":"20ms"`)
	waitFor(t, a.d, high, status(qshare.JobSucceeded), "SUCCEEDED")
	must(t, a.d.Terminate(ctx, low, "done"))
	waitFor(t, a.d, low, status(qshare.JobFailed), "FAILED")
	sum, text := closeAndCheck(t, a, evf, dir)
	if sum.Retries != 1 || sum.Preempts != 1 {
		t.Errorf("summary %+v, want one retry and one preemption", sum)
	}
	var kinds []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		var e event.Event
		rd := event.NewReader(strings.NewReader(l))
		e, err := rd.Read()
		must(t, err)
		switch {
		case e.Job == fj.ID && e.Event == event.Fail && e.Instances == 1:
			kinds = append(kinds, "fail:"+e.Reason)
		case e.Event == event.Preempt && e.For == "":
			t.Errorf("a preempt for nobody: %s", l)
		case e.Job == low && (e.Event == event.Stopping || e.Event == event.Preempt):
			kinds = append(kinds, string(e.Event)+" for "+map[string]string{high: "high"}[e.For])
		}
	}
	// A server's log starts where it starts leading (check-events counts
	// a head's wait from there).
	if first, _, _ := strings.Cut(text, "\n"); !strings.Contains(first, `"event":"lead"`) {
		t.Errorf("the log's first line is %s, want the lead line of the daemon's start", first)
	}
	if len(kinds) != 4 || !strings.Contains(kinds[0], "code 3") || !strings.Contains(kinds[0], "retrying") ||
		strings.Contains(kinds[1], "retrying") || kinds[2] != "stopping for high" || kinds[3] != "preempt for high" {
		t.Errorf("lines of the retried job and of the victim: %q", kinds)
	}
}

// TestEventLogReconcilesALostRetry: a job's requeue (a failed attempt to
// be retried) is logged, and what follows is lost: its second start and
// its final fail. The next server's reconciliation writes them (the
// store has a second attempt), where it had left the job waiting for a
// retry forever; a later restart adds nothing but its lead line.
func TestEventLogReconcilesALostRetry(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, evf, sink := openWithSink(t, dir, simulated.New(simulated.Options{}), true)
	d := a.d
	setup(t, d, 1, false) // without in-share preemption
	prio := int64(0)
	flaky, err := d.Submit(context.Background(), daemon.SubmitInput{Name: "flaky", Queue: "q", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
		RetryStrategy: &qshare.RetryStrategy{Attempts: 2},
		Payload:       `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":"100ms","QSHARE_SIM_EXIT_CODE":"3"}}`})
	must(t, err)
	waitFor(t, d, flaky.ID, status(qshare.JobRunning), "RUNNING")
	// A higher priority job, without in-share preemption: it starts when
	// flaky's first attempt fails, and flaky waits for it.
	blocker := submit(t, d, "blocker", 5, `"QSHARE_SIM_DURATION":"300ms"`)
	awaitLine(t, dir, "retrying", "flaky's requeue line")
	sink.fail.Store(true)
	waitFor(t, d, blocker, status(qshare.JobSucceeded), "SUCCEEDED")
	waitFor(t, d, flaky.ID, status(qshare.JobFailed), "FAILED after its second attempt")
	d.Close()
	a.db.Close()
	must(t, evf.Close())

	b, evf2, _ := openWithSink(t, dir, a.ex, false)
	sum, text := closeAndCheck(t, b, evf2, dir)
	if sum.Starts != 3 || sum.Retries != 1 || sum.Finishes != 1 || sum.Fails != 2 {
		t.Errorf("summary %+v, want three starts (flaky twice, one a retry), blocker's finish and flaky's two fails\n%s", sum, text)
	}
	c, evf3, _ := openWithSink(t, dir, a.ex, false)
	sum2, text2 := closeAndCheck(t, c, evf3, dir)
	if added := strings.TrimPrefix(text2, text); !strings.HasPrefix(text2, text) || strings.Count(added, "\n") != 1 || !strings.Contains(added, `"event":"lead"`) {
		t.Errorf("a restart with nothing lost added %q, want its lead line alone", added)
	}
	if sum2.Starts != sum.Starts || sum2.Fails != sum.Fails {
		t.Errorf("summary after another restart %+v, want %+v", sum2, sum)
	}
}

// TestEventLogBadLine: a line in the middle of the log that cannot be read
// does not stop the server: it warns, naming the line, and appends after
// it; the checker reports that line and checks the rest.
func TestEventLogBadLine(t *testing.T) {
	dir := t.TempDir()
	a, evf := openWithEvents(t, dir, nil)
	setup(t, a.d, 1, true)
	first := submit(t, a.d, "first", 0, `"QSHARE_SIM_DURATION":"10ms"`)
	waitFor(t, a.d, first, status(qshare.JobSucceeded), "SUCCEEDED")
	a.close()
	must(t, evf.Close())
	path := filepath.Join(dir, "events.jsonl")
	b, err := os.ReadFile(path)
	must(t, err)
	lines := strings.SplitAfter(string(b), "\n")
	bad := append(append(append([]string{}, lines[:2]...), "{\"t\":1,\"jo\x00 garbage\n"), lines[2:]...)
	must(t, os.WriteFile(path, []byte(strings.Join(bad, "")), 0o644))

	var logs bytes.Buffer
	b2, evf2 := openWithEvents(t, dir, slog.New(slog.NewTextHandler(&logs, nil)))
	second := submit(t, b2.d, "second", 0, `"QSHARE_SIM_DURATION":"10ms"`)
	waitFor(t, b2.d, second, status(qshare.JobSucceeded), "SUCCEEDED")
	b2.close()
	must(t, evf2.Close())
	if !strings.Contains(logs.String(), "unreadable line") || !strings.Contains(logs.String(), "line=3") {
		t.Errorf("no warning naming line 3:\n%s", logs.String())
	}
	vs, sum, _ := checkLog(t, path)
	if len(vs) != 1 || vs[0].Rule != event.RuleLog || vs[0].Line != 3 || sum.Finishes != 2 {
		t.Fatalf("want the one bad line 3, and both jobs finished: %v, %+v", vs, sum)
	}
}

// openWithSink opens a daemon on dir with ex, its event log at
// dir/events.jsonl; failing puts a failingSink in front of the log.
func openWithSink(t *testing.T, dir string, ex executor.Executor, failing bool) (*instance, *event.File, *failingSink) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "q.db"))
	must(t, err)
	evf, err := event.OpenFile(filepath.Join(dir, "events.jsonl"))
	must(t, err)
	sink := &failingSink{File: evf}
	var events daemon.EventSink = evf
	if failing {
		events = sink
	}
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Tick: 10 * time.Millisecond, Events: events, Logger: slog.New(slog.DiscardHandler)})
	must(t, err)
	must(t, d.Start(context.Background()))
	return &instance{d, db, ex}, evf, sink
}

// awaitLine waits up to 10 s for dir/events.jsonl to hold text, and
// fails t, naming what, if it never does.
func awaitLine(t *testing.T, dir, text, what string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if b, _ := os.ReadFile(filepath.Join(dir, "events.jsonl")); bytes.Contains(b, []byte(text)) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never came", what)
		}
	}
}

// failingSink is an event file whose appends fail, keeping nothing, while
// fail is set, as a full disk's would.
type failingSink struct {
	*event.File
	fail atomic.Bool
}

func (f *failingSink) Append(evs []event.Event) error {
	if f.fail.Load() {
		return errors.New("no space left on device")
	}
	return f.File.Append(evs)
}

// TestEventLogAppendFails: events whose append failed go with the next
// append, so the log has no hole: a job submitted while the sink failed
// still has its submit line before its start, and the checker finds the
// log clean.
func TestEventLogAppendFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a, evf, sink := openWithSink(t, dir, simulated.New(simulated.Options{}), true)
	setup(t, a.d, 1, true)
	sink.fail.Store(true)
	j := submit(t, a.d, "while-failing", 0, `"QSHARE_SIM_DURATION":"200ms"`)
	waitFor(t, a.d, j, status(qshare.JobRunning), "RUNNING")
	sink.fail.Store(false)
	waitFor(t, a.d, j, status(qshare.JobSucceeded), "SUCCEEDED")
	sum, text := closeAndCheck(t, a, evf, dir)
	if sum.Starts != 1 || sum.Finishes != 1 {
		t.Errorf("summary %+v, want one start and one finish\n%s", sum, text)
	}
}

// TestEventLogReconcilesANewAttempt: the lines lost with a crash held a
// preemption and what it made room for: low's first attempt preempted,
// high run to its end, low's second attempt started. On restart the store
// has low running again, so the log must give back its first attempt's
// capacity before high's start, and start low again after: holding it
// through would put two jobs on the one instance (test/fault's
// TestEventLogReconciles found "above its limit" so once in a whole run).
func TestEventLogReconcilesANewAttempt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ex := simulated.New(simulated.Options{})
	a, evf, sink := openWithSink(t, dir, ex, true)
	d := a.d
	setup(t, d, 1, true)
	low := submit(t, d, "low", 0, `"QSHARE_SIM_DURATION":"1h","QSHARE_SIM_ON_STOP":"ignore","QSHARE_STOP_GRACE":"500ms"`)
	waitFor(t, d, low, status(qshare.JobRunning), "RUNNING")
	high := submit(t, d, "high", 5, `"QSHARE_SIM_DURATION":"20ms"`)
	// Low, ignoring SIGTERM, holds its instance for its grace: the log has
	// high's submit and low's stopping line; what follows is lost, as
	// with a crash.
	awaitLine(t, dir, `"event":"stopping"`, "low's stopping line")
	sink.fail.Store(true)
	waitFor(t, d, high, status(qshare.JobSucceeded), "SUCCEEDED")
	waitFor(t, d, low, func(j *qshare.Job) bool { return j.Status == qshare.JobRunning && len(j.Attempts) == 2 }, "RUNNING its second attempt")
	d.Close()
	a.db.Close()
	must(t, evf.Close())

	// The same executor (its attempts go on), a new daemon, a log that works.
	b, evf2, _ := openWithSink(t, dir, ex, false)
	d2 := b.d
	waitFor(t, d2, low, status(qshare.JobRunning), "still RUNNING after the restart")
	must(t, d2.Terminate(context.Background(), low, "done"))
	waitFor(t, d2, low, status(qshare.JobFailed), "FAILED")
	sum, text := closeAndCheck(t, b, evf2, dir)
	if sum.Jobs != 2 || sum.Starts != 3 || sum.Finishes != 1 {
		t.Errorf("summary %+v, want two jobs, three starts (low twice, high once) and high's finish\n%s", sum, text)
	}
}
