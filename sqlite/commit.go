package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"unsafe"

	"qshare"
	"qshare/store"
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
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	enc, err := encode(c)
	if err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	if d.noStore {
		return nil // a measuring build: see experiment.go
	}
	return d.q.Commit(ctx, enc, enc.rows)
}

// applyBatch is the queue's Apply: it writes batch in one transaction
// through the writer and words its error for the callers.
func (d *DB) applyBatch(batch []*encoded) (int, error) {
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
		putEnv, putPolicy, putQueue, putShare, putJob, updJob *sql.Stmt
		delEnv, delPolicy, delQueue, delShare, delJob         *sql.Stmt
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

// discard closes the statements and throws the connection away.
func (w *writer) discard() {
	s := &w.stmts
	for _, st := range []**sql.Stmt{&s.putEnv, &s.putPolicy, &s.putQueue, &s.putShare, &s.putJob, &s.updJob,
		&s.delEnv, &s.delPolicy, &s.delQueue, &s.delShare, &s.delJob} {
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
	s := &w.stmts
	var err error
	for _, st := range []**sql.Stmt{&s.putEnv, &s.putPolicy, &s.putQueue, &s.putShare, &s.putJob, &s.updJob,
		&s.delEnv, &s.delPolicy, &s.delQueue, &s.delShare, &s.delJob} {
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
func (w *writer) apply(reqs []*encoded) (int, error) {
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
func (w *writer) applyOne(ctx context.Context, e *encoded) error {
	s := &w.stmts
	for _, r := range e.putEnvs {
		if _, err := s.putEnv.ExecContext(ctx, r.key, r.data); err != nil {
			return fmt.Errorf("put service environment %q: %w", r.key, err)
		}
	}
	for _, r := range e.putPolicies {
		if _, err := s.putPolicy.ExecContext(ctx, r.key, r.data); err != nil {
			return fmt.Errorf("put scheduling policy %q: %w", r.key, err)
		}
	}
	for _, r := range e.putQueues {
		if _, err := s.putQueue.ExecContext(ctx, r.key, r.data); err != nil {
			return fmt.Errorf("put job queue %q: %w", r.key, err)
		}
	}
	for _, r := range e.putShares {
		if _, err := s.putShare.ExecContext(ctx, r.queue, r.name, r.data); err != nil {
			return fmt.Errorf("put quota share %q of queue %q: %w", r.name, r.queue, err)
		}
	}
	for _, r := range e.putJobs {
		if r.version > 1 {
			// Most likely a change of a stored job (a submit writes
			// version 1): try the UPDATE, which touches the table alone.
			// It changes nothing when the job is new, older or has other
			// key columns, and the upsert below then does what it must.
			res, err := s.updJob.ExecContext(ctx, r.status, r.version, r.data, r.payload, r.id, r.version, r.queue, r.share, r.created)
			if err != nil {
				return fmt.Errorf("put job %q: %w", r.id, err)
			}
			if n, err := res.RowsAffected(); err == nil && n == 1 {
				continue
			}
		}
		if _, err := s.putJob.ExecContext(ctx, r.id, r.queue, r.share, r.status, r.created, r.version, r.data, r.payload); err != nil {
			return fmt.Errorf("put job %q: %w", r.id, err)
		}
	}
	for _, k := range e.delEnvs {
		if _, err := s.delEnv.ExecContext(ctx, k); err != nil {
			return fmt.Errorf("delete service environment %q: %w", k, err)
		}
	}
	for _, k := range e.delPolicies {
		if _, err := s.delPolicy.ExecContext(ctx, k); err != nil {
			return fmt.Errorf("delete scheduling policy %q: %w", k, err)
		}
	}
	for _, k := range e.delQueues {
		if _, err := s.delQueue.ExecContext(ctx, k); err != nil {
			return fmt.Errorf("delete job queue %q: %w", k, err)
		}
	}
	for _, k := range e.delShares {
		if _, err := s.delShare.ExecContext(ctx, k.Queue, k.Name); err != nil {
			return fmt.Errorf("delete quota share %q of queue %q: %w", k.Name, k.Queue, err)
		}
	}
	for _, k := range e.delJobs {
		if _, err := s.delJob.ExecContext(ctx, k); err != nil {
			return fmt.Errorf("delete job %q: %w", k, err)
		}
	}
	return nil
}

// encoded is a change turned into the rows it writes.
type encoded struct {
	putEnvs, putPolicies, putQueues []keyedRow
	putShares                       []shareRow
	putJobs                         []jobRow
	delEnvs, delPolicies, delQueues []string
	delShares                       []store.ShareKey
	delJobs                         []string
	rows                            int
}

type keyedRow struct{ key, data string }

type shareRow struct{ queue, name, data string }

type jobRow struct {
	id, queue, share, status, created string
	version                           int64
	data                              string // the job's JSON, without its payload
	payload                           string
}

// encode validates c and turns it into rows. A record with an empty key
// fails the whole change.
func encode(c *store.Change) (*encoded, error) {
	if c == nil {
		return &encoded{}, nil
	}
	e := &encoded{}
	var err error
	if e.putEnvs, err = encodeNamed(c.PutEnvironments, "service environment", func(v *qshare.ServiceEnvironment) string { return v.Name }); err != nil {
		return nil, err
	}
	if e.putPolicies, err = encodeNamed(c.PutPolicies, "scheduling policy", func(v *qshare.SchedulingPolicy) string { return v.Name }); err != nil {
		return nil, err
	}
	if e.putQueues, err = encodeNamed(c.PutQueues, "job queue", func(v *qshare.JobQueue) string { return v.Name }); err != nil {
		return nil, err
	}
	for i := range c.PutShares {
		v := &c.PutShares[i]
		if v.Name == "" || v.JobQueue == "" {
			return nil, fmt.Errorf("put quota share #%d (%q of queue %q) has an empty key; a share needs its name and its job queue", i+1, v.Name, v.JobQueue)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode quota share %q of queue %q: %w", v.Name, v.JobQueue, err)
		}
		e.putShares = append(e.putShares, shareRow{queue: v.JobQueue, name: v.Name, data: ownedString(b)})
	}
	if len(c.PutJobs) > 0 {
		e.putJobs = make([]jobRow, 0, len(c.PutJobs))
	}
	for i := range c.PutJobs {
		v := &c.PutJobs[i]
		if v.ID == "" {
			return nil, fmt.Errorf("put job #%d (%q) has an empty ID; every job needs one", i+1, v.Name)
		}
		b, err := marshalJob(v)
		if err != nil {
			return nil, fmt.Errorf("encode job %q: %w", v.ID, err)
		}
		e.putJobs = append(e.putJobs, jobRow{
			id: v.ID, queue: v.JobQueue, share: v.QuotaShare, status: string(v.Status),
			created: timeKey(v.CreatedAt), version: v.Version, data: ownedString(b), payload: v.Payload,
		})
	}
	// Copy the delete keys: the caller may reuse its Change once Commit
	// returns, and a cancelled Commit returns before the writer is done.
	e.delEnvs = append([]string(nil), c.DeleteEnvironments...)
	e.delPolicies = append([]string(nil), c.DeletePolicies...)
	e.delQueues = append([]string(nil), c.DeleteQueues...)
	e.delShares = append([]store.ShareKey(nil), c.DeleteShares...)
	e.delJobs = append([]string(nil), c.DeleteJobs...)
	e.rows = len(e.putEnvs) + len(e.putPolicies) + len(e.putQueues) + len(e.putShares) + len(e.putJobs) +
		len(e.delEnvs) + len(e.delPolicies) + len(e.delQueues) + len(e.delShares) + len(e.delJobs)
	return e, nil
}

// encodeNamed encodes records keyed by their name; what is their kind, for
// the errors ("job queue"). A record without a name fails them all.
func encodeNamed[T any](vs []T, what string, name func(*T) string) ([]keyedRow, error) {
	var rows []keyedRow
	for i := range vs {
		v := &vs[i]
		n := name(v)
		if n == "" {
			return nil, fmt.Errorf("put %s #%d has an empty name; every record needs its key", what, i+1)
		}
		var err error
		if rows, err = appendKeyed(rows, n, v); err != nil {
			return nil, fmt.Errorf("encode %s %q: %w", what, n, err)
		}
	}
	return rows, nil
}

func appendKeyed(rows []keyedRow, key string, v any) ([]keyedRow, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return rows, err
	}
	return append(rows, keyedRow{key: key, data: ownedString(b)}), nil
}

// ownedString returns b as a string without copying it. b must be a fresh
// buffer that nothing else holds or changes (json.Marshal's result is one):
// a record is about 1 KB, and the copy was a tenth of a submit's garbage.
func ownedString(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
