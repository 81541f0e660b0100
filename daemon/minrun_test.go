package daemon_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
)

// TestMinRunTime: the quota-share tag qshare:minRunTimeSeconds is validated
// at CreateQuotaShare and TagResource; a job that waits for a protected
// in-share victim says so; a TagResource that changes the minimum reaches
// the engine; and the daemon wakes when the protection ends, although its
// tick (an hour here) would not come for a long time.
func TestMinRunTime(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d := startOneQueue(t, time.Hour, daemon.PolicyInput{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	share := func(tags map[string]string) error {
		_, err := d.CreateShare(ctx, daemon.ShareInput{Name: "A", Queue: "q", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Enabled,
			CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 1}}, Tags: tags})
		return err
	}
	for _, bad := range []string{"-1", "1.5", "10m", "604801", "", " 60", "+60", "99999999999999999999"} {
		err := share(map[string]string{qshare.TagMinRunTime: bad})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(qshare.ErrorMessageOf(err), qshare.TagMinRunTime) {
			t.Fatalf("CreateShare with %s=%q: %v; want a ClientException naming the tag", qshare.TagMinRunTime, bad, err)
		}
	}
	must(t, share(map[string]string{qshare.TagMinRunTime: "3600"}))
	arn := d.ShareARN("q", "A")
	if err := d.TagResource(ctx, arn, map[string]string{qshare.TagMinRunTime: "7d"}); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Fatalf("TagResource with a bad minimum run time: %v; want EINVALID", err)
	}
	// Another resource may carry the key with any value: it means nothing there.
	must(t, d.TagResource(ctx, d.PolicyARN("p"), map[string]string{qshare.TagMinRunTime: "whatever"}))

	low := submit(t, d, "low", 0, `"QSHARE_SIM_DURATION":"1h"`)
	waitFor(t, d, low, status(qshare.JobRunning), "RUNNING")
	high := submit(t, d, "high", 5, `"QSHARE_SIM_DURATION":"1ms"`)
	waitFor(t, d, high, func(j *qshare.Job) bool {
		return strings.Contains(j.StatusReason, "lower-priority job "+low+" of A is protected from preemption for")
	}, "a reason naming the protected job")

	// One second of protection from now on: the wake-up, not the tick,
	// runs the pass that preempts low.
	set := time.Now()
	must(t, d.TagResource(ctx, arn, map[string]string{qshare.TagMinRunTime: "1"}))
	waitFor(t, d, high, status(qshare.JobSucceeded), "SUCCEEDED")
	l, err := d.Job(low)
	must(t, err)
	if l.Preemptions != 1 || len(l.Attempts) == 0 {
		t.Fatalf("low: %d preemptions, attempts %+v; want it preempted once", l.Preemptions, l.Attempts)
	}
	// The protection counts from the pass that started the attempt (its
	// ScheduledAt; the process reports running a moment later), and the
	// attempt stops a moment after the pass that preempts it.
	a := l.Attempts[0]
	if ran := a.StoppedAt.Sub(a.ScheduledAt); ran < time.Second {
		t.Fatalf("low was stopped %s after it was scheduled, less than its minimum run time of 1s", ran)
	}
	if took := time.Since(set); took > 30*time.Second {
		t.Fatalf("high succeeded %s after the minimum was lowered to 1s", took)
	}
}
