package shareview

import (
	"bytes"
	"encoding/json"
	"flag"
	"testing"
	"time"

	"qshare"
	"qshare/engine"
	goldenfile "qshare/internal/golden"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

const g5 = "ml.g5.xlarge"

// served returns in with the Lending a qshare server serves for it: the
// answer of a real engine given in's environment (of capacity env) and
// shares, in which each share runs one job that holds usage[share].
func served(t *testing.T, in Input, env qshare.Capacity, usage map[string]qshare.Capacity) Input {
	t.Helper()
	e := engine.New()
	c := engine.Config{
		Environments: []engine.EnvironmentConfig{{Name: in.Environment, Limits: env}},
		Queues:       []engine.QueueConfig{{Name: in.Queue, Environment: in.Environment}},
	}
	for _, s := range in.Shares {
		c.Shares = append(c.Shares, engine.ShareConfig{Queue: in.Queue, Name: s.Name, Limits: s.Limits, Strategy: s.Strategy, BorrowLimit: s.BorrowLimit})
	}
	if err := c.Load(e); err != nil {
		t.Fatal(err)
	}
	for _, s := range in.Shares {
		if u := usage[s.Name]; u.Total() > 0 {
			if err := e.Restore(engine.JobSpec{ID: s.Name + "-held", Queue: in.Queue, Share: s.Name, Demand: u, PreemptionRetries: -1}, time.Unix(0, 0)); err != nil {
				t.Fatal(err)
			}
		}
	}
	l, ok := e.Lending(in.Queue)
	if !ok {
		t.Fatalf("the engine has no queue %s", in.Queue)
	}
	in.Lending = l
	return in
}

// example returns the shares of the spec's worked example (§6.10), in an
// environment of three ml.g5.xlarge.
func example() Input {
	return Input{
		Queue:       "training",
		Environment: "gpu-pool",
		Shares: []Share{
			{Name: "QS3", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 1}},
			{Name: "QS1", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: 200, InSharePreemption: qshare.Enabled, Limits: qshare.Capacity{g5: 1}},
			{Name: "QS2", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 1}},
		},
		Active:  map[string][]Job{},
		Waiting: map[string]int{},
		Heads:   map[string]Job{},
	}
}

func job(name string, prio int, status string, preempted int) Job {
	return Job{Name: name, ID: name + "-id", Priority: prio, Status: status, Demand: qshare.Capacity{g5: 1}, Preemptions: preempted}
}

func TestGolden(t *testing.T) {
	cases := map[string]func(t *testing.T) []Input{
		"empty": func(t *testing.T) []Input { return nil },
		// A fair-share queue: its share identifiers, what their jobs use,
		// and each one's head with the server's reason.
		"fair-share": func(t *testing.T) []Input {
			in := Input{Queue: "fair", Environment: "gpu-pool", FairShare: true,
				Shares:   []Share{{Name: "teamB", Strategy: FairShareStrategy}, {Name: "teamA", Strategy: FairShareStrategy}},
				Capacity: []qshare.EnvironmentLending{{CapacityUnit: g5, MaxCapacity: 3, InUse: 3}},
				Active:   map[string][]Job{"teamA": {job("a1", 0, "RUNNING", 0), job("a2", 1, "RUNNING", 0)}, "teamB": {job("b1", 0, "RUNNING", 0)}},
				Waiting:  map[string]int{"teamA": 2, "teamB": 1},
				Heads:    map[string]Job{"teamB": {Name: "b2", ID: "b2-id", Status: "RUNNABLE", StatusReason: "waiting for capacity"}},
			}
			return []Input{in}
		},
		"example-idle": func(t *testing.T) []Input {
			return []Input{served(t, example(), qshare.Capacity{g5: 3}, nil)}
		},
		// Step 1: QS1 runs high on its own instance and med on QS2's.
		"example-step1-borrowing": func(t *testing.T) []Input {
			in := example()
			in.Active["QS1"] = []Job{job("qs1-med", 2, "RUNNING", 0), job("qs1-high", 3, "RUNNING", 0)}
			in.Waiting["QS1"] = 1
			in.Heads["QS1"] = job("qs1-low", 1, "RUNNABLE", 0)
			return []Input{served(t, in, qshare.Capacity{g5: 3}, map[string]qshare.Capacity{"QS1": {g5: 2}})}
		},
		// Step 2: QS2 reclaimed its instance; med was preempted.
		"example-step2-reclaim": func(t *testing.T) []Input {
			in := example()
			in.Active["QS1"] = []Job{job("qs1-high", 3, "RUNNING", 0)}
			in.Active["QS2"] = []Job{job("qs2-job-1", 1, "RUNNING", 0)}
			in.Waiting["QS1"] = 2
			in.Heads["QS1"] = job("qs1-med", 2, "RUNNABLE", 1)
			return []Input{served(t, in, qshare.Capacity{g5: 3}, map[string]qshare.Capacity{"QS1": {g5: 1}, "QS2": {g5: 1}})}
		},
		// Step 3: low, now priority 4, preempted high inside QS1.
		"example-step3-in-share": func(t *testing.T) []Input {
			in := example()
			in.Active["QS1"] = []Job{job("qs1-low", 4, "RUNNING", 0)}
			in.Active["QS2"] = []Job{job("qs2-job-1", 1, "RUNNING", 0)}
			in.Waiting["QS1"] = 2
			in.Heads["QS1"] = job("qs1-high", 3, "RUNNABLE", 1)
			return []Input{served(t, in, qshare.Capacity{g5: 3}, map[string]qshare.Capacity{"QS1": {g5: 1}, "QS2": {g5: 1}})}
		},
		// QS2 lent its instance to QS1, then became RESERVE: until it
		// reclaims it, the instance is still QS2's, lent to QS1.
		"lender-stopped-lending": func(t *testing.T) []Input {
			in := example()
			in.Shares[2].Strategy = qshare.StrategyReserve
			in.Active["QS1"] = []Job{job("qs1-med", 2, "RUNNING", 0), job("qs1-high", 3, "RUNNING", 0)}
			return []Input{served(t, in, qshare.Capacity{g5: 3}, map[string]qshare.Capacity{"QS1": {g5: 2}})}
		},
		// Capacity nobody owns is borrowed first; a borrow limit is reached.
		"unowned-and-limit": func(t *testing.T) []Input {
			return []Input{served(t, Input{
				Queue: "research", Environment: "big",
				Shares: []Share{
					{Name: "alpha", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: 100, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{"ml.p4d.24xlarge": 2, g5: 1}},
					{Name: "beta", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1, InSharePreemption: qshare.Enabled, Limits: qshare.Capacity{"ml.p4d.24xlarge": 3}},
					{Name: "gamma", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{"ml.p4d.24xlarge": 2}},
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
			}, qshare.Capacity{"ml.p4d.24xlarge": 8, g5: 4}, map[string]qshare.Capacity{
				"alpha": {"ml.p4d.24xlarge": 4, g5: 1},
				"beta":  {"ml.p4d.24xlarge": 3},
			})}
		},
		// A wide environment draws several instances per cell.
		"scaled": func(t *testing.T) []Input {
			return []Input{served(t, Input{
				Queue: "wide", Environment: "fleet",
				Shares: []Share{
					{Name: "big", Strategy: qshare.StrategyLend, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 150}},
					{Name: "small", Strategy: qshare.StrategyLendAndBorrow, BorrowLimit: -1, InSharePreemption: qshare.Disabled, Limits: qshare.Capacity{g5: 50}},
				},
				Heads:   map[string]Job{"small": {Name: "huge", Priority: 0, Status: "RUNNABLE", StatusReason: qshare.ReasonServiceEnvironmentMaxResource, Demand: qshare.Capacity{g5: 300}}},
				Waiting: map[string]int{"small": 1},
			}, qshare.Capacity{g5: 200}, map[string]qshare.Capacity{"big": {g5: 20}, "small": {g5: 120}})}
		},
		// Two queues, one of them disabled.
		"two-queues": func(t *testing.T) []Input {
			a := example()
			b := example()
			b.Queue, b.QueueState = "batch", "DISABLED"
			b.Heads["QS3"] = job("stuck", 0, "RUNNABLE", 0)
			b.Waiting["QS3"] = 1
			return []Input{served(t, a, qshare.Capacity{g5: 3}, nil), served(t, b, qshare.Capacity{g5: 3}, nil)}
		},
	}
	for name, mk := range cases {
		t.Run(name, func(t *testing.T) {
			var views []View
			for _, in := range mk(t) {
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
	goldenfile.Check(t, "shareview", name, got, *update)
}
