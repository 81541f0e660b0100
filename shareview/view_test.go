package shareview

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"

	"pgregory.net/rapid"

	"qshare"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const g5 = "ml.g5.xlarge"

// example returns the shares of the spec's worked example (§6.10).
func example() Input {
	return Input{
		Queue:       "training",
		Environment: "gpu-pool",
		EnvLimits:   qshare.Capacity{g5: 3},
		Shares: []Share{
			{Name: "QS3", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 1}},
			{Name: "QS1", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: 200, InSharePreemption: qshare.Enabled, Limits: qshare.Capacity{g5: 1}},
			{Name: "QS2", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 1}},
		},
		Usage:   map[string]qshare.Capacity{},
		Active:  map[string][]Job{},
		Waiting: map[string]int{},
		Heads:   map[string]Job{},
	}
}

func job(name string, prio int, status string, preempted int) Job {
	return Job{Name: name, ID: name + "-id", Priority: prio, Status: status, Demand: qshare.Capacity{g5: 1}, Preemptions: preempted}
}

func TestGolden(t *testing.T) {
	cases := map[string]func() []Input{
		"empty": func() []Input { return nil },
		"example-idle": func() []Input {
			return []Input{example()}
		},
		// Step 1: QS1 runs high on its own instance and med on QS2's.
		"example-step1-borrowing": func() []Input {
			in := example()
			in.Usage["QS1"] = qshare.Capacity{g5: 2}
			in.Active["QS1"] = []Job{job("qs1-med", 2, "RUNNING", 0), job("qs1-high", 3, "RUNNING", 0)}
			in.Waiting["QS1"] = 1
			in.Heads["QS1"] = job("qs1-low", 1, "RUNNABLE", 0)
			return []Input{in}
		},
		// Step 2: QS2 reclaimed its instance; med was preempted.
		"example-step2-reclaim": func() []Input {
			in := example()
			in.Usage["QS1"] = qshare.Capacity{g5: 1}
			in.Usage["QS2"] = qshare.Capacity{g5: 1}
			in.Active["QS1"] = []Job{job("qs1-high", 3, "RUNNING", 0)}
			in.Active["QS2"] = []Job{job("qs2-job-1", 1, "RUNNING", 0)}
			in.Waiting["QS1"] = 2
			in.Heads["QS1"] = job("qs1-med", 2, "RUNNABLE", 1)
			return []Input{in}
		},
		// Step 3: low, now priority 4, preempted high inside QS1.
		"example-step3-in-share": func() []Input {
			in := example()
			in.Usage["QS1"] = qshare.Capacity{g5: 1}
			in.Usage["QS2"] = qshare.Capacity{g5: 1}
			in.Active["QS1"] = []Job{job("qs1-low", 4, "RUNNING", 0)}
			in.Active["QS2"] = []Job{job("qs2-job-1", 1, "RUNNING", 0)}
			in.Waiting["QS1"] = 2
			in.Heads["QS1"] = job("qs1-high", 3, "RUNNABLE", 1)
			return []Input{in}
		},
		// Capacity nobody owns is borrowed first; a borrow limit is reached.
		"unowned-and-limit": func() []Input {
			return []Input{{
				Queue: "research", Environment: "big", EnvLimits: qshare.Capacity{"ml.p4d.24xlarge": 8, g5: 4},
				Shares: []Share{
					{Name: "alpha", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: 100, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{"ml.p4d.24xlarge": 2, g5: 1}},
					{Name: "beta", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1, InSharePreemption: qshare.Enabled, Limits: qshare.Capacity{"ml.p4d.24xlarge": 3}},
					{Name: "gamma", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{"ml.p4d.24xlarge": 2}},
				},
				Usage: map[string]qshare.Capacity{
					"alpha": {"ml.p4d.24xlarge": 4, g5: 1},
					"beta":  {"ml.p4d.24xlarge": 3},
				},
				Active: map[string][]Job{
					"alpha": {{Name: "a1", Priority: 5, Demand: qshare.Capacity{"ml.p4d.24xlarge": 4, g5: 1}}},
					"beta":  {{Name: "b1", Priority: 9, Demand: qshare.Capacity{"ml.p4d.24xlarge": 3}}},
				},
				Waiting: map[string]int{"alpha": 1, "beta": 1},
				Heads: map[string]Job{
					"alpha": {Name: "a2", Priority: 1, Status: "RUNNABLE", Demand: qshare.Capacity{"ml.p4d.24xlarge": 1}},
					"beta":  {Name: "b2", Priority: 9, Status: "RUNNABLE", Demand: qshare.Capacity{"ml.p4d.24xlarge": 2}},
				},
			}}
		},
		// A wide environment draws several instances per cell.
		"scaled": func() []Input {
			return []Input{{
				Queue: "wide", Environment: "fleet", EnvLimits: qshare.Capacity{g5: 200},
				Shares: []Share{
					{Name: "big", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 150}},
					{Name: "small", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 50}},
				},
				Usage:   map[string]qshare.Capacity{"big": {g5: 20}, "small": {g5: 120}},
				Heads:   map[string]Job{"small": {Name: "huge", Priority: 0, Status: "RUNNABLE", StatusReason: qshare.ReasonServiceEnvironmentMaxResource, Demand: qshare.Capacity{g5: 300}}},
				Waiting: map[string]int{"small": 1},
			}}
		},
		// Two queues, one of them disabled.
		"two-queues": func() []Input {
			a := example()
			b := example()
			b.Queue, b.QueueState = "batch", "DISABLED"
			b.Heads["QS3"] = job("stuck", 0, "RUNNABLE", 0)
			b.Waiting["QS3"] = 1
			return []Input{a, b}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			var views []View
			for _, in := range mk() {
				views = append(views, Compute(in))
			}
			var buf bytes.Buffer
			if err := Render(&buf, views); err != nil {
				t.Fatal(err)
			}
			golden(t, name+".txt", buf.Bytes())
			js, err := json.MarshalIndent(views, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			golden(t, name+".json", append(js, '\n'))
		})
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./shareview -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (run go test ./shareview -update if the change is intended)\n--- got:\n%s\n--- want:\n%s", name, got, want)
	}
}

// TestAttributionBalances checks, for random queues, that the attribution
// rule accounts for every instance: each share's owned capacity splits into
// own use, lent and idle; every borrowed instance comes from somewhere; what
// a share lends is what others borrow from it; and RESERVE capacity is lent
// only when no lending share and no unowned capacity is left.
func TestAttributionBalances(t *testing.T) {
	rapid.Check(t, func(t *rapid.T) {
		n := rapid.IntRange(1, 5).Draw(t, "shares")
		in := Input{Queue: "q", Environment: "e", EnvLimits: qshare.Capacity{g5: rapid.Int64Range(0, 20).Draw(t, "env")}, Usage: map[string]qshare.Capacity{}}
		strategies := []qshare.Strategy{qshare.StrategyReserve, qshare.StrategyLend, qshare.StrategyLendAndBorrow}
		for i := 0; i < n; i++ {
			name := string(rune('a' + i))
			in.Shares = append(in.Shares, Share{
				Name:        name,
				Strategy:    strategies[rapid.IntRange(0, 2).Draw(t, "strategy")],
				BorrowLimit: -1,
				Limits:      qshare.Capacity{g5: rapid.Int64Range(0, 6).Draw(t, "limit")},
			})
			in.Usage[name] = qshare.Capacity{g5: rapid.Int64Range(0, 8).Draw(t, "usage")}
		}
		v := Compute(in)
		lentTo := map[[2]string]int64{}
		borrowedFrom := map[[2]string]int64{}
		var unownedUsed, attributed, borrowed int64
		for _, s := range v.Shares {
			for _, c := range s.Capacity {
				if c.Own+c.Lent+c.Idle != c.Owned || c.Own+c.Borrowed != c.InUse || c.Idle < 0 || c.Lent < 0 {
					t.Fatalf("share %s does not balance: %+v", s.Name, c)
				}
				borrowed += c.Borrowed
				for _, f := range c.LentTo {
					lentTo[[2]string{s.Name, f.QuotaShare}] += f.Quantity
				}
				for _, f := range c.BorrowedFrom {
					attributed += f.Quantity
					if f.QuotaShare == Unowned {
						unownedUsed += f.Quantity
					} else {
						borrowedFrom[[2]string{f.QuotaShare, s.Name}] += f.Quantity
					}
				}
			}
		}
		for k, n := range lentTo {
			if borrowedFrom[k] != n {
				t.Fatalf("%s lent %d to %s, who borrowed %d from it", k[0], n, k[1], borrowedFrom[k])
			}
		}
		if len(lentTo) != len(borrowedFrom) {
			t.Fatalf("lent %v, borrowed %v", lentTo, borrowedFrom)
		}
		var owned, idleLendable int64
		for _, s := range in.Shares {
			owned += s.Limits[g5]
		}
		for _, s := range v.Shares {
			if s.Strategy.Lends() {
				for _, c := range s.Capacity {
					idleLendable += c.Idle
				}
			}
		}
		unowned := max(0, in.EnvLimits[g5]-owned)
		if unownedUsed > unowned {
			t.Fatalf("%d borrowed from %d unowned", unownedUsed, unowned)
		}
		// Attribution is complete whenever the sources suffice.
		var sources int64 = unowned
		for _, s := range v.Shares {
			for _, c := range s.Capacity {
				sources += c.Idle + c.Lent
			}
		}
		if attributed != min(borrowed, sources) {
			t.Fatalf("attributed %d of %d borrowed (sources %d)", attributed, borrowed, sources)
		}
		for _, s := range v.Shares {
			if s.Strategy.Lends() {
				continue
			}
			for _, c := range s.Capacity {
				if c.Lent > 0 && (idleLendable > 0 || unownedUsed < unowned) {
					t.Fatalf("RESERVE share %s lent %d while lendable capacity was left", s.Name, c.Lent)
				}
			}
		}
	})
}
