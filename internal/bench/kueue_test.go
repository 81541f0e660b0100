package bench

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/sim"
)

// TestKueueIdealByHand checks the ideal of tiny workloads whose schedule
// can be worked out on paper.
func TestKueueIdealByHand(t *testing.T) {
	// One share of 4 instances. Two large jobs (4 instances, 1 s) at 0 and
	// 0.5 s: the first runs 0–1, the second waits until 1 and runs 1–2.
	// Makespan 2 s; admissions 0 and 0.5 s (mean 0.25); the share holds 4
	// instances for the whole 2 s: usage 100%.
	one := sim.KueueShape{Name: "tiny", Cohorts: 1, QueuesPerCohort: 1, NominalQuota: 4, BorrowingPercent: 500,
		Classes: []sim.KueueClass{{Name: "large", Count: 2, Size: 4, Runtime: time.Second, Priority: 200, Every: 500 * time.Millisecond}}}
	got, err := KueueIdealRun(context.Background(), one.Workload())
	if err != nil {
		t.Fatal(err)
	}
	if got.makespan != 2 {
		t.Errorf("ideal makespan = %v s, want 2", got.makespan)
	}
	if m := got.MeanAdmissionS["large"]; m != 0.25 {
		t.Errorf("mean admission = %v s, want 0.25", m)
	}
	if got.MinShareUsage != 100 || got.Usage != 100 {
		t.Errorf("usage = %v%% (min %v%%), want 100%%", got.Usage, got.MinShareUsage)
	}
	if got.Preemptions != 0 {
		t.Errorf("preemptions = %d, want 0", got.Preemptions)
	}

	// Two shares of 2 instances on 4, each with three 1-instance jobs of
	// 1 s at time 0. Each share starts its own two at once; the third of
	// each waits, since the other share uses all it owns: four run 0–1, two
	// run 1–2. Makespan 2 s; each share used 3 instance-seconds of 2 × 2:
	// 75%; admissions (0+0+1)/3 s.
	two := sim.KueueShape{Name: "two", Cohorts: 1, QueuesPerCohort: 2, NominalQuota: 2, BorrowingPercent: 500,
		Classes: []sim.KueueClass{{Name: "small", Count: 3, Size: 1, Runtime: time.Second, Priority: 50, Every: 0}}}
	got, err = KueueIdealRun(context.Background(), two.Workload())
	if err != nil {
		t.Fatal(err)
	}
	if got.makespan != 2 || got.MinShareUsage != 75 || got.Usage != 75 {
		t.Errorf("makespan %v s, usage %v%% (min %v%%); want 2 s, 75%%", got.makespan, got.Usage, got.MinShareUsage)
	}
	if m := got.MeanAdmissionS["small"]; m < 0.333 || m > 0.334 {
		t.Errorf("mean admission = %v s, want 1/3", m)
	}
}

// TestKueueFiguresByHand computes a run's figures from job details made up
// for the purpose, with the answers worked out on paper.
func TestKueueFiguresByHand(t *testing.T) {
	w := (sim.KueueShape{Name: "hand", Cohorts: 1, QueuesPerCohort: 2, NominalQuota: 4, BorrowingPercent: 500,
		Classes: []sim.KueueClass{{Name: "large", Count: 1, Size: 4, Runtime: time.Second, Priority: 200, Every: time.Second}}}).Workload()
	if len(w.Jobs) != 2 {
		t.Fatalf("workload has %d jobs, want 2", len(w.Jobs))
	}
	start := time.UnixMilli(1_000_000)
	at := func(s float64) *int64 { v := start.UnixMilli() + int64(s*1000); return &v }
	subs := []submitted{{spec: &w.Jobs[0], id: "a"}, {spec: &w.Jobs[1], id: "b"}}
	jobs := []*batch.DescribeServiceJobOutput{
		// cq-0's job: created at 0, admitted at 0.5, ran 0.5–1.5.
		{Status: types.ServiceJobStatusSucceeded, CreatedAt: at(0), ScheduledAt: at(0.5), StoppedAt: at(1.5),
			Attempts: []types.ServiceJobAttemptDetail{{StartedAt: at(0.5), StoppedAt: at(1.5)}}},
		// cq-1's job: created at 0, first admitted at 1 and preempted at
		// 1.5, admitted again at 2 (its latest scheduledAt), ran 2–4.
		{Status: types.ServiceJobStatusSucceeded, CreatedAt: at(0), ScheduledAt: at(2), StoppedAt: at(4),
			PreemptionSummary: &types.ServiceJobPreemptionSummary{PreemptedAttemptCount: aws.Int32(1)},
			Attempts: []types.ServiceJobAttemptDetail{
				{StartedAt: at(1), StoppedAt: at(1.5)},
				{StartedAt: at(2), StoppedAt: at(4)},
			}},
	}
	res := KueueResult{IdealS: 2}
	if err := kueueFigures(w, subs, jobs, start, &res); err != nil {
		t.Fatal(err)
	}
	// Wall: 0 → 4 s. cq-0 used 4 × 1 = 4 of 4 × 4 = 16: 25%. cq-1 used
	// 4 × (0.5 + 2) = 10 of 16: 62.5%. Together 14 of 32: 43.75%.
	// Admissions: 0.5 and 1 (the first): mean 0.75 s.
	if res.WallS != 4 || res.WallOverIdeal != 2 {
		t.Errorf("wall %v s (×%v ideal), want 4 s (×2)", res.WallS, res.WallOverIdeal)
	}
	if res.MinShareUsage != 25 || res.Usage != 43.75 {
		t.Errorf("usage %v%% (min %v%%), want 43.75%% (min 25%%)", res.Usage, res.MinShareUsage)
	}
	if m := res.MeanAdmissionS["large"]; m != 0.75 {
		t.Errorf("mean admission %v s, want 0.75", m)
	}
	if res.Preemptions != 1 {
		t.Errorf("preemptions %d, want 1", res.Preemptions)
	}

	jobs[1].Status = types.ServiceJobStatusFailed
	if err := kueueFigures(w, subs, jobs, start, &KueueResult{IdealS: 2}); err == nil {
		t.Error("a FAILED job was counted as a finished one")
	}
}

// TestIdealAtArrivalsByHand checks the ideal that takes the arrivals a
// run got instead of the schedule, on jobs worked out on paper.
func TestIdealAtArrivalsByHand(t *testing.T) {
	// One share of 4 instances; two large jobs (4 instances, 1 s), both
	// scheduled at 0: the schedule's ideal runs them 0–1 and 1–2 (2 s).
	w := (sim.KueueShape{Name: "late", Cohorts: 1, QueuesPerCohort: 1, NominalQuota: 4, BorrowingPercent: 500,
		Classes: []sim.KueueClass{{Name: "large", Count: 2, Size: 4, Runtime: time.Second, Priority: 200, Every: 0}}}).Workload()
	if len(w.Jobs) != 2 {
		t.Fatalf("workload has %d jobs, want 2", len(w.Jobs))
	}
	start := time.UnixMilli(5_000_000).Add(400 * time.Microsecond)
	at := func(s float64) *int64 { v := time.UnixMilli(5_000_000).UnixMilli() + int64(s*1000); return &v }
	subs := []submitted{{spec: &w.Jobs[0], id: "a"}, {spec: &w.Jobs[1], id: "b"}}
	// The server created the second job 3 s late and the first within the
	// millisecond of the start (read as 0.4 ms before it, so due at 0):
	// they run 0–1 and 3–4, a makespan of 4 s.
	jobs := []*batch.DescribeServiceJobOutput{{CreatedAt: at(0)}, {CreatedAt: at(3)}}
	got, err := idealAtArrivals(context.Background(), w, subs, jobs, start)
	if err != nil {
		t.Fatal(err)
	}
	if got.makespan != 4 {
		t.Errorf("ideal at arrivals = %v s, want 4", got.makespan)
	}
	// Created in the other order, 0.5 s apart: 0.5–1.5 and 1.5–2.5; the
	// jobs given to the simulator must be sorted by their new times.
	jobs = []*batch.DescribeServiceJobOutput{{CreatedAt: at(1)}, {CreatedAt: at(0.5)}}
	if got, err = idealAtArrivals(context.Background(), w, subs, jobs, start); err != nil {
		t.Fatal(err)
	}
	if got.makespan != 2.5 {
		t.Errorf("ideal at arrivals = %v s, want 2.5", got.makespan)
	}
	if w.Jobs[0].Submit != 0 || w.Jobs[1].Submit != 0 {
		t.Errorf("the workload's own schedule changed: %v, %v", w.Jobs[0].Submit, w.Jobs[1].Submit)
	}
}
