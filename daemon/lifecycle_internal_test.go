package daemon

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/sqlite"
	"qshare/store"
)

func startInternal(t *testing.T) *Daemon {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	d, stop := startDaemon(t, db, simulated.New(simulated.Options{}))
	t.Cleanup(stop)
	return d
}

// startDaemon starts a daemon on st and ex that ticks every 10 ms, and
// returns it with stop, which closes the daemon, then ex, then st.
func startDaemon(tb testing.TB, st store.Store, ex executor.Executor) (d *Daemon, stop func()) {
	tb.Helper()
	d, err := New(Config{Store: st, Executor: ex, Tick: 10 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		tb.Fatal(err)
	}
	return d, func() {
		d.Close()
		ex.Close()
		st.Close()
	}
}

// createReserved creates the FIFO policy p, the environment e of env
// ml.g5.xlarge, the queue q on it and, in q, the RESERVE share A of share
// ml.g5.xlarge. It returns A as CreateShare answered.
func createReserved(tb testing.TB, d *Daemon, env, share int64) qshare.QuotaShare {
	tb.Helper()
	ctx := context.Background()
	g5 := func(n int64) []qshare.CapacityLimit {
		return []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: n}}
	}
	must := func(_ any, err error) {
		tb.Helper()
		if err != nil {
			tb.Fatal(err)
		}
	}
	must(d.CreatePolicy(ctx, PolicyInput{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}}))
	must(d.CreateEnvironment(ctx, EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", CapacityLimits: g5(env)}))
	must(d.CreateQueue(ctx, QueueInput{Name: "q", SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}}))
	s, err := d.CreateShare(ctx, ShareInput{Name: "A", Queue: "q", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled, CapacityLimits: g5(share)})
	must(s, err)
	return s
}

func waitShareStatus(t *testing.T, d *Daemon, arn string, want qshare.ResourceStatus) qshare.QuotaShare {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		s, err := d.Share(arn)
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == want {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("quota share is %s, want %s", s.Status, want)
		}
	}
}

// TestSettleSuperseded holds the control loop (by holding the engine's
// lock) while a share is changed twice and an environment is created and
// deleted: the share settles VALID once, with the newest limits in the
// engine and the store, and the deleted environment never reaches the
// engine.
func TestSettleSuperseded(t *testing.T) {
	d := startInternal(t)
	ctx := context.Background()
	g5 := func(n int64) []qshare.CapacityLimit {
		return []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: n}}
	}
	s := createReserved(t, d, 4, 1)
	if s.Status != qshare.StatusCreating {
		t.Fatalf("CreateShare answered status %s, want CREATING", s.Status)
	}
	waitShareStatus(t, d, s.ARN, qshare.StatusValid)

	d.engMu.Lock() // the loop cannot run a cycle
	_, err := d.UpdateShare(ctx, ShareUpdate{ARN: s.ARN, CapacityLimits: g5(2)})
	mustNil(t, err)
	_, err = d.UpdateShare(ctx, ShareUpdate{ARN: s.ARN, CapacityLimits: g5(3)})
	mustNil(t, err)
	if cur, _ := d.Share(s.ARN); cur.Status != qshare.StatusUpdating {
		t.Fatalf("share is %s while the loop is held, want UPDATING", cur.Status)
	}
	disabled := qshare.Disabled
	_, err = d.CreateEnvironment(ctx, EnvironmentInput{Name: "gone", Type: "SAGEMAKER_TRAINING", State: disabled, CapacityLimits: g5(1)})
	mustNil(t, err)
	deleted := make(chan error, 1)
	go func() { deleted <- d.DeleteEnvironment(ctx, "gone") }()
	time.Sleep(20 * time.Millisecond) // the deletion has forgotten it and waits for the engine
	d.engMu.Unlock()
	mustNil(t, <-deleted)

	got := waitShareStatus(t, d, s.ARN, qshare.StatusValid)
	if n := got.CapacityLimits[0].MaxCapacity; n != 3 {
		t.Fatalf("share limit %d after two updates, want 3", n)
	}
	st, err := d.st.Load(ctx)
	mustNil(t, err)
	if len(st.Shares) != 1 || st.Shares[0].Status != qshare.StatusValid || st.Shares[0].CapacityLimits[0].MaxCapacity != 3 {
		t.Fatalf("stored shares %+v, want A VALID with limit 3", st.Shares)
	}
	for _, e := range st.Environments {
		if e.Name == "gone" {
			t.Fatalf("the deleted environment is still stored: %+v", e)
		}
	}
	time.Sleep(50 * time.Millisecond) // let any late settling run
	d.engMu.Lock()
	defer d.engMu.Unlock()
	if vs := d.eng.Shares("q"); len(vs) != 1 || vs[0].Limits["ml.g5.xlarge"] != 3 {
		t.Fatalf("engine shares %+v, want A with limit 3", vs)
	}
	if err := d.eng.RemoveEnvironment("gone"); err == nil {
		t.Fatal("the deleted environment reached the engine")
	}
}

func mustNil(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
