//go:build qshare_experiment

package sqlite

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/store"
)

// Run with: go test -tags qshare_experiment -run Experiment ./sqlite/

// TestExperiments checks the measuring builds' store modes (set at link
// time in those builds, here by hand) and that an unknown one is refused.
func TestExperiments(t *testing.T) {
	defer func(v string) { experiment = v }(experiment)
	experiment = "sync-of"
	if d, err := Open(filepath.Join(t.TempDir(), "qshare.db")); err == nil {
		d.Close()
		t.Fatal("Open accepted the unknown experiment sync-of")
	} else if !strings.Contains(err.Error(), `unknown store experiment "sync-of"`) {
		t.Errorf("error %q does not name the unknown experiment", err)
	}
	for _, c := range []struct {
		experiment string
		sync       int
	}{{"sync-off", 0}, {"sync-normal", 1}, {"nostore", 2}} {
		experiment = c.experiment
		path := filepath.Join(t.TempDir(), "qshare.db")
		d, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		var sync int
		if err := d.db.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if sync != c.sync {
			t.Errorf("%s: synchronous=%d, want %d", c.experiment, sync, c.sync)
		}
		j := qshare.Job{ID: "j1", Name: "j1", JobQueue: "q", Status: qshare.JobRunnable, Version: 1, CreatedAt: time.Unix(1, 0)}
		if err := d.Commit(context.Background(), &store.Change{PutJobs: []qshare.Job{j}}); err != nil {
			t.Fatal(err)
		}
		st, err := d.Load(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 0, false: 1}[c.experiment == "nostore"]; len(st.Jobs) != want {
			t.Errorf("%s: %d jobs stored after one commit, want %d", c.experiment, len(st.Jobs), want)
		}
		d.Close()
	}
}
