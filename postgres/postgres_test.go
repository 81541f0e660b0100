package postgres

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"qshare"
	"qshare/store"
	"qshare/store/groupcommit"
	"qshare/store/row"
	"qshare/store/storetest"
)

// TestStore runs the conformance suite against a real PostgreSQL, one new
// database per subtest. Having a database of its own, each case runs side
// by side with the others (the suite asks for a case's location first
// thing, so that is where it calls t.Parallel): they mostly wait on the
// server's flushes, and one after the other took 48 s of the README's
// whole-tree run. TestStore is itself parallel, so its cases run beside
// the package's other parallel tests (TestMain) rather than before them.
func TestStore(t *testing.T) {
	if srv == nil {
		t.Skip(skipWhy)
	}
	t.Parallel()
	storetest.Run(t, func(t *testing.T) string {
		t.Parallel()
		return newDB(t)
	}, func(ctx context.Context, location string) (store.Store, error) {
		u, err := url.Parse(location)
		if err != nil {
			return nil, err
		}
		return OpenURL(ctx, u)
	})
}

func mustOpen(t testing.TB, loc string) *DB {
	t.Helper()
	d, err := Open(context.Background(), loc)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// loadedIDs loads d and returns its jobs' IDs in Load's order, joined by
// commas.
func loadedIDs(t *testing.T, d *DB) string {
	t.Helper()
	st, err := d.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(st.Jobs))
	for i, j := range st.Jobs {
		ids[i] = j.ID
	}
	return strings.Join(ids, ",")
}

// connect opens a connection of its own to the database at loc, for a test
// that reads or changes it behind the store's back; the caller closes it.
func connect(t *testing.T, loc string) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), loc)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testJob(id string) qshare.Job {
	return qshare.Job{ID: id, Name: "n", JobQueue: "q", Status: qshare.JobSubmitted, Version: 1,
		CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC), Payload: `{"x":1}`}
}

// terminate ends the server process of d's owning connection from another
// connection, as an operator's pg_terminate_backend or a cut network would.
func terminate(t *testing.T, loc string, pid uint32) {
	t.Helper()
	c := connect(t, loc)
	defer c.Close(context.Background())
	var ok bool
	if err := c.QueryRow(context.Background(), `SELECT pg_terminate_backend($1, 5000)`, int32(pid)).Scan(&ok); err != nil || !ok {
		t.Fatalf("pg_terminate_backend(%d): %v, %v", pid, ok, err)
	}
}

// TestFencedAfterConnectionLoss: once the owner's connection is gone (here
// terminated by the server), its lock is free, another Open takes the store
// over, and the old owner can never commit again.
func TestFencedAfterConnectionLoss(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	old := mustOpen(t, loc)
	ctx := context.Background()
	if err := old.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("before")}}); err != nil {
		t.Fatal(err)
	}
	terminate(t, loc, old.w.pid)
	// The lock went with the connection: a new owner may open the store.
	var next *DB
	deadline := time.Now().Add(10 * time.Second)
	for {
		d, err := Open(ctx, loc)
		if err == nil {
			next = d
			t.Cleanup(func() { next.Close() })
			break
		}
		if !errors.Is(err, store.ErrLocked) || time.Now().After(deadline) {
			t.Fatalf("open after the owner's connection was terminated: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if next.Epoch() != old.Epoch()+1 {
		t.Errorf("the new owner has epoch %d, want %d", next.Epoch(), old.Epoch()+1)
	}
	for i := range 3 {
		err := old.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("after")}})
		if !errors.Is(err, ErrDeposed) {
			t.Fatalf("commit %d of the deposed owner returned %v, want ErrDeposed", i, err)
		}
		if i == 0 {
			t.Logf("the deposed owner's commit says: %v", err)
		}
	}
	if err := next.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("new-owner")}}); err != nil {
		t.Fatal(err)
	}
	if ids := loadedIDs(t, next); ids != "before,new-owner" {
		t.Fatalf("the store holds %s, want before,new-owner", ids)
	}
	if err := old.Close(); err != nil {
		t.Logf("Close of the deposed owner: %v", err)
	}
}

// TestFenceRefusesAnotherEpoch: the fence also refuses a commit when the
// stored epoch is no longer the writer's, even on a connection that holds
// the lock (a later owner that bypassed the lock).
func TestFenceRefusesAnotherEpoch(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	d := mustOpen(t, loc)
	ctx := context.Background()
	c := connect(t, loc)
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `UPDATE owner SET epoch = epoch + 1`); err != nil {
		t.Fatal(err)
	}
	err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("j")}})
	if !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), "another server has taken the store over") {
		t.Fatalf("commit after another epoch was taken returned %v", err)
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d jobs stored (%v), want 0", n, err)
	}
}

// TestServerErrorIsolated: a change that the server itself refuses (here a
// NUL byte in a key, which PostgreSQL's text cannot hold) fails alone, with
// nothing of it applied, and the changes grouped with it commit.
func TestServerErrorIsolated(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	d := mustOpen(t, newDB(t))
	// A queue of its own around the store's applyBatch, not started until
	// the three changes wait in it, so that they go in one batch. The
	// store's own queue stays idle meanwhile.
	q := groupcommit.New(groupcommit.Config{MaxBatch: 16, MaxRows: 1000, Prefix: "test"}, d.applyBatch)
	ctx := context.Background()
	mk := func(ids ...string) *groupcommit.Request[*row.Change] {
		c := &store.Change{}
		for _, id := range ids {
			c.PutJobs = append(c.PutJobs, testJob(id))
		}
		enc, err := row.Encode(c)
		if err != nil {
			t.Fatal(err)
		}
		r, err := q.Enqueue(ctx, enc, enc.Rows)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	good1, bad, good2 := mk("a", "b"), mk("c", "bad\x00key"), mk("d")
	q.Start()
	for name, r := range map[string]*groupcommit.Request[*row.Change]{"first": good1, "last": good2} {
		if err := r.Wait(ctx); err != nil {
			t.Errorf("the %s good change failed beside a bad one: %v", name, err)
		}
	}
	if err := bad.Wait(ctx); err == nil {
		t.Error("a key with a NUL byte was accepted")
	} else {
		t.Logf("the bad change says: %v", err)
	}
	q.Close()
	if ids := loadedIDs(t, d); ids != "a,b,d" {
		t.Fatalf("the store holds %s, want a,b,d", ids)
	}
	if s := q.Stats(); s.Batches != 1 || s.Commits != 2 || s.Failed != 1 {
		t.Errorf("stats %+v, want 1 batch, 2 commits, 1 failed", s)
	}
}

// TestOutcome: the owner row tells whether a batch was applied, as the
// writer reads it after a broken connection.
func TestOutcome(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	d := mustOpen(t, newDB(t))
	if err := d.Commit(context.Background(), &store.Change{PutJobs: []qshare.Job{testJob("a")}}); err != nil {
		t.Fatal(err)
	}
	// The writer is idle (no other commit is under way) and Commit's
	// answer orders its writes before these reads: outcome is the writer's.
	checkOutcome(t, d.w, d.w.batch)
}

// checkOutcome checks that w.outcome calls batch n applied and batch n+1,
// never sent, not applied.
func checkOutcome(t *testing.T, w *writer, n int64) {
	t.Helper()
	for _, tc := range []struct {
		batch int64
		want  bool
	}{{n, true}, {n + 1, false}} {
		got, err := w.outcome(tc.batch)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("outcome(%d) = %v, want %v", tc.batch, got, tc.want)
		}
	}
}

// TestOutcomeAfterTakeover: a batch that committed just before the
// owner's connection broke is reported applied even when a standby, waiting
// for the lock, took the store over before the old writer could read the
// owner row (the takeover resets that row to the new epoch). Reporting it
// not applied would tell a client that an acknowledged-by-the-database
// submit failed, and its retry would store the job twice.
func TestOutcomeAfterTakeover(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	ctx := context.Background()
	old := mustOpen(t, loc)
	if err := old.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("a")}}); err != nil {
		t.Fatal(err)
	}
	n := old.w.batch // the writer is idle: see TestOutcome
	got := make(chan *DB, 1)
	fail := make(chan error, 1)
	go func() {
		d, err := Open(ctx, loc, WithWait())
		if err != nil {
			fail <- err
			return
		}
		got <- d
	}()
	terminate(t, loc, old.w.pid)
	select {
	case next := <-got:
		t.Cleanup(func() { next.Close() })
		if next.Epoch() != old.Epoch()+1 {
			t.Fatalf("the standby took epoch %d, want %d", next.Epoch(), old.Epoch()+1)
		}
	case err := <-fail:
		t.Fatalf("the standby's Open failed: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the standby did not take the store over")
	}
	checkOutcome(t, old.w, n)
}

// TestNewerSchemaRefused: a database migrated by a newer qshare is refused
// with a message that says so, and the refusal leaves the store free.
func TestNewerSchemaRefused(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	d := mustOpen(t, loc)
	d.Close()
	ctx := context.Background()
	c := connect(t, loc)
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `INSERT INTO schema_version VALUES (99, now())`); err != nil {
		t.Fatal(err)
	}
	_, err := Open(ctx, loc)
	if err == nil || !strings.Contains(err.Error(), "schema version 99") {
		t.Fatalf("Open of a newer schema returned %v", err)
	}
	if _, err := c.Exec(ctx, `DELETE FROM schema_version WHERE version = 99`); err != nil {
		t.Fatal(err)
	}
	d = mustOpen(t, loc) // the failed Open released the lock
	var v int
	if err := c.QueryRow(ctx, `SELECT max(version) FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d (%v), want %d", v, err, len(migrations))
	}
}

// TestPasswordNeverShown: the errors of Open and OpenURL never hold the
// password of the URL they were given.
func TestPasswordNeverShown(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	const pw = "s3cr-t/pass"
	ctx := context.Background()
	for _, conn := range []string{
		"postgres://qshare:" + url.PathEscape(pw) + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"postgresql://qshare:" + url.QueryEscape(pw) + "@127.0.0.1:1/db?sslmode=disable&connect_timeout=2",
		"postgres://qshare:" + url.PathEscape(pw) + "@127.0.0.1:1/db?sslmode=bogus",
		// pgx, as libpq, also reads the password from the query.
		"postgres://qshare@127.0.0.1:1/db?password=" + url.QueryEscape(pw) + "&sslmode=disable&connect_timeout=2",
		"postgres://qshare@127.0.0.1:1/db?sslmode=bogus&password=" + url.QueryEscape(pw),
		"host=127.0.0.1 port=1 user=qshare password='" + pw + "' dbname=db sslmode=disable connect_timeout=2",
	} {
		_, err := Open(ctx, conn)
		if err == nil {
			t.Fatalf("Open of a closed port succeeded")
		}
		for _, leak := range []string{pw, url.PathEscape(pw), url.QueryEscape(pw)} {
			if strings.Contains(err.Error(), leak) {
				t.Errorf("the error shows the password: %v", err)
			}
		}
		if u, perr := url.Parse(conn); perr == nil && u.Scheme != "" {
			if _, err := OpenURL(ctx, u); err == nil || strings.Contains(err.Error(), pw) || strings.Contains(err.Error(), url.PathEscape(pw)) {
				t.Errorf("OpenURL: %v", err)
			}
		}
	}
}

// TestOpenURLRefuses: what a postgres URL must not hold is refused.
func TestOpenURLRefuses(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	for _, raw := range []string{"postgres:db", "postgres://h/db#frag", "sqlite:///x.db"} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if d, err := OpenURL(context.Background(), u); err == nil || d != nil {
			t.Errorf("OpenURL(%s) = %v, %v; want a refusal", raw, d, err)
		}
	}
}

// blockJobs takes an exclusive lock on the jobs table from another
// connection, so that the writer's next batch waits; release lets it go.
func blockJobs(t *testing.T, loc string) (release func()) {
	t.Helper()
	ctx := context.Background()
	c := connect(t, loc)
	tx, err := c.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `LOCK TABLE jobs IN EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		tx.Rollback(ctx) //nolint:errcheck // releases the lock
		c.Close(ctx)
	}
}

// waitingOnLock waits until the writer's backend waits for a lock.
func waitingOnLock(t *testing.T, loc string, pid uint32) {
	t.Helper()
	ctx := context.Background()
	c := connect(t, loc)
	defer c.Close(ctx)
	deadline := time.Now().Add(10 * time.Second)
	for {
		var waiting bool
		if err := c.QueryRow(ctx, `SELECT COALESCE(wait_event_type = 'Lock', false) FROM pg_stat_activity WHERE pid = $1`, int32(pid)).Scan(&waiting); err != nil {
			t.Fatal(err)
		}
		if waiting {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer never waited for the lock")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGroupCommit: commits that queue while a transaction is in flight go
// together in the next one, and a change the server refuses among them
// fails alone.
func TestGroupCommit(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	d := mustOpen(t, loc)
	release := blockJobs(t, loc)
	ctx := context.Background()
	first := make(chan error, 1)
	go func() { first <- d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("first")}}) }()
	waitingOnLock(t, loc, d.w.pid)
	const n = 42
	errs := make(chan error, n)
	for i := range n {
		id := "job-" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		if i == 7 || i == 30 {
			id += "\x00" // refused by the server
		}
		go func() { errs <- d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob(id)}}) }()
	}
	for d.q.Len() < n { // every one of them queued behind the first
		time.Sleep(time.Millisecond)
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	failed := 0
	for range n {
		if err := <-errs; err != nil {
			failed++
		}
	}
	st := d.Stats()
	t.Logf("stats: %+v", st)
	if failed != 2 || st.Commits != n-2+1 || st.Failed != 2 {
		t.Fatalf("%d commits failed (stats %+v), want exactly the 2 refused ones", failed, st)
	}
	if st.Batches != 2 {
		t.Errorf("%d transactions for the first commit and the %d queued behind it, want 2", st.Batches, n)
	}
	got, err := d.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Jobs) != n-2+1 {
		t.Fatalf("%d jobs stored, want %d", len(got.Jobs), n-2+1)
	}
}

// TestConnectionLostMidCommit: when the owner's connection is terminated
// while its transaction waits, the commit fails, the writer learns from a
// fresh connection that nothing was applied, and says so.
func TestConnectionLostMidCommit(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	d := mustOpen(t, loc)
	release := blockJobs(t, loc)
	defer release()
	ctx := context.Background()
	done := make(chan error, 1)
	go func() { done <- d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("lost")}}) }()
	waitingOnLock(t, loc, d.w.pid)
	terminate(t, loc, d.w.pid)
	err := <-done
	if !errors.Is(err, ErrDeposed) || !strings.Contains(err.Error(), "nothing in it was applied") {
		t.Fatalf("the commit whose connection was lost returned %v", err)
	}
	release()
	d2 := mustOpen(t, loc)
	st, err := d2.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 0 {
		t.Fatalf("the lost commit was applied: %v", st.Jobs)
	}
}

// TestSchemasAreSeparateStores: stores in two schemas of one database
// (search_path in the URL) are separate, each exclusively owned, and a
// search_path that names no existing schema is refused with advice.
func TestSchemasAreSeparateStores(t *testing.T) {
	t.Parallel() // a database of its own (TestMain)
	loc := newDB(t)
	ctx := context.Background()
	c := connect(t, loc)
	defer c.Close(ctx)
	if _, err := c.Exec(ctx, `CREATE SCHEMA team_a; CREATE SCHEMA team_b`); err != nil {
		t.Fatal(err)
	}
	a := mustOpen(t, loc+"&search_path=team_a")
	b := mustOpen(t, loc+"&search_path=team_b")
	if _, err := Open(ctx, loc+"&search_path=team_a"); !errors.Is(err, store.ErrLocked) {
		t.Errorf("a second open of schema team_a: %v, want store.ErrLocked", err)
	}
	if err := a.Commit(ctx, &store.Change{PutJobs: []qshare.Job{testJob("in-a")}}); err != nil {
		t.Fatal(err)
	}
	if st, err := b.Load(ctx); err != nil || len(st.Jobs) != 0 {
		t.Fatalf("schema team_b sees %d jobs (%v), want none", len(st.Jobs), err)
	}
	var n int
	if err := c.QueryRow(ctx, `SELECT count(*) FROM team_a.jobs`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("team_a.jobs holds %d rows (%v), want 1", n, err)
	}
	if _, err := Open(ctx, loc+"&search_path=nowhere"); err == nil || !strings.Contains(err.Error(), "no schema of the search_path exists") {
		t.Errorf("open with a search_path of no schema: %v", err)
	}
}
