package bench

import "testing"

// TestRunEngineSmall runs the engine benchmark at a small scale and checks
// that its figures are internally consistent, not how fast they are.
func TestRunEngineSmall(t *testing.T) {
	opt := EngineOptions{Pending: 5000, Queues: 3, SharesPerQueue: 4, Passes: 50, Churn: 8, Seed: 7}
	r, err := RunEngine(opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Shares != 12 || r.PendingJobs != 5000 || r.Passes != 50 {
		t.Errorf("shape = %+v", r)
	}
	if r.StartsPerS <= 0 || r.DecisionsPerS < r.StartsPerS {
		t.Errorf("decisions/s %v must be at least starts/s %v > 0", r.DecisionsPerS, r.StartsPerS)
	}
	if !(r.PassP50Ms <= r.PassP99Ms && r.PassP99Ms <= r.PassMaxMs) {
		t.Errorf("pass percentiles out of order: %v %v %v", r.PassP50Ms, r.PassP99Ms, r.PassMaxMs)
	}
	// A pending job costs the engine something, and far less than the
	// spec that describes it would if it were kept whole.
	if r.BytesPerPendingJob <= 16 || r.BytesPerPendingJob > 64<<10 {
		t.Errorf("bytes per pending job = %v", r.BytesPerPendingJob)
	}
}
