package sim

import (
	"testing"
	"time"

	"qshare/config/configtest"
)

// TestEngineIssues replays the smallest workloads on which the random test
// once found the engine breaking a guarantee the checker enforces (issue 2,
// rule 9), so that they stay fixed. The engine has the same cases in
// engine/guarantee_regression_test.go; the random test covers the same
// ground with -oversubscribe, -grace and -reserve-inshare (all on by
// default).
func TestEngineIssues(t *testing.T) {
	for _, tc := range []struct {
		name  string
		grace time.Duration
	}{
		// A borrower takes a RESERVE share's idle capacity right after an
		// in-share preemption in that share (borrow-source).
		{"reserve-borrow", 0},
		// Two RESERVE shares own more than the environment: the free
		// instance is kept for the idle share, so neither runs (head-waits).
		{"reserve-wait", 0},
		// A job reserved behind a stopping victim keeps waiting for it when
		// it would fit at once; the victim was preempted for nothing
		// (head-waits).
		{"reserved-waits", 5 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := configtest.Load(t, "testdata/engine/"+tc.name+".yaml")
			jobs := loadTrace(t, cfg, "testdata/engine/"+tc.name+".csv")
			runChecked(t, cfg, jobs, Options{Grace: tc.grace}, 0)
		})
	}
}
