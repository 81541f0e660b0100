package daemon_test

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/sqlite"
)

// TestFairShareQueue: a job queue with a fair-share policy takes jobs with
// a shareIdentifier and schedules them by fair share: when capacity frees,
// the identifier that has used less goes first, although its job came
// later.
func TestFairShareQueue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startOneQueue(t, 10*time.Millisecond, daemon.PolicyInput{Name: "fair", FairsharePolicy: []byte(`{"shareDecaySeconds":600,"shareDistribution":[{"shareIdentifier":"x","weightFactor":1}]}`)})
	sub := func(name, ident, dur string) string {
		prio := int64(0)
		j, err := d.Submit(ctx, daemon.SubmitInput{Name: name, Queue: "q", ShareIdentifier: ident, ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
			Payload: fmt.Sprintf(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":%q}}`, dur)})
		must(t, err)
		return j.ID
	}
	prio := int64(0)
	if _, err := d.Submit(ctx, daemon.SubmitInput{Name: "n", Queue: "q", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
		Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"}}`}); qshare.ErrorCodeOf(err) != qshare.EINVALID || qshare.ErrorMessageOf(err) != "shareIdentifier must be specified." {
		t.Fatalf("submit without shareIdentifier: %v", err)
	}
	x1 := sub("x1", "x", "300ms")
	waitFor(t, d, x1, status(qshare.JobRunning), "RUNNING")
	x2 := sub("x2", "x", "1ms")
	y1 := sub("y1", "y", "1ms")
	waitFor(t, d, x2, status(qshare.JobSucceeded), "SUCCEEDED")
	jx, err := d.Job(x2)
	must(t, err)
	jy := waitFor(t, d, y1, status(qshare.JobSucceeded), "SUCCEEDED")
	if !jy.Attempts[0].ScheduledAt.Before(jx.Attempts[0].ScheduledAt) {
		t.Fatalf("y1 scheduled at %v, x2 at %v: y, which had used nothing, should go first", jy.Attempts[0].ScheduledAt, jx.Attempts[0].ScheduledAt)
	}
}

// startOneQueue starts a daemon that ticks every tick on a new SQLite store
// and the simulated executor, closed when the test ends, and creates in it
// the scheduling policy p, the environment e of one ml.g5.xlarge and the
// queue q of p on e.
func startOneQueue(t *testing.T, tick time.Duration, p daemon.PolicyInput) *daemon.Daemon {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	t.Cleanup(func() { db.Close() })
	ex := simulated.New(simulated.Options{})
	t.Cleanup(func() { ex.Close() })
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Tick: tick})
	must(t, err)
	must(t, d.Start(ctx))
	t.Cleanup(func() { d.Close() })
	_, err = d.CreatePolicy(ctx, p)
	must(t, err)
	_, err = d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}})
	must(t, err)
	_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: "q", SchedulingPolicyARN: d.PolicyARN(p.Name), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}})
	must(t, err)
	return d
}

// TestFairShareUsageSurvivesRestart: the usage of a fair-share queue's
// identifiers is rebuilt from the stored attempts at a restart, so the
// identifier that used capacity before the restart still goes after one
// that did not (with usage lost, the two would tie and the earlier job,
// of the identifier that used more, would go first).
func TestFairShareUsageSurvivesRestart(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	a := open(t, dir, simulated.New(simulated.Options{}))
	_, err := a.d.CreatePolicy(ctx, daemon.PolicyInput{Name: "fair", FairsharePolicy: []byte(`{"shareDecaySeconds":600}`)})
	must(t, err)
	_, err = a.d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}})
	must(t, err)
	_, err = a.d.CreateQueue(ctx, daemon.QueueInput{Name: "q", SchedulingPolicyARN: a.d.PolicyARN("fair"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}})
	must(t, err)
	sub := func(d *daemon.Daemon, name, ident, dur string) string {
		j, err := d.Submit(ctx, daemon.SubmitInput{Name: name, Queue: "q", ShareIdentifier: ident, ServiceJobType: "SAGEMAKER_TRAINING",
			Payload: fmt.Sprintf(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":{"QSHARE_SIM_DURATION":%q}}`, dur)})
		must(t, err)
		return j.ID
	}
	x1 := sub(a.d, "x1", "x", "300ms")
	waitFor(t, a.d, x1, status(qshare.JobSucceeded), "SUCCEEDED")
	a.close()

	b := open(t, dir, simulated.New(simulated.Options{}))
	defer b.close()
	blocker := sub(b.d, "z1", "z", "300ms")
	waitFor(t, b.d, blocker, status(qshare.JobRunning), "RUNNING")
	x2 := sub(b.d, "x2", "x", "1ms")
	y1 := sub(b.d, "y1", "y", "1ms")
	jx := waitFor(t, b.d, x2, status(qshare.JobSucceeded), "SUCCEEDED")
	jy := waitFor(t, b.d, y1, status(qshare.JobSucceeded), "SUCCEEDED")
	if !jy.Attempts[0].ScheduledAt.Before(jx.Attempts[0].ScheduledAt) {
		t.Fatalf("after the restart y1 was scheduled at %v, x2 at %v: y, which had used nothing, should go first", jy.Attempts[0].ScheduledAt, jx.Attempts[0].ScheduledAt)
	}
}
