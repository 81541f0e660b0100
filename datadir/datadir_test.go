//go:build unix

package datadir_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/datadir"
	"qshare/sqlite"
	"qshare/store"
)

func mode(t *testing.T, p string) os.FileMode {
	t.Helper()
	st, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	return st.Mode().Perm()
}

// TestPrepareNew lays out a new data directory: private without other
// users, traversable (never listable) by them with.
func TestPrepareNew(t *testing.T) {
	for _, c := range []struct {
		shared    bool
		top, jobs os.FileMode
	}{{false, 0o700, 0o700}, {true, 0o711, 0o711}} {
		dir := filepath.Join(t.TempDir(), "data")
		if err := datadir.Prepare(dir, datadir.Options{Shared: c.shared, MoveStore: true}); err != nil {
			t.Fatal(err)
		}
		if m := mode(t, dir); m != c.top {
			t.Errorf("shared=%v: data directory %#o, want %#o", c.shared, m, c.top)
		}
		if m := mode(t, filepath.Join(dir, datadir.StateDir)); m != 0o700 {
			t.Errorf("shared=%v: state/ %#o, want 0700", c.shared, m)
		}
		db, err := sqlite.Open(datadir.StorePath(dir))
		if err != nil {
			t.Fatal(err)
		}
		db.Close()
		if m := mode(t, datadir.StorePath(dir)); m != 0o600 {
			t.Errorf("a new database is %#o, want 0600", m)
		}
	}
}

// TestPrepareUpgrade starts from what earlier versions left (everything
// 0755 and 0644, the database at DATA/qshare.db with a write-ahead log
// that holds its last commits) and checks that Prepare moves the database
// into state/ with nothing lost, tightens every mode, gives no mode to a
// file a link points at, and that a database held by a running server, or
// one in both places, is not moved.
func TestPrepareUpgrade(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	old := filepath.Join(dir, "qshare.db")
	db, err := sqlite.Open(old)
	if err != nil {
		t.Fatal(err)
	}
	// A server that runs: its database is not moved from under it.
	if err := datadir.Prepare(dir, datadir.Options{MoveStore: true}); !errors.Is(err, store.ErrLocked) {
		t.Fatalf("Prepare with the old database open: %v, want store.ErrLocked", err)
	}
	if _, err := os.Stat(old); err != nil {
		t.Fatalf("the database in use was moved: %v", err)
	}
	db.Close()
	for _, d := range []string{"jobs/j1/model", "attempts/a1", "live"} {
		os.MkdirAll(filepath.Join(dir, d), 0o755)
	}
	os.Chmod(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "supervisor.log"), []byte("x"), 0o644)
	os.WriteFile(filepath.Join(dir, "events.jsonl"), []byte("{}\n"), 0o644)
	os.Chmod(old, 0o644)
	outside := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(outside, []byte("x"), 0o644)
	os.Symlink(outside, filepath.Join(dir, "planted"))
	// The old layout keeps its log beside it: make one that holds data.
	wal := old + "-wal"
	os.WriteFile(wal, []byte("not a real log, but data all the same"), 0o644)

	if err := datadir.Prepare(dir, datadir.Options{Shared: true, MoveStore: true}); err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string]os.FileMode{
		dir: 0o711, filepath.Join(dir, "jobs"): 0o711, filepath.Join(dir, "jobs", "j1"): 0o700,
		filepath.Join(dir, "attempts"): 0o700, filepath.Join(dir, "live"): 0o700,
		filepath.Join(dir, "supervisor.log"): 0o600, filepath.Join(dir, "events.jsonl"): 0o600,
		datadir.StorePath(dir): 0o600, outside: 0o644,
	} {
		if m := mode(t, p); m != want {
			t.Errorf("%s: %#o, want %#o", strings.TrimPrefix(p, dir), m, want)
		}
	}
	for _, p := range []string{old, wal} {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s is still in the data directory after the upgrade", filepath.Base(p))
		}
	}
	if b, err := os.ReadFile(datadir.StorePath(dir) + "-wal"); err != nil || !strings.Contains(string(b), "data all the same") {
		t.Errorf("the database's log did not move with it: %q, %v", b, err)
	}

	// A database in both places: nothing moves, and the error says so.
	os.WriteFile(old, []byte("other"), 0o600)
	err = datadir.Prepare(dir, datadir.Options{MoveStore: true})
	if err == nil || !strings.Contains(err.Error(), "both") {
		t.Errorf("Prepare with a database in both places: %v, want a refusal", err)
	}
	if b, _ := os.ReadFile(old); string(b) != "other" {
		t.Error("the old database was changed")
	}
}

// TestPrepareRefusesShared refuses a directory with the sticky bit (as
// /tmp): its mode is not qshare's to change.
func TestPrepareRefusesShared(t *testing.T) {
	dir := t.TempDir()
	os.Chmod(dir, os.ModeSticky|0o777)
	if err := datadir.Prepare(dir, datadir.Options{}); err == nil || !strings.Contains(err.Error(), "sticky") {
		t.Errorf("Prepare on a sticky directory: %v", err)
	}
	if m, _ := os.Stat(dir); m.Mode()&os.ModeSticky == 0 {
		t.Error("the sticky directory's mode was changed")
	}
}
