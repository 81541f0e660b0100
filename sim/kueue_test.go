package sim

import (
	"bytes"
	"context"
	"testing"

	"qshare/config"
)

func TestKueueShapes(t *testing.T) {
	for _, tc := range []struct {
		w                  *Workload
		jobs, shares, envs int
		maxShares          int
		firstClassPerQueue map[string]int
	}{
		{KueueBaseline(), 15000, 30, 5, 0, map[string]int{"small": 350, "medium": 100, "large": 50}},
		{KueueLargeScale(), 50000, 1000, 10, 100, map[string]int{"small": 35, "medium": 11, "large": 4}},
	} {
		w := tc.w
		if err := w.Config.Validate(config.Options{MaxSharesPerQueue: w.MaxSharesPerQueue}); err != nil {
			t.Fatalf("%s: %v", w.Name, err)
		}
		if len(w.Jobs) != tc.jobs || len(w.Config.ShareNames()) != tc.shares || len(w.Config.ServiceEnvironments) != tc.envs || w.MaxSharesPerQueue != tc.maxShares {
			t.Errorf("%s: %d jobs, %d shares, %d environments, max shares %d", w.Name, len(w.Jobs), len(w.Config.ShareNames()), len(w.Config.ServiceEnvironments), w.MaxSharesPerQueue)
		}
		perClass := map[string]int{}
		for i, j := range w.Jobs {
			if i > 0 && j.Submit < w.Jobs[i-1].Submit {
				t.Fatalf("%s: jobs not sorted at %d", w.Name, i)
			}
			if j.Queue == "cohort-0" && j.Share == "cq-0" {
				perClass[ClassOf(j.ID)]++
			}
		}
		for c, n := range tc.firstClassPerQueue {
			if perClass[c] != n {
				t.Errorf("%s: queue cq-0 has %d %s jobs, want %d", w.Name, perClass[c], c, n)
			}
		}
	}
}

// TestKueueBaselineIdeal replays the baseline under the virtual clock: the
// zero-overhead lower bound that the real server is compared with. Each
// queue carries 1,320 unit-seconds on 20 units, and arrivals span 60 s, so
// the ideal makespan is somewhat above 66 s; the event log must be clean.
func TestKueueBaselineIdeal(t *testing.T) {
	w := KueueBaseline()
	var events bytes.Buffer
	rep, err := Run(context.Background(), w.Config, w.Jobs, Options{Events: &events, Outcomes: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs.Completed != 15000 {
		t.Fatalf("%d of 15000 completed", rep.Jobs.Completed)
	}
	if rep.MakespanS < 66 || rep.MakespanS > 120 {
		t.Errorf("makespan %.1fs, want between 66s (the work alone) and 120s", rep.MakespanS)
	}
	means := AdmissionMeans(rep)
	if len(means) != 3 {
		t.Errorf("admission means %v", means)
	}
	t.Logf("ideal: makespan %.1fs, utilization %.1f%%, mean admission %v", rep.MakespanS, 100*rep.Utilization, means)
	checkEvents(t, w.Config, &events)
}
