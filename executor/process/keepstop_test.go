package process_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"qshare/executor/process"
)

// TestKeepStop: the first stop of an attempt sets its deadline, and a
// stop asked again (after a restart) gets what is left of it, never a
// grace anew; a record that is not the server's own file (a job's user
// put it in its attempt's directory, with a deadline of its choosing) is
// not taken but replaced.
func TestKeepStop(t *testing.T) {
	dir := t.TempDir()
	b := process.NewBeneath(dir)
	defer b.Close()
	path := filepath.Join(dir, "stop.json")
	t0 := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	if g, err := b.KeepStop(path, 10*time.Second, t0); err != nil || g != 10*time.Second {
		t.Fatalf("the first stop: %v, %v; want its whole grace, 10s", g, err)
	}
	if g, err := b.KeepStop(path, time.Hour, t0.Add(4*time.Second)); err != nil || g != 6*time.Second {
		t.Errorf("the stop asked again 4 s later with an hour: %v, %v; want the 6s left of the first", g, err)
	}
	if g, err := b.KeepStop(path, time.Hour, t0.Add(time.Minute)); err != nil || g != 0 {
		t.Errorf("the stop asked again after its deadline: %v, %v; want 0", g, err)
	}

	if os.Geteuid() != 0 {
		t.Skip("a record of another user needs root to make")
	}
	hostile := filepath.Join(dir, "hostile.json")
	if err := os.WriteFile(hostile, []byte(`{"grace":9000000000000000000,"at":"2026-12-05T10:00:00Z"}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(hostile, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if g, err := b.KeepStop(hostile, 10*time.Second, t0); err != nil || g != 10*time.Second {
		t.Errorf("a record of another user: %v, %v; want it not taken (the grace asked, 10s)", g, err)
	}
	if g, err := b.KeepStop(hostile, time.Hour, t0.Add(3*time.Second)); err != nil || g != 7*time.Second {
		t.Errorf("after the replaced record: %v, %v; want the 7s left of the server's own", g, err)
	}
}
