package fault

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"qshare/config"
	"qshare/event"
	"qshare/internal/soak"
)

// The kill -9 tests drive soak's Workload (the soak's fleet, jobs and
// checks); what is here checks the server's event log against share A's
// limits while the workload changed them.

// checkEvents checks the server's event log with qshare check-events,
// against each limit of share A, and keeps the violations found at a time
// when that limit was in force (away from the moments the limit changed).
func checkEvents(t testing.TB, w *soak.Workload, path string) (event.Summary, []string) {
	return checkEventsOf(t, w, path, false)
}

// checkEventsPrefix checks the log as it is after a restart, before the
// jobs have finished: a preemption whose beneficiary starts after the end
// of the log so far is not counted.
func checkEventsPrefix(t testing.TB, w *soak.Workload, path string) (event.Summary, []string) {
	return checkEventsOf(t, w, path, true)
}

func checkEventsOf(t testing.TB, w *soak.Workload, path string, prefix bool) (event.Summary, []string) {
	t.Helper()
	windows := w.Windows()
	limits := map[int]bool{}
	for _, win := range windows {
		limits[win.Limit] = true
	}
	var sum event.Summary
	var out []string
	for limit := range limits {
		cfgPath := filepath.Join(t.TempDir(), fmt.Sprintf("limit%d.yaml", limit))
		if err := os.WriteFile(cfgPath, []byte(soak.FleetConfig(limit)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse(cfgPath, []byte(soak.FleetConfig(limit)), config.Options{}); err != nil {
			t.Fatal(err)
		}
		res, err := checkEventsCLI(t, path, cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		sum = res.Summary
		for _, v := range res.Violations {
			at := time.Unix(0, int64(v.T*1e9))
			if prefix && v.Rule == event.RulePreemptedForNothing {
				continue
			}
			if testing.Verbose() && !prefix {
				t.Logf("against share A limit %d (kept only inside a window of that limit): %s", limit, v)
			}
			for _, win := range windows {
				if win.Limit == limit && !at.Before(win.From) && at.Before(win.To) {
					out = append(out, fmt.Sprintf("share A limit %d: %s", limit, v))
					break
				}
			}
		}
	}
	return sum, out
}

type checkResult struct {
	Summary    event.Summary     `json:"summary"`
	Violations []event.Violation `json:"violations"`
}

// checkEventsCLI runs qshare check-events -o json.
func checkEventsCLI(t testing.TB, logPath, cfgPath string) (checkResult, error) {
	var res checkResult
	cmd := exec.Command(bin, "check-events", logPath, "--config", cfgPath, "--settle", "1", "-o", "json")
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return res, fmt.Errorf("check-events: %v", err)
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("check-events output: %v\n%s", err, out)
	}
	return res, nil
}
