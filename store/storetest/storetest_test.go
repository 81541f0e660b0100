package storetest_test

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"

	"qshare/event"
	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// sinkStore is a store that keeps the event log beside its records: SQLite
// for the records, an event file next to the database for the events. It is
// how the suite's event checks are reached through Run, which no shipped
// store needs yet.
type sinkStore struct {
	*sqlite.DB
	ev *event.File
}

var _ store.EventSink = sinkStore{}

func (s sinkStore) Events(fn func(event.Event)) error { return s.ev.Events(fn) }
func (s sinkStore) Append(evs []event.Event) error    { return s.ev.Append(evs) }

func (s sinkStore) Close() error {
	err := s.DB.Close()
	if cerr := s.ev.Close(); err == nil {
		err = cerr
	}
	return err
}

func openSinkStore(_ context.Context, path string) (store.Store, error) {
	db, err := sqlite.Open(path) // first: it holds the lock
	if err != nil {
		return nil, err
	}
	ev, err := event.OpenFile(path + ".events")
	if err != nil {
		db.Close()
		return nil, err
	}
	return sinkStore{db, ev}, nil
}

const selfEnv = "QSHARE_STORETEST_SELF"

// TestRunChecksEventSink shows that Run checks the event log of a store that
// keeps one: it runs Run's EventSink subtests alone, in a child process (the
// rest of the suite runs on SQLite in sqlite/), and requires every one of
// them, the killed grandchild of Crash included, to have run and passed.
func TestRunChecksEventSink(t *testing.T) {
	if os.Getenv(selfEnv) != "" {
		storetest.Run(t, func(t *testing.T) string { return t.TempDir() + "/qshare.db" }, openSinkStore)
		return
	}
	if testing.Short() {
		t.Skip("starts child processes")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestRunChecksEventSink$/^EventSink$", "-test.v", "-test.count=1")
	// The Crash check kills a grandchild, which cannot remove its own
	// temporary directory: the child's go inside this test's.
	cmd.Env = append(os.Environ(), selfEnv+"=1", "TMPDIR="+t.TempDir())
	out, err := cmd.CombinedOutput()
	t.Logf("child output:\n%s", out)
	if err != nil {
		t.Fatalf("child failed: %v", err)
	}
	for _, sub := range []string{"Empty", "AppendInOrder", "EveryField", "Reopen", "LargeBatch", "Closed", "Crash"} {
		if want := "--- PASS: TestRunChecksEventSink/EventSink/" + sub + " "; !strings.Contains(string(out), want) {
			t.Errorf("the child's output lacks %q", want)
		}
	}
	if strings.Contains(string(out), "SKIP") {
		t.Error("Run skipped event checks on a store that implements store.EventSink")
	}
}
