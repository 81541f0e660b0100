package bench

import "testing"

// TestRunEngineSmall runs the engine benchmark at a small scale and checks
// that its figures are internally consistent, not how fast they are.
func TestRunEngineSmall(t *testing.T) {
	opt := EngineOptions{Pending: 5000, Queues: 3, SharesPerQueue: 4, LatencyPasses: 200, BatchPasses: 20, Batch: 50, Seed: 7}
	r, err := RunEngine(opt)
	if err != nil {
		t.Fatal(err)
	}
	if r.Shares != 12 || r.PendingJobs != 5000 {
		t.Errorf("shape = %+v", r)
	}
	// Admissions are counted over more engine time than decisions (which
	// include every admission) are, so there are fewer of them per second.
	if r.AdmissionsPerS <= 0 || r.DecisionsPerS < r.AdmissionsPerS {
		t.Errorf("decisions/s %v must be at least admissions/s %v > 0", r.DecisionsPerS, r.AdmissionsPerS)
	}
	if !(r.BatchPassP50Ms <= r.BatchPassP99Ms) {
		t.Errorf("batch pass percentiles out of order: %v %v", r.BatchPassP50Ms, r.BatchPassP99Ms)
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
