package sim

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"sort"
	"testing"
	"time"

	"pgregory.net/rapid"

	"qshare"
	"qshare/config"
	"qshare/event"
	"qshare/internal/longtest"
)

// fairTolerance is how far, in parts of the capacity, an identifier's
// long-run part may be from its target (its inverse weight over the sum of
// the inverse weights) in TestFairShareLongRun.
const fairTolerance = 0.03

// TestFairShareLongRun: under steady contention (every identifier keeps a
// backlog), each share identifier's long-run part of a fair-share queue's
// capacity tends to its inverse weight. Random weights (0.5 to 4) for 2 to
// 4 identifiers, capacities of 4 to 8, jobs of one instance and 10 to 30 s (a decay of 600 s);
// the part is measured from the event log over the window in which every
// identifier still has jobs waiting, after a warm-up of 3 decay times.
// (Jobs of several instances add fragmentation: a head that does not fit
// is passed over for a smaller job of a heavier identifier, so the light
// identifier gets less than its part; TestFairShareWideJobs measures it.)
func TestFairShareLongRun(t *testing.T) {
	fairLongRun(t, fairTolerance, func(*rapid.T) int { return 1 })
}

// TestFairShareWideJobs is TestFairShareLongRun with one job in four of two
// instances, and the tolerance that fragmentation then needs.
func TestFairShareWideJobs(t *testing.T) {
	fairLongRun(t, 0.06, func(rt *rapid.T) int { return 1 + rapid.IntRange(0, 3).Draw(rt, "wide")/3 })
}

func fairLongRun(t *testing.T, fairTolerance float64, width func(*rapid.T) int) {
	// Each case simulates hours of contention: 20 cases by default, rapid's
	// 100 in .ci/run's long step.
	longtest.RapidChecksIn(t, 20)
	worst := 0.0
	rapid.Check(t, func(rt *rapid.T) {
		n := rapid.IntRange(2, 4).Draw(rt, "identifiers")
		capacity := int64(rapid.IntRange(4, 8).Draw(rt, "capacity"))
		// The decay time is long beside the jobs (10 to 30 s): usage then
		// averages over many jobs, which is what fair share needs to
		// converge (with a decay as short as a job, it follows only what
		// runs now, and whole instances round the parts).
		const decay = 600
		fs := &config.FairsharePolicy{ShareDecaySeconds: ptr(int64(decay))}
		weights := make([]float64, n)
		inv := 0.0
		for i := range weights {
			weights[i] = float64(rapid.IntRange(1, 8).Draw(rt, "weight")) / 2
			fs.ShareDistribution = append(fs.ShareDistribution, config.ShareWeight{ShareIdentifier: fmt.Sprintf("id%d", i), WeightFactor: weights[i]})
			inv += 1 / weights[i]
		}
		one := int64(1)
		cfg := &config.File{
			ServiceEnvironments: []config.Environment{{Name: "env", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: capacity}}}},
			SchedulingPolicies:  []config.Policy{{Name: "fair", FairsharePolicy: fs}},
			JobQueues:           []config.Queue{{Name: "q", Priority: &one, SchedulingPolicy: "fair", ServiceEnvironment: "env"}},
		}
		if err := cfg.Validate(config.Options{}); err != nil {
			rt.Fatal(err)
		}
		// Each identifier gets work for 10 decay times at its target part
		// (a fifth more), so that contention lasts that long.
		var jobs []Job
		for i := 0; i < n; i++ {
			part := (1 / weights[i]) / inv
			count := int(float64(capacity)*part*10*decay/20*1.2) + 1
			for k := 0; k < count; k++ {
				jobs = append(jobs, Job{ID: fmt.Sprintf("j%d-%05d", i, k), Queue: "q", Share: fmt.Sprintf("id%d", i),
					Duration: time.Duration(10+rapid.IntRange(0, 20).Draw(rt, "duration")) * time.Second,
					Demand:   qshare.Capacity{"ml.g5.xlarge": int64(width(rt))}, PreemptionRetries: -1})
			}
		}
		sort.SliceStable(jobs, func(a, b int) bool { return jobs[a].Submit < jobs[b].Submit })
		var events bytes.Buffer
		if _, err := Run(context.Background(), cfg, jobs, Options{Events: &events, verify: true}); err != nil {
			rt.Fatal(err)
		}
		used, end := fairUse(rt, events.Bytes(), n)
		from := float64(3 * decay)
		if end <= from+float64(5*decay) {
			// The drawn workload ran out before the window that the
			// property measures (one identifier's jobs drew short
			// durations): not a sample of steady contention, so rapid
			// discards it and draws another, and fails the test if most
			// cases are such. A whole test run here failed once on a case
			// that ended at 4,785 s of the 4,800 needed.
			rt.Skipf("contention lasted %gs only, not past %gs", end, from+float64(5*decay))
		}
		var total float64
		for _, u := range used {
			total += u(from, end)
		}
		for i := range weights {
			got, want := used[i](from, end)/total, (1/weights[i])/inv
			worst = max(worst, math.Abs(got-want))
			if math.Abs(got-want) > fairTolerance {
				rt.Fatalf("identifier id%d (weight %g): %.3f of the capacity over [%g, %g] s, want %.3f ± %g", i, weights[i], got, from, end, want, fairTolerance)
			}
		}
		vs, _, err := event.Check(cfg, bytes.NewReader(events.Bytes()), event.CheckOptions{})
		if err != nil || len(vs) > 0 {
			rt.Fatalf("checker: %v %v", err, vs)
		}
	})
	t.Logf("largest distance from the target part: %.4f (tolerance %g)", worst, fairTolerance)
}

func ptr[T any](v T) *T { return &v }

// fairUse reads an event log of a fair-share run: for each identifier i, a
// function giving its instance-seconds in a window, and the time at which
// the first identifier ran out of waiting jobs (the end of contention).
func fairUse(rt *rapid.T, log []byte, n int) ([]func(a, b float64) float64, float64) {
	type span struct {
		from, to float64
		inst     int64
	}
	spans := make([][]span, n)
	start := map[string]float64{}
	waiting := make([]int, n)
	end := math.Inf(1)
	ident := func(job string) int {
		var i, k int
		fmt.Sscanf(job, "j%d-%05d", &i, &k)
		return i
	}
	events, err := event.ReadAll(bytes.NewReader(log))
	if err != nil {
		rt.Fatal(err)
	}
	for _, e := range events {
		i := ident(e.Job)
		switch e.Event {
		case event.Submit:
			waiting[i]++
		case event.Start:
			start[e.Job] = e.T
			waiting[i]--
			if waiting[i] == 0 && e.T < end {
				end = e.T
			}
		case event.Finish:
			spans[i] = append(spans[i], span{start[e.Job], e.T, e.Instances})
		}
	}
	out := make([]func(a, b float64) float64, n)
	for i := range out {
		s := spans[i]
		out[i] = func(a, b float64) float64 {
			var sum float64
			for _, x := range s {
				lo, hi := max(x.from, a), min(x.to, b)
				if hi > lo {
					sum += (hi - lo) * float64(x.inst)
				}
			}
			return sum
		}
	}
	return out, end
}
