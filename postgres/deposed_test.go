package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"qshare"
	"qshare/postgres/postgrestest"
	"qshare/store"
	"qshare/store/storetest"
)

// blackhole is a TCP proxy to a database server that can stop answering,
// as a network that drops every packet does: while it is down, what is
// sent on a connection, old or new, goes nowhere and nothing comes back.
type blackhole struct {
	ln     net.Listener
	target string
	mu     sync.Mutex
	down   bool
	wake   chan struct{} // closed when it comes back up
}

func newBlackhole(t *testing.T, target string) *blackhole {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &blackhole{ln: ln, target: target, wake: make(chan struct{})}
	t.Cleanup(func() { ln.Close(); b.set(false) })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go b.serve(c)
		}
	}()
	return b
}

func (b *blackhole) set(down bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.down && !down {
		close(b.wake)
		b.wake = make(chan struct{})
	}
	b.down = down
}

// hold blocks while the proxy is down.
func (b *blackhole) hold() {
	b.mu.Lock()
	down, wake := b.down, b.wake
	b.mu.Unlock()
	if down {
		<-wake
	}
}

func (b *blackhole) serve(c net.Conn) {
	defer c.Close()
	b.hold() // a new connection meets no server while it is down
	s, err := net.Dial("tcp", b.target)
	if err != nil {
		return
	}
	defer s.Close()
	pipe := func(dst, src net.Conn) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				b.mu.Lock()
				down := b.down
				b.mu.Unlock()
				if !down { // while down, what is sent is lost
					if _, werr := dst.Write(buf[:n]); werr != nil {
						return
					}
				}
			}
			if err != nil {
				return
			}
		}
	}
	go pipe(s, c)
	pipe(c, s)
}

// TestDurableAcrossDatabaseCrash commits from 16 goroutines while the
// PostgreSQL server is stopped in immediate mode (a crash: no checkpoint,
// recovery replays the WAL) and started again. Every commit that returned
// nil is there afterwards; every one that said nothing was applied is not;
// the store that lost its connection is deposed, and a new Open owns the
// store again.
//
// It crashes a PostgreSQL server of its own, not the package's, so it runs
// beside the other tests; and it is the package's longest (some 11 s on a
// 2-core machine), so it is declared first, which go test resumes first
// among the parallel tests.
func TestDurableAcrossDatabaseCrash(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and restarts a PostgreSQL server")
	}
	if srv == nil {
		t.Skip(skipWhy)
	}
	t.Parallel()
	ctx := context.Background()
	own, err := postgrestest.Start()
	if err != nil {
		t.Fatalf("starting a PostgreSQL server of the test's own: %v", err)
	}
	t.Cleanup(own.Stop)
	loc, err := own.NewDatabase(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := mustOpen(t, loc)
	type result struct {
		id  string
		err error
	}
	results := make(chan result, 1<<16)
	stop := make(chan struct{})
	var acked atomic.Int64
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("g%02d-%06d", g, i)
				err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob(id)}})
				results <- result{id, err}
				if err != nil {
					return // deposed: every later commit fails the same way
				}
				acked.Add(1)
			}
		})
	}
	for acked.Load() < 200 {
		time.Sleep(time.Millisecond)
	}
	if err := own.Restart("immediate"); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	close(results)
	var ok, notApplied, unknown []string
	for r := range results {
		switch {
		case r.err == nil:
			ok = append(ok, r.id)
		case errors.Is(r.err, ErrDeposed) && !strings.Contains(r.err.Error(), "may or may not"):
			notApplied = append(notApplied, r.id)
		default:
			unknown = append(unknown, r.id)
			t.Logf("commit %s: %v", r.id, r.err)
		}
	}
	t.Logf("%d commits acknowledged, %d refused with nothing applied, %d of unknown outcome", len(ok), len(notApplied), len(unknown))
	if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("after")}}); !errors.Is(err, ErrDeposed) {
		t.Errorf("a commit after the database restarted returned %v, want ErrDeposed", err)
	}
	d.Close()
	d2 := mustOpen(t, loc)
	st, err := d2.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	have := storetest.JobIDs(st.Jobs)
	for _, id := range ok {
		if !have[id] {
			t.Errorf("acknowledged commit %s is not there after the database crashed", id)
		}
	}
	for _, id := range notApplied {
		if have[id] {
			t.Errorf("commit %s said nothing was applied, but it is there", id)
		}
	}
	if len(unknown) > 0 {
		t.Errorf("%d commits ended with an unknown outcome", len(unknown))
	}
}

// TestDeposedAtOnceWhenTheDatabaseVanishes: when the database stops
// answering in the middle of a commit (a network that drops every packet),
// the commit fails at its batch timeout and the DB says Deposed at once,
// so that the server steps down then, not after the tries to learn the
// commit's outcome, which go on for up to 30 s while the database does
// not answer. Once it answers, the commit's caller gets its outcome.
func TestDeposedAtOnceWhenTheDatabaseVanishes(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	u, err := url.Parse(loc)
	if err != nil {
		t.Fatal(err)
	}
	b := newBlackhole(t, u.Host)
	u.Host = b.ln.Addr().String()
	ctx := context.Background()
	d, err := Open(ctx, u.String(), func(o *options) { o.batchTimeout = 500 * time.Millisecond })
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("before")}}); err != nil {
		t.Fatal(err)
	}
	b.set(true)
	t0 := time.Now()
	done := make(chan error, 1)
	go func() { done <- d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("during")}}) }()
	select {
	case <-d.Deposed():
		t.Logf("deposed %v after the database vanished", time.Since(t0).Round(time.Millisecond))
	case <-time.After(10 * time.Second):
		t.Fatal("the DB does not say it was deposed 10 s after the database stopped answering mid-commit (batch timeout 0.5 s)")
	}
	b.set(false)
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, ErrDeposed) {
			t.Fatalf("the commit cut short returned %v, want success or ErrDeposed", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("the commit cut short has not returned 40 s after the database answered again")
	}
	if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("after")}}); !errors.Is(err, ErrDeposed) {
		t.Fatalf("a commit after the DB was deposed returned %v, want ErrDeposed", err)
	}
}

// TestStartingUpIsWaitedFor: the outcome of a broken commit is waited for
// past outcomeTimeout only while PostgreSQL refuses connections because it
// is starting up or recovering (57P03, as pgx reports a refused connect);
// any other failure to connect keeps the 30 s bound.
func TestStartingUpIsWaitedFor(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{fmt.Errorf("failed to connect to `user=qshare database=t`: %w", &pgconn.PgError{Severity: "FATAL", Code: "57P03", Message: "the database system is not yet accepting connections"}), true},
		{&pgconn.PgError{Severity: "FATAL", Code: "28P01", Message: "password authentication failed"}, false},
		{fmt.Errorf("dial tcp 127.0.0.1:5432: connect: connection refused"), false},
		{context.DeadlineExceeded, false},
	} {
		if got := startingUp(c.err); got != c.want {
			t.Errorf("startingUp(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
