package engine

import (
	"testing"
	"time"

	"qshare"
)

// These cases were found by the simulator's event-log checker
// (sim/testdata/engine/*, QSHARE_SIM_ENGINE_ISSUES=1 go test ./sim -run
// EngineIssues): each breaks a rule-9 guarantee of issue 2.

// regressionEngine is an engine with environment env of the given limits,
// queue q on it, and the shares in q.
func regressionEngine(t *testing.T, limits qshare.Capacity, shares ...ShareConfig) *Engine {
	t.Helper()
	e := New()
	if err := e.SetEnvironment(EnvironmentConfig{Name: "env", Limits: limits}); err != nil {
		t.Fatal(err)
	}
	if err := e.SetQueue(QueueConfig{Name: "q", Environment: "env"}); err != nil {
		t.Fatal(err)
	}
	for _, s := range shares {
		s.Queue = "q"
		if err := e.SetShare(s); err != nil {
			t.Fatal(err)
		}
	}
	return e
}

func regressionSubmit(t *testing.T, e *Engine, id, share string, demand qshare.Capacity, prio int, at time.Time) {
	t.Helper()
	if err := e.Submit(JobSpec{ID: id, Queue: "q", Share: share, Priority: prio, Created: at,
		Demand: demand, PreemptionRetries: -1}); err != nil {
		t.Fatal(err)
	}
}

// regressionRelease releases the jobs (requeued, or ended) one by one, and
// fails the test if the engine refuses one.
func regressionRelease(t *testing.T, e *Engine, requeue bool, ids ...string) {
	t.Helper()
	for _, id := range ids {
		if err := e.Release(id, requeue); err != nil {
			t.Fatal(err)
		}
	}
}

// regressionStarts schedules at now and fails unless job id starts; the
// failure gives its state and says why it should have started (why, after
// "waits").
func regressionStarts(t *testing.T, e *Engine, now time.Time, id, why string) {
	t.Helper()
	if s := started(e.Schedule(now)); !s[id] {
		v, _ := e.Job(id)
		t.Fatalf("%s (state %v) waits %s", id, v.State, why)
	}
}

// one is n ml.g5.xlarge instances.
func one(n int64) qshare.Capacity { return qshare.Capacity{"ml.g5.xlarge": n} }

func started(ds []Decision) map[string]bool   { return decided(ds, DecisionStart) }
func preempted(ds []Decision) map[string]bool { return decided(ds, DecisionPreempt) }

// decided returns the jobs of the decisions of kind k.
func decided(ds []Decision, k DecisionKind) map[string]bool {
	m := map[string]bool{}
	for _, d := range ds {
		if d.Kind == k {
			m[d.Job] = true
		}
	}
	return m
}

// A borrower must not take a RESERVE share's idle capacity, also in the pass
// where that share preempts one of its own jobs for another (borrow source).
func TestRegressionReserveNotBorrowedDuringInSharePreemption(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := regressionEngine(t, one(6),
		ShareConfig{Name: "s0", Limits: one(3), Strategy: qshare.StrategyReserve, BorrowLimit: -1, InSharePreemption: true},
		ShareConfig{Name: "s1", Limits: one(1), Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1},
		ShareConfig{Name: "s2", Limits: one(2), Strategy: qshare.StrategyLend, BorrowLimit: -1},
	)
	regressionSubmit(t, e, "low", "s0", one(2), 0, t0)
	regressionSubmit(t, e, "big", "s1", one(4), 0, t0)
	if s := started(e.Schedule(t0)); !s["low"] || s["big"] {
		t.Fatalf("t=0 started %v, want low only (big would need 3 borrowed; lenders have 2 idle)", s)
	}
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "high", "s0", one(2), 1, t1)
	ds := e.Schedule(t1)
	if started(ds)["big"] {
		t.Fatalf("t=1: big started by borrowing while s0 (RESERVE) preempts low for high; decisions %+v", ds)
	}
	regressionRelease(t, e, true, "low")
	if s := started(e.Schedule(t1)); !s["high"] || s["big"] {
		t.Fatalf("after low's release started %v, want high and not big", s)
	}
}

// In an oversubscribed environment, a RESERVE share's head that fits its own
// limit starts when the environment has free room, even if another RESERVE
// share owns that room on paper (no head waits while it fits its own
// capacity and the environment has free room).
func TestRegressionOversubscribedReserveHeadStarts(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := regressionEngine(t, one(1),
		ShareConfig{Name: "s0", Limits: one(1), Strategy: qshare.StrategyReserve, BorrowLimit: -1},
		ShareConfig{Name: "s1", Limits: one(1), Strategy: qshare.StrategyReserve, BorrowLimit: -1},
	)
	regressionSubmit(t, e, "a", "s0", one(1), 0, t0)
	if s := started(e.Schedule(t0)); !s["a"] {
		t.Fatalf("a did not start although it fits s0's own limit and the environment has 1 free")
	}
}

// A reserved job starts as soon as it fits, without waiting for a victim
// that is still stopping once capacity has freed up otherwise.
func TestRegressionReservedStartsWhenItFits(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := regressionEngine(t, one(5),
		ShareConfig{Name: "s0", Limits: one(5), Strategy: qshare.StrategyReserve, BorrowLimit: -1, InSharePreemption: true},
	)
	regressionSubmit(t, e, "victim", "s0", one(1), 0, t0)
	if s := started(e.Schedule(t0)); !s["victim"] {
		t.Fatal("victim did not start")
	}
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "a_quick", "s0", one(1), 1, t1)
	regressionSubmit(t, e, "head", "s0", one(4), 1, t1)
	ds := e.Schedule(t1)
	if !started(ds)["a_quick"] {
		t.Fatalf("t=1: a_quick did not start: %+v", ds)
	}
	// a_quick ends at once; victim is still stopping (a grace period).
	regressionRelease(t, e, false, "a_quick")
	regressionStarts(t, e, t1, "head", "for its stopping victim although 4 are free and it fits its share's own limit")
}

// A RESERVE share whose job waits for another share's victims to stop has
// nothing yet: its capacity is idle, and a borrower may not take it in the
// meantime (found by the simulator's property test: a borrower started on
// the room a RESERVE share's finished job left, in an oversubscribed
// environment, while the share's next job waited for a reclaim).
func TestRegressionReserveNotBorrowedWhileItsReservationWaits(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := regressionEngine(t, one(3),
		ShareConfig{Name: "s0", Limits: one(2), Strategy: qshare.StrategyReserve, BorrowLimit: -1},
		ShareConfig{Name: "s1", Limits: one(1), Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1, InSharePreemption: true},
		ShareConfig{Name: "s2", Limits: one(1), Strategy: qshare.StrategyLend, BorrowLimit: -1},
	)
	regressionSubmit(t, e, "b", "s1", one(2), 0, t0)
	regressionSubmit(t, e, "a", "s0", one(1), 0, t0)
	if s := started(e.Schedule(t0)); !s["a"] || !s["b"] {
		t.Fatalf("t=0 started %v, want a and b (b borrows s2's 1)", s)
	}
	regressionRelease(t, e, false, "a")
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "big", "s0", one(2), 0, t1)
	regressionSubmit(t, e, "more", "s1", one(1), 0, t1.Add(time.Millisecond))
	ds := e.Schedule(t1)
	if !preempted(ds)["b"] {
		t.Fatalf("t=1: b not reclaimed for big: %+v", ds)
	}
	if started(ds)["more"] {
		t.Fatalf("t=1: more borrowed the room s0 (RESERVE) left while big waits for b to stop: %+v", ds)
	}
	regressionRelease(t, e, true, "b")
	if s := started(e.Schedule(t1)); !s["big"] {
		t.Fatalf("after b's release started %v, want big", s)
	}
}

// In an oversubscribed environment, a RESERVE share's head that fits its own
// limit starts on free room even while another RESERVE share's job is
// stopping: the stopping job still holds its capacity, so that share's idle
// capacity is only what it does not hold (found by the simulator's property
// test: the head waited until the stopping job was gone).
func TestRegressionReserveHeadStartsBesideAStoppingJob(t *testing.T) {
	t0 := time.Unix(0, 0)
	e := regressionEngine(t, one(5),
		ShareConfig{Name: "s0", Limits: one(2), Strategy: qshare.StrategyReserve, BorrowLimit: -1},
		ShareConfig{Name: "s1", Limits: one(4), Strategy: qshare.StrategyReserve, BorrowLimit: -1, InSharePreemption: true},
	)
	regressionSubmit(t, e, "low", "s1", one(3), 0, t0)
	regressionSubmit(t, e, "a0", "s0", one(1), 0, t0)
	regressionSubmit(t, e, "a1", "s0", one(1), 0, t0)
	if s := started(e.Schedule(t0)); !s["low"] || !s["a0"] || !s["a1"] {
		t.Fatalf("t=0 started %v, want low, a0 and a1", s)
	}
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "high", "s1", one(1), 1, t1)
	if ds := e.Schedule(t1); !preempted(ds)["low"] {
		t.Fatalf("t=1: low not preempted in-share for high: %+v", ds)
	}
	regressionRelease(t, e, false, "a0", "a1")
	if s := started(e.Schedule(t1)); !s["high"] {
		t.Fatalf("high did not start on the room a0 and a1 left: %v", s)
	}
	regressionRelease(t, e, false, "high")
	// low still stops (a grace period) and holds 3; 2 are free.
	regressionSubmit(t, e, "a2", "s0", one(1), 0, t1)
	regressionStarts(t, e, t1, "a2", "although it fits s0's own limit and 2 are free")
}

// A start within its own limit can make a head that already failed its
// reclaim in the same pass succeed: taking the last free capacity of a type
// the head needs makes that type short too, and a share above its own limit
// of that type becomes a candidate (found by the property test: the
// reference, which always rounds again, reclaimed in the same pass; the
// engine left the head waiting until something else changed).
func TestRegressionStartWidensAFailedReclaim(t *testing.T) {
	t0 := time.Unix(0, 0)
	const a, b = "ml.g5.xlarge", "ml.p4d.24xlarge"
	e := regressionEngine(t, qshare.Capacity{a: 2, b: 2},
		ShareConfig{Name: "sx", Limits: qshare.Capacity{a: 2}, Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1},
		ShareConfig{Name: "sf", Limits: qshare.Capacity{a: 2, b: 1}, Strategy: qshare.StrategyLend, BorrowLimit: -1},
		ShareConfig{Name: "sg", Limits: qshare.Capacity{b: 1}, Strategy: qshare.StrategyLend, BorrowLimit: -1},
	)
	// x holds all of a (within sx's limit) and borrows 1 b (above sx's
	// limit of none).
	regressionSubmit(t, e, "x", "sx", qshare.Capacity{a: 2, b: 1}, 0, t0)
	if s := started(e.Schedule(t0)); !s["x"] {
		t.Fatalf("t=0 started %v, want x", s)
	}
	// f is evaluated first: it lacks a but not b, and no share is above its
	// own limit of a, so its reclaim fails. g then takes the last free b:
	// now f lacks b too, and x (sx is above its limit of b) can be
	// reclaimed for it.
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "f", "sf", qshare.Capacity{a: 2, b: 1}, 0, t1)
	regressionSubmit(t, e, "g", "sg", qshare.Capacity{b: 1}, 0, t1.Add(time.Millisecond))
	ds := e.Schedule(t1)
	if !started(ds)["g"] || !preempted(ds)["x"] {
		t.Fatalf("t=1: want g started and x preempted for f in the same pass: %+v", ds)
	}
}

// A RESERVE share's reserved job starts early on free room within its
// share's limit, like a head of the share would: the capacity promised to
// it is the share's own idle capacity, not room it must leave to itself
// (found by the simulator's property test: the job waited for its stopping
// victim beside free room, in an oversubscribed environment).
func TestRegressionReserveReservedStartsEarlyOnItsOwnIdle(t *testing.T) {
	t0 := time.Unix(0, 0)
	// The shares own 8 of 7: a deficit of 1.
	e := regressionEngine(t, one(7),
		ShareConfig{Name: "s1", Limits: one(1), Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1},
		ShareConfig{Name: "s3", Limits: one(3), Strategy: qshare.StrategyReserve, BorrowLimit: -1},
		ShareConfig{Name: "s4", Limits: one(4), Strategy: qshare.StrategyLend, BorrowLimit: -1},
	)
	regressionSubmit(t, e, "x", "s1", one(4), 0, t0)
	regressionSubmit(t, e, "w", "s4", one(1), 0, t0)
	if s := started(e.Schedule(t0)); !s["x"] || !s["w"] {
		t.Fatalf("t=0 started %v, want x (borrowing 3) and w", s)
	}
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "h", "s3", one(3), 0, t1)
	if ds := e.Schedule(t1); !preempted(ds)["x"] {
		t.Fatalf("t=1: x not reclaimed for h (2 usable, h needs 3): %+v", ds)
	}
	// w finishes while x still stops (a grace period): 3 are free, all of
	// them s3's own idle capacity.
	regressionRelease(t, e, false, "w")
	t2 := t1.Add(time.Second)
	regressionStarts(t, e, t2, "h", "for its stopping victim although 3 are free and it fits s3's own limit")
}

// A reserved job starts early only if its share's committed usage fits the
// limit: what the share's other reserved jobs still wait for joins the share
// when their victims are released, whatever it holds then (found by the
// property test: a job started early beside its stopping in-share victim,
// and another reserved job of the share then took it above its limit).
func TestRegressionEarlyStartLeavesRoomForOtherReservations(t *testing.T) {
	t0 := time.Unix(0, 0)
	// The shares own 8 of 5: a deficit of 3.
	e := regressionEngine(t, one(5),
		ShareConfig{Name: "s3", Limits: one(1), Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1},
		ShareConfig{Name: "s4", Limits: one(3), Strategy: qshare.StrategyLend, BorrowLimit: -1},
		ShareConfig{Name: "s5", Limits: one(4), Strategy: qshare.StrategyReserve, BorrowLimit: -1, InSharePreemption: true},
	)
	regressionSubmit(t, e, "low", "s5", one(1), 0, t0)
	regressionSubmit(t, e, "x", "s3", one(3), 0, t0)
	if s := started(e.Schedule(t0)); !s["low"] || !s["x"] {
		t.Fatalf("t=0 started %v, want low and x (borrowing 2)", s)
	}
	t1 := t0.Add(time.Second)
	regressionSubmit(t, e, "big", "s5", one(3), 0, t1)
	if ds := e.Schedule(t1); !preempted(ds)["x"] || started(ds)["big"] {
		t.Fatalf("t=1: want x reclaimed for big (1 usable, big needs 3), big not started: %+v", ds)
	}
	// s5 commits 4 of 4 (low 1, big 3): high fits only once low is gone.
	t2 := t1.Add(time.Second)
	regressionSubmit(t, e, "high", "s5", one(1), 1, t2)
	ds := e.Schedule(t2)
	if !preempted(ds)["low"] {
		t.Fatalf("t=2: low not preempted in-share for high: %+v", ds)
	}
	if started(ds)["high"] {
		t.Fatalf("t=2: high started while low still stops and big waits for 3: s5 would commit 5 of 4: %+v", ds)
	}
	usage := func() int64 {
		for _, v := range e.Shares("q") {
			if v.Name == "s5" {
				return v.Usage["ml.g5.xlarge"]
			}
		}
		t.Fatal("no share s5")
		return 0
	}
	regressionRelease(t, e, true, "x")
	t3 := t2.Add(time.Second)
	if s := started(e.Schedule(t3)); !s["big"] {
		t.Fatalf("t=3: big did not start after x's release: %v", s)
	}
	if u := usage(); u > 4 {
		t.Fatalf("t=3: s5 holds %d, above its limit of 4", u)
	}
	regressionRelease(t, e, true, "low")
	if s := started(e.Schedule(t3)); !s["high"] {
		t.Fatalf("t=3: high did not start after low's release: %v", s)
	}
	if u := usage(); u > 4 {
		t.Fatalf("t=3: s5 holds %d, above its limit of 4", u)
	}
}
