package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/event"
	"qshare/store"
)

// TestStandbyWaitsAndTakesOver: an Open WithWait waits while another DB
// owns the store and returns, as the next owner, once that owner's session
// ends; the watcher names each owner and its advertised address.
func TestStandbyWaitsAndTakesOver(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	ctx := context.Background()
	leader, err := Open(ctx, loc, WithAdvertise("http://leader:1"), WithLease(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	wa, err := NewWatcher(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	if l, err := wa.Leader(ctx); err != nil || l.Advertise != "http://leader:1" || !l.Alive || l.Epoch != leader.Epoch() {
		t.Fatalf("Leader = %+v, %v; want the first owner, alive", l, err)
	}
	got := make(chan *DB, 1)
	fail := make(chan error, 1)
	go func() {
		d, err := Open(ctx, loc, WithWait(), WithAdvertise("http://standby:2"))
		if err != nil {
			fail <- err
			return
		}
		got <- d
	}()
	select {
	case d := <-got:
		d.Close()
		t.Fatal("the standby's Open returned while the leader owns the store")
	case err := <-fail:
		t.Fatalf("the standby's Open failed: %v", err)
	case <-time.After(500 * time.Millisecond):
	}
	terminate(t, loc, leader.w.pid)
	var next *DB
	select {
	case next = <-got:
	case err := <-fail:
		t.Fatalf("the standby's Open failed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not take the store over within 10 s of the leader's session ending")
	}
	defer next.Close()
	select {
	case <-leader.Deposed():
	case <-time.After(5 * time.Second):
		t.Fatal("the old leader's DB does not say it was deposed 5 s after its session ended (its keepalive runs every 0.5 s)")
	}
	if err := leader.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("old")}}); !errors.Is(err, ErrDeposed) {
		t.Fatalf("the old leader's commit returned %v, want ErrDeposed", err)
	}
	if l, err := wa.Leader(ctx); err != nil || l.Advertise != "http://standby:2" || l.Epoch != next.Epoch() {
		t.Fatalf("Leader = %+v, %v; want the standby", l, err)
	}
}

// openPaused opens the store at loc with a lease of 1 s and stops its
// keepalive, as SIGSTOP would stop the whole process; it is closed when t
// ends.
func openPaused(t *testing.T, loc string) *DB {
	t.Helper()
	d, err := Open(context.Background(), loc, WithLease(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	d.closeOnce.Do(func() { close(d.keepalive) })
	<-d.kaDone
	return d
}

// TestLeaseEndsAnIdleSession: a session that holds the store WithLease and
// stops renewing it (here: its keepalive stopped, as a paused process's
// would) is ended by PostgreSQL after the lease, and a waiting standby
// takes over, by the database's clock alone.
func TestLeaseEndsAnIdleSession(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	ctx := context.Background()
	leader := openPaused(t, loc)
	t0 := time.Now()
	next, err := Open(ctx, loc, WithWait())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	t.Logf("the standby took the store over %v after the leader stopped renewing a 1 s lease", time.Since(t0).Round(time.Millisecond))
	err = leader.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("late")}})
	if !errors.Is(err, ErrDeposed) {
		t.Fatalf("the paused leader's commit returned %v, want ErrDeposed", err)
	}
	st, err := next.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 0 {
		t.Fatalf("the store holds %d jobs after a refused commit, want 0", len(st.Jobs))
	}
}

// TestEventsFencedAcrossOwners: once another server owns the store, the
// old owner's event appends are refused, and the log is one history: the
// old owner's batches, then the new one's.
func TestEventsFencedAcrossOwners(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	ctx := context.Background()
	old := mustOpen(t, loc)
	ev := func(job string) []event.Event {
		return []event.Event{{T: 1, Job: job, Event: event.Submit, Share: "s", Queue: "q"}}
	}
	if err := old.Append(ev("a")); err != nil {
		t.Fatal(err)
	}
	terminate(t, loc, old.w.pid)
	next, err := Open(ctx, loc, WithWait())
	if err != nil {
		t.Fatal(err)
	}
	defer next.Close()
	if err := old.Append(ev("stale")); !errors.Is(err, ErrDeposed) {
		t.Fatalf("the old owner's Append returned %v, want ErrDeposed", err)
	}
	if err := next.Append(ev("b")); err != nil {
		t.Fatal(err)
	}
	wa, err := NewWatcher(ctx, loc)
	if err != nil {
		t.Fatal(err)
	}
	defer wa.Close()
	var b strings.Builder
	if err := wa.WriteEvents(ctx, &b); err != nil {
		t.Fatal(err)
	}
	var jobs []string
	r := event.NewReader(strings.NewReader(b.String()))
	for {
		e, err := r.Read()
		if err != nil {
			break
		}
		jobs = append(jobs, e.Job)
	}
	if strings.Join(jobs, ",") != "a,b" {
		t.Fatalf("the log holds %v, want [a b]\n%s", jobs, b.String())
	}
}

// TestLeaseEndsAnOpenTransaction: a paused owner that left a transaction
// open on the row a takeover locks (an event append cut short) does not
// block the takeover past its lease: PostgreSQL ends that transaction too
// (idle_in_transaction_session_timeout).
func TestLeaseEndsAnOpenTransaction(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	ctx := context.Background()
	leader := openPaused(t, loc)
	tx, err := leader.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // ended by the server
	if _, err := tx.Exec(ctx, `SELECT epoch FROM event_owner WHERE id = 1 FOR UPDATE`); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	next, err := Open(wctx, loc, WithWait())
	if err != nil {
		t.Fatalf("the standby did not take over past the paused owner's open transaction: %v", err)
	}
	defer next.Close()
	t.Logf("the standby took the store over %v after the owner paused with a transaction open (lease 1 s)", time.Since(t0).Round(time.Millisecond))
	if err := leader.Append([]event.Event{{T: 1, Job: "late", Event: event.Submit, Share: "s", Queue: "q"}}); !errors.Is(err, ErrDeposed) {
		t.Fatalf("the paused owner's Append returned %v, want ErrDeposed", err)
	}
}
