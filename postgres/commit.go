package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"qshare/store"
)

// Group commit.
//
// As in sqlite/ (its commit.go says more), through the same queue
// (store/groupcommit): Commit encodes its change in the caller's goroutine
// (an invalid change fails without touching the database) and hands it to
// the queue's one writer goroutine, which takes every request already
// waiting, up to maxBatch requests or about maxRows rows, and has
// applyBatch write them together. Here "together" is one pgx.Batch: the fence,
// then every statement of every change, sent in one round trip and run by
// PostgreSQL as one implicit transaction that commits at the batch's Sync.
// Each caller is answered after the server acknowledged that commit, so
// while one batch waits for the WAL flush the next one queues up, and the
// batch size follows the load without any timer.
//
// Each caller's change stays atomic: if a statement of one change fails,
// the server rolls the whole transaction back, that caller gets the error,
// and the batch is sent again without it. If the fence or the commit
// itself fails, every caller in the batch gets the error and none of their
// changes is applied. If the connection breaks before the server's answer,
// the writer learns from a fresh connection whether the batch was applied
// (writer.outcome) and answers accordingly; either way it then gives the
// connection, and with it the store's ownership, up (ErrDeposed).

// Commit applies c atomically and durably; see store.Store. It waits while
// other commits are being written and then shares their transaction. If ctx
// ends while the change is still queued, Commit returns ctx's error and the
// change is never applied; once the writer has taken the change into a
// transaction, Commit waits for that transaction to finish so that its
// answer is always the truth. After the store lost its connection, Commit
// fails with an error wrapping ErrDeposed.
func (d *DB) Commit(ctx context.Context, c *store.Change) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	enc, err := encode(c)
	if err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return d.q.Commit(ctx, enc, enc.rows)
}

// applyBatch is the queue's Apply: it writes batch in one transaction
// through the writer and words its error for the callers.
func (d *DB) applyBatch(batch []*encoded) (int, error) {
	failed, err := d.w.apply(batch, d.opts)
	if err != nil {
		err = fmt.Errorf("postgres: commit to %s: %w", d.name, err)
	}
	return failed, err
}

// The statements of a change.
const (
	putEnvSQL    = `INSERT INTO environments (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = excluded.data`
	putPolicySQL = `INSERT INTO policies (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = excluded.data`
	putQueueSQL  = `INSERT INTO queues (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = excluded.data`
	putShareSQL  = `INSERT INTO shares (queue, name, data) VALUES ($1, $2, $3) ON CONFLICT (queue, name) DO UPDATE SET data = excluded.data`
	// The store keeps the newest version of a job.
	putJobSQL = `INSERT INTO jobs (id, queue, share, status, created_at, version, data, payload) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
		ON CONFLICT (id) DO UPDATE SET queue = excluded.queue, share = excluded.share,
			status = excluded.status, created_at = excluded.created_at,
			version = excluded.version, data = excluded.data, payload = excluded.payload
		WHERE excluded.version >= jobs.version`
	delEnvSQL    = `DELETE FROM environments WHERE name = ANY($1)`
	delPolicySQL = `DELETE FROM policies WHERE name = ANY($1)`
	delQueueSQL  = `DELETE FROM queues WHERE name = ANY($1)`
	delShareSQL  = `DELETE FROM shares WHERE (queue, name) IN (SELECT * FROM unnest($1::text[], $2::text[]))`
	delJobSQL    = `DELETE FROM jobs WHERE id = ANY($1)`
	fenceSQL     = `SELECT qshare_fence($1, $2, $3, $4)`
)

// apply writes the changes reqs in one transaction. On failure it
// returns the index of the request whose change failed, or -1 if the
// failure was not one change's (the fence, the commit, the connection).
// When the connection broke before the server answered, it finds out
// whether the transaction was applied and reports success if it was; in
// both cases the connection is given up (ErrDeposed for the next batch).
func (w *writer) apply(reqs []*encoded, o options) (int, error) {
	if w.conn == nil {
		return -1, w.lost
	}
	w.batch++
	n := w.batch
	b := &pgx.Batch{}
	owner := []int{-1}
	b.Queue(fenceSQL, lockClass, w.objid, w.epoch, n)
	for i, e := range reqs {
		k := b.Len()
		e.queue(b)
		for range b.Len() - k {
			owner = append(owner, i)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.batchTimeout)
	defer cancel()
	br := w.conn.SendBatch(ctx, b)
	var err error
	failed := -1
	for i := range owner {
		if _, err = br.Exec(); err != nil {
			failed = owner[i]
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
		failed = -1
	}
	if err == nil {
		return -1, nil
	}
	if w.conn.IsClosed() || !isServerError(err) {
		// The answer never came: the transaction may or may not have
		// committed. Learn which, then give the connection up.
		applied, oerr := w.outcome(n)
		w.lose(err)
		switch {
		case oerr != nil:
			return -1, fmt.Errorf("the connection broke during the commit (%v) and its outcome could not be learned (%v): the change may or may not be stored; restart the server, which loads what is: %w", err, oerr, ErrDeposed)
		case applied:
			return -1, nil
		default:
			return -1, fmt.Errorf("the connection broke during the commit; nothing in it was applied: %w: %v", ErrDeposed, err)
		}
	}
	if isFenceError(err) {
		w.lose(err)
		return -1, w.lost
	}
	if failed < 0 {
		return -1, fmt.Errorf("commit transaction (nothing in it was applied): %w", err)
	}
	return failed, err
}

// isServerError reports whether err is the server's answer to a statement
// (so the server rolled back and the connection is fine).
func isServerError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe)
}

// queue adds the statements of one change to b: its puts, then its deletes.
func (e *encoded) queue(b *pgx.Batch) {
	for _, r := range e.putEnvs {
		b.Queue(putEnvSQL, r.key, r.data)
	}
	for _, r := range e.putPolicies {
		b.Queue(putPolicySQL, r.key, r.data)
	}
	for _, r := range e.putQueues {
		b.Queue(putQueueSQL, r.key, r.data)
	}
	for _, r := range e.putShares {
		b.Queue(putShareSQL, r.queue, r.name, r.data)
	}
	for _, r := range e.putJobs {
		b.Queue(putJobSQL, r.id, r.queue, r.share, r.status, r.created, r.version, r.data, r.payload)
	}
	if len(e.delEnvs) > 0 {
		b.Queue(delEnvSQL, e.delEnvs)
	}
	if len(e.delPolicies) > 0 {
		b.Queue(delPolicySQL, e.delPolicies)
	}
	if len(e.delQueues) > 0 {
		b.Queue(delQueueSQL, e.delQueues)
	}
	if len(e.delShares) > 0 {
		qs := make([]string, len(e.delShares))
		ns := make([]string, len(e.delShares))
		for i, k := range e.delShares {
			qs[i], ns[i] = k.Queue, k.Name
		}
		b.Queue(delShareSQL, qs, ns)
	}
	if len(e.delJobs) > 0 {
		b.Queue(delJobSQL, e.delJobs)
	}
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
	payload                           []byte
}

// encode validates c and turns it into rows. A record with an empty key
// fails the whole change. Nothing in the result refers to c, which the
// caller may reuse once Commit returns.
func encode(c *store.Change) (*encoded, error) {
	e := &encoded{}
	if c == nil {
		return e, nil
	}
	for i := range c.PutEnvironments {
		v := &c.PutEnvironments[i]
		if v.Name == "" {
			return nil, fmt.Errorf("put service environment #%d has an empty name; every record needs its key", i+1)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode service environment %q: %w", v.Name, err)
		}
		e.putEnvs = append(e.putEnvs, keyedRow{v.Name, string(b)})
	}
	for i := range c.PutPolicies {
		v := &c.PutPolicies[i]
		if v.Name == "" {
			return nil, fmt.Errorf("put scheduling policy #%d has an empty name; every record needs its key", i+1)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode scheduling policy %q: %w", v.Name, err)
		}
		e.putPolicies = append(e.putPolicies, keyedRow{v.Name, string(b)})
	}
	for i := range c.PutQueues {
		v := &c.PutQueues[i]
		if v.Name == "" {
			return nil, fmt.Errorf("put job queue #%d has an empty name; every record needs its key", i+1)
		}
		b, err := json.Marshal(v)
		if err != nil {
			return nil, fmt.Errorf("encode job queue %q: %w", v.Name, err)
		}
		e.putQueues = append(e.putQueues, keyedRow{v.Name, string(b)})
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
		e.putShares = append(e.putShares, shareRow{queue: v.JobQueue, name: v.Name, data: string(b)})
	}
	if len(c.PutJobs) > 0 {
		e.putJobs = make([]jobRow, 0, len(c.PutJobs))
	}
	for i := range c.PutJobs {
		v := &c.PutJobs[i]
		if v.ID == "" {
			return nil, fmt.Errorf("put job #%d (%q) has an empty ID; every job needs one", i+1, v.Name)
		}
		j := *v
		j.Payload = ""                          // kept in its own column, byte for byte
		payload := make([]byte, len(v.Payload)) // never nil, which pgx would send as NULL
		copy(payload, v.Payload)
		b, err := json.Marshal(&j)
		if err != nil {
			return nil, fmt.Errorf("encode job %q: %w", v.ID, err)
		}
		e.putJobs = append(e.putJobs, jobRow{
			id: v.ID, queue: v.JobQueue, share: v.QuotaShare, status: string(v.Status),
			created: timeKey(v.CreatedAt), version: v.Version, data: string(b), payload: payload,
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
