package sim

import (
	"strings"
	"testing"
	"time"

	"qshare/config"
	"qshare/config/configtest"
)

// TestCapacityPlanWhatIf: a what-if capacity plan gives QS1 two more
// instances from t=100 to its close at t=540 (end 600, warning 60 s): QS1's
// waiting jobs start on them at t=100, in the same pass; at the close the
// job beyond what the environment has left is stopped, by the end, and
// requeued; the event log is clean for the checker, which knows the plan.
func TestCapacityPlanWhatIf(t *testing.T) {
	base := configtest.Load(t, "../examples/three-shares.yaml")
	csv := `job_id,submit_s,duration_s,quota_share,instance_type,instance_count,priority
a,0,1000,QS1,ml.g5.xlarge,1,0
b,0,1000,QS1,ml.g5.xlarge,1,0
c,0,1000,QS1,ml.g5.xlarge,1,0
d,0,1000,QS1,ml.g5.xlarge,1,0
`
	start := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		whatIf  []string
		grace   time.Duration
		starts  map[string]time.Duration
		preempt int
	}{
		{"no plan", nil, 0, map[string]time.Duration{"a": 0, "b": 0, "c": 1000 * time.Second, "d": 1000 * time.Second}, 0},
		{"a plan", []string{"plan.P=ml.g5.xlarge:2@2026-12-01T00:01:40/500s:share=QS1:warning=60s"}, 0,
			map[string]time.Duration{"a": 0, "b": 0, "c": 100 * time.Second, "d": 100 * time.Second}, 1},
		{"a plan, and a grace longer than the warning", []string{"plan.P=ml.g5.xlarge:2@2026-12-01T00:01:40/500s:share=QS1:warning=60s"}, 5 * time.Minute,
			map[string]time.Duration{"a": 0, "b": 0, "c": 100 * time.Second, "d": 100 * time.Second}, 1},
	} {
		cfg, err := base.WhatIf(tc.whatIf, config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		jobs, _, err := ReadTrace(strings.NewReader(csv), cfg, TraceOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rep := runChecked(t, cfg, jobs, Options{Outcomes: true, Start: start, Grace: tc.grace}, 0)
		for _, o := range rep.Outcomes {
			if want := tc.starts[o.ID]; o.FirstStart != want {
				t.Errorf("%s: %s starts at %s, want %s", tc.name, o.ID, o.FirstStart, want)
			}
		}
		if got := rep.Preemptions.CrossShare + rep.Preemptions.InShare; got != tc.preempt {
			t.Errorf("%s: %d preemptions, want %d", tc.name, got, tc.preempt)
		}
	}
}
