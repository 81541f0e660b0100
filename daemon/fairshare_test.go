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
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	must(t, err)
	defer db.Close()
	ex := simulated.New(simulated.Options{})
	defer ex.Close()
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Tick: 10 * time.Millisecond})
	must(t, err)
	must(t, d.Start(ctx))
	defer d.Close()

	_, err = d.CreatePolicy(ctx, daemon.PolicyInput{Name: "fair", FairsharePolicy: []byte(`{"shareDecaySeconds":600,"shareDistribution":[{"shareIdentifier":"x","weightFactor":1}]}`)})
	must(t, err)
	_, err = d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}})
	must(t, err)
	_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: "q", SchedulingPolicyARN: d.PolicyARN("fair"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}})
	must(t, err)
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
