package sim

import (
	"os"
	"testing"
	"time"
)

// TestEngineIssues replays the smallest workloads the random test found on
// which the engine breaks a guarantee the checker enforces (issue 2, rule
// 9). They are reported to the engine's owner; until they are fixed the test
// runs only with QSHARE_SIM_ENGINE_ISSUES=1, so that the suite stays green:
//
//	QSHARE_SIM_ENGINE_ISSUES=1 go test ./sim -run EngineIssues -v
//
// The random test covers the same ground with -oversubscribe, -grace and
// -reserve-inshare.
func TestEngineIssues(t *testing.T) {
	if os.Getenv("QSHARE_SIM_ENGINE_ISSUES") == "" {
		t.Skip("known engine issues; set QSHARE_SIM_ENGINE_ISSUES=1 to run them")
	}
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
			cfg := loadConfig(t, "testdata/engine/"+tc.name+".yaml")
			jobs := loadTrace(t, cfg, "testdata/engine/"+tc.name+".csv")
			runChecked(t, cfg, jobs, Options{Grace: tc.grace}, 0)
		})
	}
}
