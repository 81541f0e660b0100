package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/store"
	"qshare/store/row"
	"qshare/store/storetest"
)

func TestPragmas(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	// Every connection of the pool, not only the writer's, must be durable.
	for i := range 3 {
		c, err := d.db.Conn(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		var mode string
		var sync, busy int
		if err := c.QueryRowContext(context.Background(), `PRAGMA journal_mode`).Scan(&mode); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(context.Background(), `PRAGMA synchronous`).Scan(&sync); err != nil {
			t.Fatal(err)
		}
		if err := c.QueryRowContext(context.Background(), `PRAGMA busy_timeout`).Scan(&busy); err != nil {
			t.Fatal(err)
		}
		if mode != "wal" || sync != 2 || busy != 10000 {
			t.Errorf("connection %d: journal_mode=%s synchronous=%d busy_timeout=%d, want wal, 2 (FULL), 10000", i, mode, sync, busy)
		}
	}
}

// blockWriter takes the database's write lock from a connection of its own,
// so that the writer goroutine's next BEGIN IMMEDIATE waits; release lets it
// go on.
func blockWriter(t *testing.T, path string) (release func()) {
	t.Helper()
	raw, err := sql.Open("sqlite", path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	c, err := raw.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.ExecContext(context.Background(), `BEGIN IMMEDIATE`); err != nil {
		t.Fatal(err)
	}
	return func() {
		if _, err := c.ExecContext(context.Background(), `COMMIT`); err != nil {
			t.Error(err)
		}
		c.Close()
		raw.Close()
	}
}

// waitQueued waits until n requests wait in the writer's queue.
func waitQueued(t *testing.T, d *DB, n int) {
	t.Helper()
	for i := 0; d.q.Len() < n; i++ {
		if i > 10000 {
			t.Fatalf("%d requests queued, want %d", d.q.Len(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// sendClaimed hands c to the writer and waits until the writer has claimed
// it (with the writer blocked, it then waits for the lock). It returns the
// channel that Commit's answer comes on.
func sendClaimed(t *testing.T, d *DB, c *store.Change) chan error {
	t.Helper()
	enc, err := row.Encode(c)
	if err != nil {
		t.Fatal(err)
	}
	r, err := d.q.Enqueue(context.Background(), enc, enc.Rows)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; !r.Claimed(); i++ {
		if i > 10000 {
			t.Fatal("the writer did not take the request")
		}
		time.Sleep(time.Millisecond)
	}
	answer := make(chan error, 1)
	go func() { answer <- r.Wait(context.Background()) }()
	return answer
}

// mustOpen opens the database at path, failing t if it cannot; the test
// closes it.
func mustOpen(t *testing.T, path string) *DB {
	t.Helper()
	d, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func jobNamed(id string) qshare.Job {
	return qshare.Job{ID: id, JobQueue: "q", Status: qshare.JobSubmitted, CreatedAt: time.Unix(1, 0).UTC(), Version: 1}
}

// TestGroupCommit checks that commits that arrive while a transaction is
// being written are committed together in the next one, and that a change
// the database rejects fails alone: its caller gets the error, nothing of
// it is applied, and the rest of its batch commits.
func TestGroupCommit(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qshare.db")
	d := mustOpen(t, path)
	defer d.Close()
	// A trigger makes SQLite itself reject any job whose ID starts with
	// "poison": a failure inside the transaction, not in encoding.
	if _, err := d.db.Exec(`CREATE TRIGGER poison BEFORE INSERT ON jobs WHEN NEW.id LIKE 'poison%'
		BEGIN SELECT RAISE(ABORT, 'poisoned job'); END`); err != nil {
		t.Fatal(err)
	}
	release := blockWriter(t, path)
	var wg sync.WaitGroup
	errs := make(map[string]error)
	var mu sync.Mutex
	commit := func(name string, c *store.Change) {
		defer wg.Done()
		err := d.Commit(context.Background(), c)
		mu.Lock()
		errs[name] = err
		mu.Unlock()
	}
	// The first commit is claimed by the writer, which waits for the lock;
	// everything after it queues up.
	first := sendClaimed(t, d, &store.Change{PutJobs: []qshare.Job{jobNamed("first")}})
	const good = 40
	for i := range good {
		wg.Add(1)
		name := fmt.Sprintf("good-%02d", i)
		go commit(name, &store.Change{PutJobs: []qshare.Job{jobNamed(name), jobNamed(name + "-b")}})
		if i == 10 || i == 30 {
			wg.Add(1)
			bad := fmt.Sprintf("bad-%02d", i)
			go commit(bad, &store.Change{PutJobs: []qshare.Job{jobNamed(bad), jobNamed("poison-" + bad)}})
		}
	}
	waitQueued(t, d, good+2)
	release()
	wg.Wait()
	errs["first"] = <-first

	st, err := d.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	present := storetest.JobIDs(st.Jobs)
	for name, err := range errs {
		if strings.HasPrefix(name, "bad") {
			if err == nil || !strings.Contains(err.Error(), "poisoned job") {
				t.Errorf("%s: got %v, want the trigger's error", name, err)
			}
			if present[name] {
				t.Errorf("%s: half of a failed change is visible", name)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s failed beside a bad change: %v", name, err)
		}
		if !present[name] || (name != "first" && !present[name+"-b"]) {
			t.Errorf("%s: committed but not all there", name)
		}
	}
	s := d.Stats()
	if s.Batches != 2 || s.Commits != good+1 || s.Failed != 2 {
		t.Errorf("stats %+v: want the first commit alone, then the %d good queued ones in one transaction, and 2 failures", s, good)
	}
}

// TestAbandonedWhileQueued checks that a commit whose context ends while it
// waits in the queue is never applied.
func TestAbandonedWhileQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qshare.db")
	d := mustOpen(t, path)
	defer d.Close()
	release := blockWriter(t, path)
	first := sendClaimed(t, d, &store.Change{PutJobs: []qshare.Job{jobNamed("first")}})
	ctx, cancel := context.WithCancel(context.Background())
	abandoned := make(chan error)
	go func() { abandoned <- d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{jobNamed("abandoned")}}) }()
	waitQueued(t, d, 1)
	cancel()
	if err := <-abandoned; err == nil {
		t.Fatal("a commit cancelled while queued returned nil")
	}
	release()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	// A later commit goes through the same writer, after the abandoned one.
	if err := d.Commit(context.Background(), &store.Change{PutJobs: []qshare.Job{jobNamed("later")}}); err != nil {
		t.Fatal(err)
	}
	st, err := d.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range st.Jobs {
		if j.ID == "abandoned" {
			t.Fatal("a commit that returned an error was applied")
		}
	}
	if len(st.Jobs) != 2 {
		t.Fatalf("%d jobs, want first and later", len(st.Jobs))
	}
}

// TestLoadCorruptRecord checks that a record that no longer decodes fails
// Load with an error that says which one, instead of a partial state.
func TestLoadCorruptRecord(t *testing.T) {
	d, err := Open(filepath.Join(t.TempDir(), "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	c := &store.Change{}
	for i := range 1000 {
		c.PutJobs = append(c.PutJobs, jobNamed(fmt.Sprintf("j%04d", i)))
	}
	if err := d.Commit(context.Background(), c); err != nil {
		t.Fatal(err)
	}
	if _, err := d.db.Exec(`UPDATE jobs SET data = '{"id": 17' WHERE id = 'j0700'`); err != nil {
		t.Fatal(err)
	}
	st, err := d.Load(context.Background())
	if err == nil {
		t.Fatalf("Load of a corrupt record succeeded with %d jobs", len(st.Jobs))
	}
	if !strings.Contains(err.Error(), "decode record 701") {
		t.Errorf("the error does not say which record: %v", err)
	}
}

// TestMigrateFromVersion1 opens a database of schema version 1 (the first
// schema, with the index jobs_by_queue) with the current code: the job is
// still there, and the index is gone.
func TestMigrateFromVersion1(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qshare.db")
	j := qshare.Job{ID: "j", Name: "n", JobQueue: "q", Status: qshare.JobRunnable, CreatedAt: time.Unix(1, 0), Version: 1, Payload: `{"a":"b"}`}
	oldDatabase(t, path, 1, j)
	d := mustOpen(t, path)
	defer d.Close()
	st, err := d.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 1 || st.Jobs[0].ID != "j" || st.Jobs[0].Payload != j.Payload {
		t.Fatalf("after the migration the store holds %+v, want job j", st.Jobs)
	}
	var n int
	if err := d.db.QueryRow(`SELECT COUNT(*) FROM sqlite_master WHERE name = 'jobs_by_queue'`).Scan(&n); err != nil || n != 0 {
		t.Fatalf("jobs_by_queue: %d, %v; want it dropped", n, err)
	}
	var v int
	if err := d.db.QueryRow(`SELECT MAX(version) FROM schema_version`).Scan(&v); err != nil || v != len(migrations) {
		t.Fatalf("schema version %d, %v; want %d", v, err, len(migrations))
	}
}

// TestMigratePayload opens a database of schema version 2, whose jobs keep
// their payload inside the JSON, and checks that migration 3 moves it to
// its column: the jobs load as they were, and the JSON no longer has it.
func TestMigratePayload(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qshare.db")
	// Two jobs as version 2 wrote them (json.Marshal, payload inside): one
	// with a payload full of characters that JSON escapes, one without.
	full := storetest.FullJob("j1", time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	full.Payload = `{"TrainingJobName":"a \"quoted\" name","Environment":{"X":"line\nbreak\ttab é \u2028 <&>"}}`
	empty := storetest.FullJob("j2", time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC))
	empty.Payload = ""
	oldDatabase(t, path, 2, full, empty)
	ctx := context.Background()
	d := mustOpen(t, path)
	defer d.Close()
	st, err := d.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Jobs) != 2 {
		t.Fatalf("loaded %d jobs, want 2", len(st.Jobs))
	}
	for i, want := range []qshare.Job{full, empty} {
		if got := st.Jobs[i]; got.ID != want.ID || got.Payload != want.Payload || got.Name != want.Name || got.Version != want.Version {
			t.Errorf("job %s after the migration: payload %q (version %d), want %q (version %d)", want.ID, got.Payload, got.Version, want.Payload, want.Version)
		}
	}
	var inJSON int
	if err := d.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM jobs WHERE json_type(data, '$.payload') IS NOT NULL`).Scan(&inJSON); err != nil {
		t.Fatal(err)
	}
	if inJSON != 0 {
		t.Errorf("%d jobs still have the payload in their JSON", inJSON)
	}
}

// oldDatabase creates, at path, a database of the given schema version
// holding jobs, written as that version wrote them (json.Marshal, the
// payload inside the JSON).
func oldDatabase(t *testing.T, path string, version int, jobs ...qshare.Job) {
	t.Helper()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ctx := context.Background()
	if _, err := raw.ExecContext(ctx, `CREATE TABLE schema_version (version INTEGER PRIMARY KEY, applied_at TEXT NOT NULL) STRICT`); err != nil {
		t.Fatal(err)
	}
	for v, m := range migrations[:version] {
		if _, err := raw.ExecContext(ctx, m); err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, `INSERT INTO schema_version VALUES (?, 'then')`, v+1); err != nil {
			t.Fatal(err)
		}
	}
	for _, j := range jobs {
		b, err := json.Marshal(&j)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.ExecContext(ctx, `INSERT INTO jobs (id, queue, share, status, created_at, version, data) VALUES (?, ?, ?, ?, ?, ?, ?)`,
			j.ID, j.JobQueue, j.QuotaShare, string(j.Status), row.TimeKey(j.CreatedAt), j.Version, string(b)); err != nil {
			t.Fatal(err)
		}
	}
}
