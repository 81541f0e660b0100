package server

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/datadir"
	"qshare/store"
)

// serving is a qshare serve running in this process.
type serving struct {
	out    strings.Builder
	cancel context.CancelFunc
	done   chan error
}

// serveInProcess runs RunReady with s until the test ends, and returns
// once it listens. It fails t if the server stops with an error first.
func serveInProcess(t *testing.T, s Settings) *serving {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	sv := &serving{cancel: cancel, done: make(chan error, 1)}
	ready := make(chan struct{})
	go func() { sv.done <- RunReady(ctx, s, &sv.out, func(string) { close(ready) }) }()
	select {
	case <-ready:
	case err := <-sv.done:
		cancel()
		t.Fatalf("serve stopped before listening: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not listen within 30 s")
	}
	t.Cleanup(func() { sv.stop(t) })
	return sv
}

func (sv *serving) stop(t *testing.T) {
	if sv.cancel == nil {
		return
	}
	sv.cancel()
	sv.cancel = nil
	if err := <-sv.done; err != nil {
		t.Errorf("serve: %v", err)
	}
}

// serveOnce runs Run with s, which must fail before it serves, and
// returns its error.
func serveOnce(t *testing.T, s Settings) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := RunReady(ctx, s, io.Discard, func(string) { t.Errorf("serve with %+v started; want it refused", s) })
	if err == nil {
		t.Fatalf("serve with %+v returned nil", s)
	}
	return err
}

func testServeSettings(t *testing.T) Settings {
	s := DefaultSettings()
	s.Addr, s.Executor, s.LogLevel, s.DataDir = "127.0.0.1:0", "simulated", "error", t.TempDir()
	return s
}

// TestServeStoreURL runs the server on a store named by --store, away from
// the data directory, and checks that a second server on the same store,
// by --store or by the default in a data directory, is refused with a
// message that says another server holds it, while one on another store
// starts.
func TestServeStoreURL(t *testing.T) {
	elsewhere := filepath.Join(t.TempDir(), "disk", "my.db")
	s := testServeSettings(t)
	s.Store = "sqlite://" + elsewhere
	a := serveInProcess(t, s)
	if _, err := os.Stat(elsewhere); err != nil {
		t.Fatalf("the store named by --store was not created: %v", err)
	}
	if _, err := os.Stat(datadir.StorePath(s.DataDir)); err == nil {
		t.Error("with --store, the server still created DATA_DIR/state/qshare.db")
	}
	if line := a.out.String(); !strings.Contains(line, "store sqlite://"+elsewhere) || !strings.Contains(line, "data in "+s.DataDir) {
		t.Errorf("the listening line names neither the store nor the data directory: %q", line)
	}

	// The same store again: in another data directory, and by another spelling.
	for _, u := range []string{s.Store, "sqlite:" + elsewhere} {
		s2 := testServeSettings(t)
		s2.Store = u
		err := serveOnce(t, s2)
		if !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "in use by another qshare server") || !strings.Contains(err.Error(), elsewhere) {
			t.Errorf("a second server on %s: %v\nwant an error that wraps store.ErrLocked, names the store and says another server holds it", u, err)
		}
	}

	// The default store, in the data directory, is held the same way.
	d := testServeSettings(t)
	b := serveInProcess(t, d)
	if _, err := os.Stat(datadir.StorePath(d.DataDir)); err != nil {
		t.Fatalf("without --store the database is not DATA_DIR/state/qshare.db: %v", err)
	}
	if line := b.out.String(); strings.Contains(line, "store ") {
		t.Errorf("without --store the listening line changed: %q", line)
	}
	d2 := testServeSettings(t)
	d2.Store = "sqlite:" + datadir.StorePath(d.DataDir)
	if err := serveOnce(t, d2); !errors.Is(err, store.ErrLocked) {
		t.Errorf("a second server on another's default store: %v, want store.ErrLocked", err)
	}
	a.stop(t)
	b.stop(t)
	serveInProcess(t, s).stop(t) // free again once its server stopped
}

// TestServeStoreRefused checks the --store and --events values that the
// server refuses before it serves, each with a message that says what to
// give.
func TestServeStoreRefused(t *testing.T) {
	for _, tc := range []struct{ store, events, want string }{
		{"mysql://db.internal/qshare", "", `--store: store "mysql://db.internal/qshare": no store is known for the scheme "mysql" (stores: postgres, postgresql, sqlite)`},
		{"qshare-data/qshare.db", "", "has no scheme"},
		{"sqlite://host/db", "", `names the host "host"`},
		{"sqlite:///tmp/x.db?_pragma=synchronous(OFF)", "", "has a query"},
		{"postgres://admin:hunter2@127.0.0.1:1/qshare?connect_timeout=5", "", "postgres://admin:xxxxx@127.0.0.1:1/qshare"},
		{"postgresql://admin:hunter2@127.0.0.1:1/qshare?sslmode=nonsense", "", "postgresql://admin:xxxxx@127.0.0.1:1/qshare"},
		{"", "store", "keeps no event log; give a file instead"},
	} {
		s := testServeSettings(t)
		s.Store, s.Events = tc.store, tc.events
		err := serveOnce(t, s)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("--store %q --events %q: %v\nwant an error that says %q", tc.store, tc.events, err, tc.want)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
}
