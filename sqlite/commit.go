package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"qshare/store"
	"qshare/store/row"
)

// Group commit.
//
// Commit encodes its change in the caller's goroutine (so JSON encoding runs
// on every core and an invalid change fails without touching the database)
// and hands it to the group-commit queue (store/groupcommit), whose one
// writer goroutine takes the first waiting request, then every other one
// already waiting (up to maxBatch requests or about maxRows rows), and calls
// applyBatch, which applies them all inside one BEGIN IMMEDIATE ... COMMIT.
// Each caller is answered after the COMMIT has returned, which with
// synchronous=FULL is after the WAL was fsynced. While it waits for the
// fsync the next requests queue up, so the batch size follows the load
// without any timer: one caller alone pays one fsync, and under load dozens
// of callers share one (with 64 callers, about half of them ride in each
// transaction while the other half queue for the next). When a batch has
// more than one request, the writer also yields the processor a few times
// (runtime.Gosched) while new requests keep arriving, so that callers which
// are runnable but not yet queued join it: on a busy machine that raised
// the batch from about 6 to about 9 commits and cut the CPU per submit by
// about a tenth, with no timer and no wait for a lone caller.
//
// Each caller's change stays atomic: if applying one change fails, the
// transaction is rolled back, that caller gets the error, and the batch is
// tried again without it. If the COMMIT itself fails, every caller in the
// batch gets the error and none of their changes is applied.

// Commit applies c atomically and durably; see store.Store. It waits while
// other commits are being written and then shares their transaction. If ctx
// ends while the change is still queued, Commit returns ctx's error and the
// change is never applied; once the writer has taken the change into a
// transaction, Commit waits for that transaction to finish (a few
// milliseconds) so that its answer is always the truth.
func (d *DB) Commit(ctx context.Context, c *store.Change) error {
	enc, err := row.EncodeFor(ctx, c)
	if err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	if d.noStore {
		return nil // a measuring build: see experiment.go
	}
	return d.q.Commit(ctx, enc, enc.Rows)
}

// applyBatch is the queue's Apply: it writes batch in one transaction
// through the writer and words its error for the callers.
func (d *DB) applyBatch(batch []*row.Change) (int, error) {
	failed, err := d.w.apply(batch)
	if err != nil {
		err = fmt.Errorf("sqlite: commit to %s: %w%s", d.path, err, hint(err))
	}
	return failed, err
}

// writer owns the connection that every write goes through, and its
// prepared statements. Only the writer goroutine uses it after Open.
type writer struct {
	db    *sql.DB
	conn  *sql.Conn // nil after a failure, until the next apply reopens it
	stmts struct {
		putEnv, putPolicy, putQueue, putShare, putPlan, putJob, updJob *sql.Stmt
		delEnv, delPolicy, delQueue, delShare, delPlan, delJob         *sql.Stmt
	}
}

func newWriter(ctx context.Context, db *sql.DB) (*writer, error) {
	w := &writer{db: db}
	if err := w.open(ctx); err != nil {
		return nil, err
	}
	return w, nil
}

// open takes a connection from the pool for the writer and prepares the
// statements on it.
func (w *writer) open(ctx context.Context) error {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("open writer connection: %w", err)
	}
	s := &w.stmts
	for _, p := range []struct {
		stmt **sql.Stmt
		sql  string
	}{
		{&s.putEnv, `INSERT INTO environments (name, data) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data`},
		{&s.putPolicy, `INSERT INTO policies (name, data) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data`},
		{&s.putQueue, `INSERT INTO queues (name, data) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data`},
		{&s.putShare, `INSERT INTO shares (queue, name, data) VALUES (?, ?, ?)
			ON CONFLICT (queue, name) DO UPDATE SET data = excluded.data`},
		{&s.putPlan, `INSERT INTO plans (name, data) VALUES (?, ?)
			ON CONFLICT (name) DO UPDATE SET data = excluded.data`},
		// The store keeps the newest version of a job.
		{&s.putJob, `INSERT INTO jobs (id, queue, share, status, created_at, version, data, payload) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, share = excluded.share,
				status = excluded.status, created_at = excluded.created_at,
				version = excluded.version, data = excluded.data, payload = excluded.payload
			WHERE excluded.version >= jobs.version`},
		// A job that changes keeps its key columns (queue, share, creation
		// time): an UPDATE of the rest leaves the index on created_at alone.
		{&s.updJob, `UPDATE jobs SET status = ?, version = ?, data = ?, payload = ?
			WHERE id = ? AND version <= ? AND queue = ? AND share = ? AND created_at = ?`},
		{&s.delEnv, `DELETE FROM environments WHERE name = ?`},
		{&s.delPolicy, `DELETE FROM policies WHERE name = ?`},
		{&s.delQueue, `DELETE FROM queues WHERE name = ?`},
		{&s.delShare, `DELETE FROM shares WHERE queue = ? AND name = ?`},
		{&s.delPlan, `DELETE FROM plans WHERE name = ?`},
		{&s.delJob, `DELETE FROM jobs WHERE id = ?`},
	} {
		if *p.stmt, err = conn.PrepareContext(ctx, p.sql); err != nil {
			w.conn = conn
			w.discard()
			return fmt.Errorf("prepare statement: %w", err)
		}
	}
	w.conn = conn
	return nil
}

// statements lists the writer's prepared statements, for closing them.
func (w *writer) statements() []**sql.Stmt {
	s := &w.stmts
	return []**sql.Stmt{&s.putEnv, &s.putPolicy, &s.putQueue, &s.putShare, &s.putPlan, &s.putJob, &s.updJob,
		&s.delEnv, &s.delPolicy, &s.delQueue, &s.delShare, &s.delPlan, &s.delJob}
}

// discard closes the statements and throws the connection away.
func (w *writer) discard() {
	for _, st := range w.statements() {
		if *st != nil {
			(*st).Close()
			*st = nil
		}
	}
	if w.conn != nil {
		discardConn(w.conn)
		w.conn = nil
	}
}

// close releases the connection for good.
func (w *writer) close() error {
	var err error
	for _, st := range w.statements() {
		if *st != nil {
			err = errors.Join(err, (*st).Close())
			*st = nil
		}
	}
	if w.conn != nil {
		err = errors.Join(err, w.conn.Close())
		w.conn = nil
	}
	return err
}

// apply writes the changes reqs in one transaction. On failure it rolls
// back, throws the connection away (a failed write may leave it in a state
// not worth trusting; the next apply opens a fresh one) and returns the
// index of the request whose change failed, or -1 if the failure was not
// one change's (BEGIN or COMMIT).
func (w *writer) apply(reqs []*row.Change) (int, error) {
	ctx := context.Background()
	if w.conn == nil {
		if err := w.open(ctx); err != nil {
			return -1, err
		}
	}
	if _, err := w.conn.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		w.discard()
		return -1, fmt.Errorf("begin transaction: %w", err)
	}
	for i, e := range reqs {
		if err := w.applyOne(ctx, e); err != nil {
			w.conn.ExecContext(ctx, `ROLLBACK`) //nolint:errcheck // the connection is discarded anyway
			w.discard()
			return i, err
		}
	}
	if _, err := w.conn.ExecContext(ctx, `COMMIT`); err != nil {
		w.conn.ExecContext(ctx, `ROLLBACK`) //nolint:errcheck // SQLite may have rolled back already
		w.discard()
		return -1, fmt.Errorf("commit transaction (nothing in it was applied): %w", err)
	}
	return -1, nil
}

// applyOne writes one change: its puts, then its deletes.
func (w *writer) applyOne(ctx context.Context, e *row.Change) error {
	s := &w.stmts
	if err := putKeyed(ctx,
		keyedPuts{s.putEnv, "service environment", e.PutEnvs},
		keyedPuts{s.putPolicy, "scheduling policy", e.PutPolicies},
		keyedPuts{s.putQueue, "job queue", e.PutQueues}); err != nil {
		return err
	}
	for _, r := range e.PutShares {
		if _, err := s.putShare.ExecContext(ctx, r.Queue, r.Name, r.Data); err != nil {
			return fmt.Errorf("put quota share %q of queue %q: %w", r.Name, r.Queue, err)
		}
	}
	if err := putKeyed(ctx, keyedPuts{s.putPlan, "capacity plan", e.PutPlans}); err != nil {
		return err
	}
	for _, r := range e.PutJobs {
		if r.Version > 1 {
			// Most likely a change of a stored job (a submit writes
			// version 1): try the UPDATE, which touches the table alone.
			// It changes nothing when the job is new, older or has other
			// key columns, and the upsert below then does what it must.
			res, err := s.updJob.ExecContext(ctx, r.Status, r.Version, r.Data, r.Payload, r.ID, r.Version, r.Queue, r.Share, r.Created)
			if err != nil {
				return fmt.Errorf("put job %q: %w", r.ID, err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				continue
			}
		}
		if _, err := s.putJob.ExecContext(ctx, r.ID, r.Queue, r.Share, r.Status, r.Created, r.Version, r.Data, r.Payload); err != nil {
			return fmt.Errorf("put job %q: %w", r.ID, err)
		}
	}
	if err := deleteKeyed(ctx,
		keyedDeletes{s.delEnv, "service environment", e.DelEnvs},
		keyedDeletes{s.delPolicy, "scheduling policy", e.DelPolicies},
		keyedDeletes{s.delQueue, "job queue", e.DelQueues}); err != nil {
		return err
	}
	for _, k := range e.DelShares {
		if _, err := s.delShare.ExecContext(ctx, k.Queue, k.Name); err != nil {
			return fmt.Errorf("delete quota share %q of queue %q: %w", k.Name, k.Queue, err)
		}
	}
	return deleteKeyed(ctx,
		keyedDeletes{s.delPlan, "capacity plan", e.DelPlans},
		keyedDeletes{s.delJob, "job", e.DelJobs})
}

// keyedPuts are the puts of one kind of record (what, for messages) keyed
// by name: the rows, and stmt, their upsert.
type keyedPuts struct {
	stmt *sql.Stmt
	what string
	rows []row.Keyed
}

// putKeyed runs the puts of each kind in turn and stops at the first that
// fails.
func putKeyed(ctx context.Context, kinds ...keyedPuts) error {
	for _, p := range kinds {
		for _, r := range p.rows {
			if _, err := p.stmt.ExecContext(ctx, r.Key, r.Data); err != nil {
				return fmt.Errorf("put %s %q: %w", p.what, r.Key, err)
			}
		}
	}
	return nil
}

// keyedDeletes are the deletes of one kind of record (what, for messages)
// keyed by name: the keys, and stmt, their delete by key.
type keyedDeletes struct {
	stmt *sql.Stmt
	what string
	keys []string
}

// deleteKeyed runs the deletes of each kind in turn and stops at the first
// that fails.
func deleteKeyed(ctx context.Context, kinds ...keyedDeletes) error {
	for _, d := range kinds {
		for _, k := range d.keys {
			if _, err := d.stmt.ExecContext(ctx, k); err != nil {
				return fmt.Errorf("delete %s %q: %w", d.what, k, err)
			}
		}
	}
	return nil
}
