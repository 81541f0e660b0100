package engine

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare"
)

const g5 = "ml.g5.xlarge"

// lendingEngine is an environment of env × g5 with a LEND_AND_BORROW share
// QS1 (unbounded), two LEND shares QS2 and QS3, and a RESERVE share QS4, one
// g5 each; jobs of one g5 each are submitted to QS1 and scheduled.
func lendingEngine(t *testing.T, env int64, qs1Jobs int) *Engine {
	t.Helper()
	e := New()
	c := Config{
		Environments: []EnvironmentConfig{{Name: "pool", Limits: qshare.Capacity{g5: env}}},
		Queues:       []QueueConfig{{Name: "q", Environment: "pool"}},
	}
	for _, s := range []struct {
		name string
		st   qshare.Strategy
	}{{"QS1", qshare.StrategyLendAndBorrow}, {"QS2", qshare.StrategyLend}, {"QS3", qshare.StrategyLend}, {"QS4", qshare.StrategyReserve}} {
		c.Shares = append(c.Shares, ShareConfig{Queue: "q", Name: s.name, Limits: qshare.Capacity{g5: 1}, Strategy: s.st, BorrowLimit: qshare.BorrowUnlimited})
	}
	if err := c.Load(e); err != nil {
		t.Fatal(err)
	}
	t0 := time.Unix(1000, 0)
	for i := 0; i < qs1Jobs; i++ {
		if err := e.Submit(JobSpec{ID: fmt.Sprintf("j%d", i), Queue: "q", Share: "QS1", Created: t0.Add(time.Duration(i)), Demand: qshare.Capacity{g5: 1}, PreemptionRetries: -1}); err != nil {
			t.Fatal(err)
		}
	}
	e.Schedule(t0)
	return e
}

func capOf(t *testing.T, l qshare.Lending, share string) qshare.CapacityLending {
	t.Helper()
	for _, s := range l.QuotaShares {
		if s.QuotaShareName == share {
			if len(s.Capacity) != 1 || s.Capacity[0].CapacityUnit != g5 {
				t.Fatalf("%s: capacity %+v, want one %s entry", share, s.Capacity, g5)
			}
			return s.Capacity[0]
		}
	}
	t.Fatalf("no share %s in %+v", share, l)
	return qshare.CapacityLending{}
}

// checkSums checks what CapacityLending promises: own + lent + idle is
// owned, own + borrowed is in use, the flows sum to borrowed and lent, and
// every flow is seen from both sides.
func checkSums(t *testing.T, l qshare.Lending) {
	t.Helper()
	type edge struct{ from, to, typ string }
	lent, borrowed := map[edge]int64{}, map[edge]int64{}
	for _, s := range l.QuotaShares {
		for _, c := range s.Capacity {
			if c.Own+c.Lent+c.Idle != c.Owned || c.Own+c.Borrowed != c.InUse {
				t.Errorf("%s %s: own %d + lent %d + idle %d != owned %d, or own + borrowed %d != in use %d", s.QuotaShareName, c.CapacityUnit, c.Own, c.Lent, c.Idle, c.Owned, c.Borrowed, c.InUse)
			}
			var nb, nl int64
			for _, f := range c.BorrowedFrom {
				nb += f.Quantity
				if !f.Unowned {
					borrowed[edge{f.QuotaShare, s.QuotaShareName, c.CapacityUnit}] += f.Quantity
				}
			}
			for _, f := range c.LentTo {
				nl += f.Quantity
				lent[edge{s.QuotaShareName, f.QuotaShare, c.CapacityUnit}] += f.Quantity
			}
			if nb != c.Borrowed || nl != c.Lent {
				t.Errorf("%s %s: flows borrowed %d of %d, lent %d of %d", s.QuotaShareName, c.CapacityUnit, nb, c.Borrowed, nl, c.Lent)
			}
		}
	}
	if !reflect.DeepEqual(lent, borrowed) {
		t.Errorf("lent %v, borrowed %v: the two sides disagree", lent, borrowed)
	}
}

// TestLendingTwoLenders: QS1 runs four jobs on its own instance, the one no
// share owns, and those of the two lenders, in that order; the RESERVE
// share's instance stays idle.
func TestLendingTwoLenders(t *testing.T) {
	e := lendingEngine(t, 5, 5)
	l, ok := e.Lending("q")
	if !ok {
		t.Fatal("Lending: no queue q")
	}
	checkSums(t, l)
	if want := []qshare.EnvironmentLending{{CapacityUnit: g5, MaxCapacity: 5, InUse: 4, Unowned: 1}}; !reflect.DeepEqual(l.Capacity, want) {
		t.Errorf("capacity %+v, want %+v", l.Capacity, want)
	}
	want := map[string]qshare.CapacityLending{
		"QS1": {CapacityUnit: g5, Owned: 1, InUse: 4, Own: 1, Borrowed: 3, Limit: -1,
			BorrowedFrom: []qshare.Flow{{Unowned: true, Quantity: 1}, {QuotaShare: "QS2", Quantity: 1}, {QuotaShare: "QS3", Quantity: 1}}},
		"QS2": {CapacityUnit: g5, Owned: 1, Lent: 1, LentTo: []qshare.Flow{{QuotaShare: "QS1", Quantity: 1}}, Limit: 1},
		"QS3": {CapacityUnit: g5, Owned: 1, Lent: 1, LentTo: []qshare.Flow{{QuotaShare: "QS1", Quantity: 1}}, Limit: 1},
		"QS4": {CapacityUnit: g5, Owned: 1, Idle: 1, Limit: 1},
	}
	for name, w := range want {
		if got := capOf(t, l, name); !reflect.DeepEqual(got, w) {
			t.Errorf("%s:\n got %+v\nwant %+v", name, got, w)
		}
	}
	// Shares reads the same attribution.
	for _, v := range e.Shares("q") {
		c := capOf(t, l, v.Name)
		if v.Borrowed[g5] != c.Borrowed || v.Lent[g5] != c.Lent || v.Idle[g5] != c.Idle {
			t.Errorf("%s: Shares says borrowed %d lent %d idle %d, Lending %+v", v.Name, v.Borrowed[g5], v.Lent[g5], v.Idle[g5], c)
		}
	}
}

// TestLendingAfterLenderStops: QS2 lends its instance, then becomes
// RESERVE. The borrower keeps the instance until it is reclaimed, so QS2's
// instance is shown lent, not idle: the environment is never shown with
// more capacity than it has.
func TestLendingAfterLenderStops(t *testing.T) {
	e := lendingEngine(t, 4, 3)
	if err := e.SetShare(ShareConfig{Queue: "q", Name: "QS2", Limits: qshare.Capacity{g5: 1}, Strategy: qshare.StrategyReserve}); err != nil {
		t.Fatal(err)
	}
	l, _ := e.Lending("q")
	checkSums(t, l)
	if got := capOf(t, l, "QS1").BorrowedFrom; !reflect.DeepEqual(got, []qshare.Flow{{QuotaShare: "QS3", Quantity: 1}, {QuotaShare: "QS2", Quantity: 1}}) {
		t.Errorf("QS1 borrowed from %+v, want QS3 (a lender) first, then QS2", got)
	}
	if c := capOf(t, l, "QS2"); c.Lent != 1 || c.Idle != 0 {
		t.Errorf("QS2: %+v, want its instance lent to QS1", c)
	}
}

// TestLendingUnknownAndFIFO: an unknown queue has no answer; a queue
// without a quota-share policy (its QueueShare) lists no shares.
func TestLendingUnknownAndFIFO(t *testing.T) {
	e := New()
	if _, ok := e.Lending("nope"); ok {
		t.Fatal("Lending of an unknown queue succeeded")
	}
	q := qshare.JobQueue{Name: "fifo", ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "arn:aws:batch:us-east-1:000000000000:service-environment/pool"}}}
	env := qshare.ServiceEnvironment{Name: "pool", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: g5, MaxCapacity: 2}}}
	if err := Configure(Resources{Environments: []qshare.ServiceEnvironment{env}, Queues: []qshare.JobQueue{q}}).Load(e); err != nil {
		t.Fatal(err)
	}
	l, ok := e.Lending("fifo")
	if !ok || len(l.QuotaShares) != 0 || l.ServiceEnvironment != "pool" {
		t.Fatalf("Lending(fifo) = %+v, %v; want the queue on pool with no shares", l, ok)
	}
	want := Config{
		Environments: []EnvironmentConfig{{Name: "pool", Limits: qshare.Capacity{g5: 2}}},
		Queues:       []QueueConfig{{Name: "fifo", Environment: "pool"}},
		Shares:       []ShareConfig{{Queue: "fifo", Name: QueueShare, Limits: qshare.Capacity{g5: 2}, Strategy: qshare.StrategyReserve}},
	}
	if got := e.Config(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Config():\n got %+v\nwant %+v", got, want)
	}
}

// TestLendingBalances checks, for random shares holding random usage (held
// through Restore, so limits and configuration changes of every kind are
// covered), that the attribution accounts for every instance: own use, lent
// and idle add up to what each share owns; when the environment's usage is
// within its capacity, every borrowed instance is charged to someone; what
// a share lends is what others borrow from it; capacity no share owns is
// never over-lent; and a RESERVE share is charged only when no lending
// share and no unowned capacity is left.
func TestLendingBalances(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		e := New()
		env := rapid.Int64Range(0, 20).Draw(t, "env")
		c := Config{
			Environments: []EnvironmentConfig{{Name: "pool", Limits: qshare.Capacity{g5: env}}},
			Queues:       []QueueConfig{{Name: "q", Environment: "pool"}},
		}
		strategies := []qshare.Strategy{qshare.StrategyReserve, qshare.StrategyLend, qshare.StrategyLendAndBorrow}
		n := rapid.IntRange(1, 5).Draw(t, "shares")
		usage := map[string]int64{}
		var owned, used int64
		for i := 0; i < n; i++ {
			name := string(rune('a' + i))
			l := rapid.Int64Range(0, 6).Draw(t, "limit")
			owned += l
			c.Shares = append(c.Shares, ShareConfig{Queue: "q", Name: name, Limits: qshare.Capacity{g5: l},
				Strategy: strategies[rapid.IntRange(0, 2).Draw(t, "strategy")], BorrowLimit: qshare.BorrowUnlimited})
			usage[name] = rapid.Int64Range(0, 8).Draw(t, "usage")
			used += usage[name]
		}
		if err := c.Load(e); err != nil {
			t.Fatal(err)
		}
		for _, s := range c.Shares {
			if u := usage[s.Name]; u > 0 {
				if err := e.Restore(JobSpec{ID: s.Name, Queue: "q", Share: s.Name, Demand: qshare.Capacity{g5: u}, PreemptionRetries: -1}, time.Unix(0, 0)); err != nil {
					t.Fatal(err)
				}
			}
		}
		l, _ := e.Lending("q")
		lentTo, borrowedFrom := map[[2]string]int64{}, map[[2]string]int64{}
		var unownedUsed, attributed, borrowed, idleLendable int64
		for _, s := range l.QuotaShares {
			for _, c := range s.Capacity {
				if c.Own+c.Lent+c.Idle != c.Owned || c.Own+c.Borrowed != c.InUse || c.Idle < 0 || c.Lent < 0 {
					t.Fatalf("share %s does not balance: %+v", s.QuotaShareName, c)
				}
				borrowed += c.Borrowed
				if s.Strategy.Lends() {
					idleLendable += c.Idle
				}
				for _, f := range c.LentTo {
					lentTo[[2]string{s.QuotaShareName, f.QuotaShare}] += f.Quantity
				}
				for _, f := range c.BorrowedFrom {
					attributed += f.Quantity
					if f.Unowned {
						unownedUsed += f.Quantity
					} else {
						borrowedFrom[[2]string{f.QuotaShare, s.QuotaShareName}] += f.Quantity
					}
				}
			}
		}
		if !reflect.DeepEqual(lentTo, borrowedFrom) {
			t.Fatalf("lent %v, borrowed %v", lentTo, borrowedFrom)
		}
		if unowned := max(0, env-owned); unownedUsed > unowned {
			t.Fatalf("%d borrowed from %d unowned", unownedUsed, unowned)
		}
		if used <= env && attributed != borrowed {
			t.Fatalf("usage %d within the environment's %d, but %d of %d borrowed attributed", used, env, attributed, borrowed)
		}
		if attributed > borrowed {
			t.Fatalf("attributed %d, more than the %d borrowed", attributed, borrowed)
		}
		for _, s := range l.QuotaShares {
			if s.Strategy.Lends() {
				continue
			}
			for _, c := range s.Capacity {
				if c.Lent > 0 && (idleLendable > 0 || unownedUsed < max(0, env-owned)) {
					t.Fatalf("RESERVE share %s charged %d while lendable capacity was left", s.QuotaShareName, c.Lent)
				}
			}
		}
	})
}
