package daemon_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/sqlite"
)

// openSet is open with named executors.
func openSet(t *testing.T, dir string, named map[string]executor.Executor) (*daemon.Daemon, func(), error) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "q.db"))
	must(t, err)
	set, err := executor.NewSet(named)
	must(t, err)
	d, err := daemon.New(daemon.Config{Store: db, Executors: set, Tick: 10 * time.Millisecond})
	must(t, err)
	if err := d.Start(context.Background()); err != nil {
		set.Close()
		db.Close()
		return nil, nil, err
	}
	return d, func() { d.Close(); set.Close(); db.Close() }, nil
}

// knows reports whether ex runs (or ran) the attempt: Wait of an attempt
// it does not know is ErrUnknownAttempt at once.
func knows(ex executor.Executor, attempt string) bool {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := ex.Wait(ctx, attempt)
	return !errors.Is(err, executor.ErrUnknownAttempt)
}

// setupHPC adds to setup's queue q (on environment e, the default
// executor) the environment h on the executor named hpc, with queue qh
// and its share A.
func setupHPC(t *testing.T, d *daemon.Daemon) {
	t.Helper()
	ctx := context.Background()
	setup(t, d, 1, false)
	_, err := d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: "h", Type: "SAGEMAKER_TRAINING", Tags: map[string]string{qshare.TagExecutor: "hpc"},
		CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}})
	must(t, err)
	_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: "qh", SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "h"}}})
	must(t, err)
	_, err = d.CreateShare(ctx, daemon.ShareInput{Name: "A", Queue: "qh", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled,
		CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}})
	must(t, err)
}

func submitTo(t *testing.T, d *daemon.Daemon, queue, name string) string {
	t.Helper()
	prio := int64(0)
	j, err := d.Submit(context.Background(), daemon.SubmitInput{Name: name, Queue: queue, QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
		Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":"1h"}}`})
	must(t, err)
	return j.ID
}

// TestNamedExecutors: each environment's jobs run on the executor its tag
// names, each attempt records it, a restart recovers each attempt through
// it (and refuses a set that lacks a name still in use), and an
// executor's trouble shows in its own environments only.
func TestNamedExecutors(t *testing.T) {
	dir := t.TempDir()
	def, hpc := newReporting(), newReporting()
	d, stop, err := openSet(t, dir, map[string]executor.Executor{"default": def, "hpc": hpc})
	must(t, err)
	ctx := context.Background()
	setupHPC(t, d)
	_, err = d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: "x", Type: "SAGEMAKER_TRAINING", Tags: map[string]string{qshare.TagExecutor: "nope"},
		CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}})
	if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), `"nope": this server has no executor of that name; it has default, hpc`) {
		t.Fatalf("an unknown executor at create: %v", err)
	}

	jq := waitFor(t, d, submitTo(t, d, "q", "on-default"), status(qshare.JobRunning), "RUNNING")
	jh := waitFor(t, d, submitTo(t, d, "qh", "on-hpc"), status(qshare.JobRunning), "RUNNING")
	aq, ah := jq.LatestAttempt(), jh.LatestAttempt()
	if aq.ExecutorName != "" || ah.ExecutorName != "hpc" {
		t.Fatalf("recorded executors %q and %q, want \"\" (default) and hpc", aq.ExecutorName, ah.ExecutorName)
	}
	if !knows(def, aq.ID) || knows(def, ah.ID) || !knows(hpc, ah.ID) || knows(hpc, aq.ID) {
		t.Fatalf("each attempt must run on its environment's executor only")
	}
	if d.AttemptExecutor(ah.ID) != "hpc" || d.AttemptExecutor(aq.ID) != "default" || d.AttemptExecutor("nojob-1") != "default" {
		t.Errorf("AttemptExecutor: %q %q", d.AttemptExecutor(ah.ID), d.AttemptExecutor(aq.ID))
	}

	hpc.set(func() { hpc.health = "slurmctld does not answer" })
	es, err := d.Environments(nil)
	must(t, err)
	for _, e := range es {
		if down := strings.HasPrefix(e.StatusReason, "slurmctld does not answer"); down != (e.Name == "h") {
			t.Errorf("environment %s statusReason %q: only h's executor is down", e.Name, e.StatusReason)
		}
	}
	stop()

	// A server whose executors lack hpc refuses the store, saying why.
	_, _, err = openSet(t, dir, map[string]executor.Executor{"default": newReporting()})
	if err == nil || !strings.Contains(err.Error(), `service environment h names executor "hpc"`) || !strings.Contains(err.Error(), `attempt `+ah.ID+` of job `+jh.ID+` ran on executor "hpc"`) {
		t.Fatalf("a set without hpc: %v", err)
	}

	def, hpc = newReporting(), newReporting()
	d, stop, err = openSet(t, dir, map[string]executor.Executor{"default": def, "hpc": hpc})
	must(t, err)
	defer stop()
	waitFor(t, d, jq.ID, status(qshare.JobRunning), "RUNNING")
	waitFor(t, d, jh.ID, status(qshare.JobRunning), "RUNNING")
	if !knows(def, aq.ID) || knows(def, ah.ID) || !knows(hpc, ah.ID) || knows(hpc, aq.ID) {
		t.Fatalf("after the restart, each attempt must be recovered through its own executor only")
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		var n int
		def.set(func() { n = len(def.keeps) })
		hpc.set(func() { n += len(hpc.keeps) })
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Sweep was called %d times, want once per executor", n)
		}
	}

	// The tag changes only while DISABLED and with no unfinished attempt.
	arn := d.EnvironmentARN("h")
	err = d.TagResource(ctx, arn, map[string]string{qshare.TagExecutor: "default"})
	if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "only while it is DISABLED") {
		t.Fatalf("retag while ENABLED: %v", err)
	}
	disabled := qshare.Disabled
	_, err = d.UpdateEnvironment(ctx, daemon.EnvironmentUpdate{Ref: "h", State: &disabled})
	must(t, err)
	err = d.UntagResource(ctx, arn, []string{qshare.TagExecutor})
	if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "still has unfinished attempts on executor hpc (jobs "+jh.ID+")") {
		t.Fatalf("untag with a running attempt: %v", err)
	}
	if err := d.TagResource(ctx, arn, map[string]string{qshare.TagExecutor: "nope"}); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Fatalf("retag to an unknown executor: %v", err)
	}
	if err := d.TagResource(ctx, d.QueueARN("q"), map[string]string{qshare.TagExecutor: "hpc"}); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Fatalf("the tag on a job queue: %v", err)
	}
	must(t, d.Terminate(ctx, jh.ID, "moving"))
	waitFor(t, d, jh.ID, status(qshare.JobFailed), "FAILED")
	must(t, d.UntagResource(ctx, arn, []string{qshare.TagExecutor}))
	tags, err := d.Tags(arn)
	must(t, err)
	if _, ok := tags[qshare.TagExecutor]; ok {
		t.Fatalf("tags after untag: %v", tags)
	}
}

// TestExecutorTagOnlyOnEnvironments: qshare:executor names a service
// environment's executor; given at the creation of a policy, queue, quota
// share or job it is refused, as TagResource refuses it there, and nothing
// is created.
func TestExecutorTagOnlyOnEnvironments(t *testing.T) {
	ctx := context.Background()
	d := openSetUp(t)
	tag := map[string]string{qshare.TagExecutor: "default"}
	check := func(what string, err error) {
		t.Helper()
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "tags key qshare:executor names the executor of a service environment: it is not a tag of a "+what) {
			t.Errorf("qshare:executor in a %s's tags at its creation: %v", what, err)
		}
	}
	_, err := d.CreatePolicy(ctx, daemon.PolicyInput{Name: "p2", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}, Tags: tag})
	check("scheduling-policy", err)
	_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: "q2", SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}, Tags: tag})
	check("job-queue", err)
	_, err = d.CreateShare(ctx, daemon.ShareInput{Name: "B", Queue: "q", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled,
		CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}, Tags: tag})
	check("quota-share", err)
	prio := int64(1)
	_, err = d.Submit(ctx, daemon.SubmitInput{Name: "j", Queue: "q", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
		Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"}}`, Tags: tag})
	check("service-job", err)
	_, err = d.CreatePolicy(ctx, daemon.PolicyInput{Name: "p2", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	must(t, err) // the refused one was not created
}

// gatedExecutor is a simulated executor whose Start and Stop wait until
// their gate is opened (or their context ends): an executor whose service
// is slow to answer (a process fork under load, scancel while slurmctld is
// down, an engine or API server that hangs).
type gatedExecutor struct {
	executor.Executor
	startGate, stopGate chan struct{}
	entered             chan string // "start" or "stop", as each call begins to wait
}

func newGated() *gatedExecutor {
	return &gatedExecutor{Executor: simulated.New(simulated.Options{}), startGate: make(chan struct{}), stopGate: make(chan struct{}), entered: make(chan string, 16)}
}

func (g *gatedExecutor) wait(ctx context.Context, what string, gate chan struct{}) error {
	g.entered <- what
	select {
	case <-gate:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g *gatedExecutor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	if err := g.wait(ctx, "start", g.startGate); err != nil {
		return executor.Handle{}, err
	}
	return g.Executor.Start(ctx, s)
}

func (g *gatedExecutor) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	if err := g.wait(ctx, "stop", g.stopGate); err != nil {
		return err
	}
	return g.Executor.Stop(ctx, attemptID, grace)
}

// TestSlowExecutorHoldsBackNoOther: while one executor's Start, then its
// Stop, does not return, the jobs of another executor's environment are
// submitted, started and ended as usual: no call into one executor holds
// back the daemon's loop or its committer. Stop used to be called in the
// committer, and one that hung (scancel with slurmctld down: up to twice
// its 30 s timeout) held every commit of every executor behind it.
func TestSlowExecutorHoldsBackNoOther(t *testing.T) {
	slow := newGated()
	d, stop, err := openSet(t, t.TempDir(), map[string]executor.Executor{"default": slow, "hpc": simulated.New(simulated.Options{})})
	must(t, err)
	defer stop()
	defer close(slow.stopGate) // before stop: Close waits for the calls in flight
	setupHPC(t, d)
	entered := func(what string) {
		t.Helper()
		select {
		case got := <-slow.entered:
			if got != what {
				t.Fatalf("the slow executor's %s was called, want %s", got, what)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("the slow executor's %s was not called", what)
		}
	}
	// runsBeside submits a short job to the other executor's queue and
	// waits for it to succeed, within a bound far below the slow calls'.
	runsBeside := func(name string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		prio := int64(0)
		j, err := d.Submit(ctx, daemon.SubmitInput{Name: name, Queue: "qh", QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
			Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":"10ms"}}`})
		if err != nil {
			t.Fatalf("submit beside the slow executor: %v", err)
		}
		waitFor(t, d, j.ID, status(qshare.JobSucceeded), "SUCCEEDED beside the slow executor")
	}

	id := submitTo(t, d, "q", "slow")
	entered("start")
	runsBeside("beside-start")
	close(slow.startGate)
	waitFor(t, d, id, status(qshare.JobRunning), "RUNNING")

	must(t, d.Terminate(context.Background(), id, "enough"))
	entered("stop")
	runsBeside("beside-stop")
}
