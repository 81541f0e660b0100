package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"qshare/store"
	"qshare/store/row"
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
	enc, err := row.EncodeFor(ctx, c)
	if err != nil {
		return fmt.Errorf("postgres: commit: %w", err)
	}
	return d.q.Commit(ctx, enc, enc.Rows)
}

// applyBatch is the queue's Apply: it writes batch in one transaction
// through the writer and words its error for the callers.
func (d *DB) applyBatch(batch []*row.Change) (int, error) {
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
	putPlanSQL   = `INSERT INTO plans (name, data) VALUES ($1, $2) ON CONFLICT (name) DO UPDATE SET data = excluded.data`
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
	delPlanSQL   = `DELETE FROM plans WHERE name = ANY($1)`
	delJobSQL    = `DELETE FROM jobs WHERE id = ANY($1)`
	fenceSQL     = `SELECT qshare_fence($1, $2, $3, $4)`
)

// apply writes the changes reqs in one transaction. On failure it
// returns the index of the request whose change failed, or -1 if the
// failure was not one change's (the fence, the commit, the connection).
// When the connection broke before the server answered, it finds out
// whether the transaction was applied and reports success if it was; in
// both cases the connection is given up (ErrDeposed for the next batch).
func (w *writer) apply(reqs []*row.Change, o options) (int, error) {
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
		queueChange(b, e)
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
		// committed. The connection is given up first, so that Deposed
		// says so at once and the server steps down now, not after the
		// outcome's retries (up to outcomeTimeout while the database
		// does not answer, outcomeRecoveryTimeout while it starts up);
		// then learn which, for this batch's callers.
		w.lose(err)
		applied, oerr := w.outcome(n)
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

// queueChange adds the statements of one change to b: its puts, then its deletes.
func queueChange(b *pgx.Batch, e *row.Change) {
	for _, r := range e.PutEnvs {
		b.Queue(putEnvSQL, r.Key, r.Data)
	}
	for _, r := range e.PutPolicies {
		b.Queue(putPolicySQL, r.Key, r.Data)
	}
	for _, r := range e.PutQueues {
		b.Queue(putQueueSQL, r.Key, r.Data)
	}
	for _, r := range e.PutShares {
		b.Queue(putShareSQL, r.Queue, r.Name, r.Data)
	}
	for _, r := range e.PutPlans {
		b.Queue(putPlanSQL, r.Key, r.Data)
	}
	for _, r := range e.PutJobs {
		b.Queue(putJobSQL, r.ID, r.Queue, r.Share, r.Status, r.Created, r.Version, r.Data, bytea(r.Payload))
	}
	if len(e.DelEnvs) > 0 {
		b.Queue(delEnvSQL, e.DelEnvs)
	}
	if len(e.DelPolicies) > 0 {
		b.Queue(delPolicySQL, e.DelPolicies)
	}
	if len(e.DelQueues) > 0 {
		b.Queue(delQueueSQL, e.DelQueues)
	}
	if len(e.DelShares) > 0 {
		qs := make([]string, len(e.DelShares))
		ns := make([]string, len(e.DelShares))
		for i, k := range e.DelShares {
			qs[i], ns[i] = k.Queue, k.Name
		}
		b.Queue(delShareSQL, qs, ns)
	}
	if len(e.DelPlans) > 0 {
		b.Queue(delPlanSQL, e.DelPlans)
	}
	if len(e.DelJobs) > 0 {
		b.Queue(delJobSQL, e.DelJobs)
	}
}

// bytea returns the payload for its bytea column: never nil, which pgx
// would send as NULL, and byte for byte.
func bytea(payload string) []byte { return append(make([]byte, 0, len(payload)), payload...) }
