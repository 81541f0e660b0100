package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5"

	"qshare/event"
	"qshare/store"
)

var _ store.EventSink = (*DB)(nil)

// The capacity event log in the store (qshare serve --events store), so
// that every leader of a store appends to one history, which check-events
// reads whole (Watcher.WriteEvents).
//
// Each batch is one row of events, its lines as event.File writes them,
// numbered by an identity column. Append runs in a transaction of its own
// through the pool (not the writer's connection, whose transactions are
// the commits'): it first locks the event_owner row FOR UPDATE and checks
// that it still holds this DB's epoch. Open moves that row to the new
// epoch in the transaction that takes the store, so the appends of one
// owner are serialised (their numbers are their order), an append of a
// deposed owner still in flight finishes before the new owner reads the
// log, and every later one is refused with ErrDeposed. Each append is one
// durable commit (synchronous_commit=on), so a batch acknowledged is a
// batch kept, across a crash of the machine.

// Append appends evs as one batch at the end of the store's event log;
// see store.EventSink. It fails, keeping nothing, once another server has
// taken the store over (ErrDeposed) or the DB is closed.
func (d *DB) Append(evs []event.Event) error {
	if len(evs) == 0 {
		return nil
	}
	if d.q.Closed() {
		return fmt.Errorf("postgres: append events: %w", store.ErrClosed)
	}
	var b []byte
	for _, e := range evs {
		b = event.Append(b, e)
		b = append(b, '\n')
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := pgx.BeginFunc(ctx, d.pool, func(tx pgx.Tx) error {
		var ok bool
		err := tx.QueryRow(ctx, `SELECT true FROM event_owner WHERE id = 1 AND epoch = $1 FOR UPDATE`, d.w.epoch).Scan(&ok)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("%w: the event log's owner epoch is no longer %d", ErrDeposed, d.w.epoch)
		}
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO events (batch) VALUES ($1)`, b)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: append %d events to %s (none kept): %w", len(evs), d.name, err)
	}
	return nil
}

// Events calls fn with every event of the store's log, oldest first; see
// store.EventSink. Unreadable lines are skipped and reported after the
// others with an *event.BadLinesError.
func (d *DB) Events(fn func(event.Event)) error {
	if d.q.Closed() {
		return fmt.Errorf("postgres: read events: %w", store.ErrClosed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return readEvents(ctx, d.pool, d.name, fn)
}

// querier is what readEvents needs of a pool.
type querier interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}

// eachBatch calls fn with every batch of the log, in order.
func eachBatch(ctx context.Context, q querier, fn func([]byte) error) error {
	rows, err := q.Query(ctx, `SELECT batch FROM events ORDER BY seq`)
	if err != nil {
		return err
	}
	defer rows.Close()
	for rows.Next() {
		var b []byte
		if err := rows.Scan(&b); err != nil {
			return err
		}
		if err := fn(b); err != nil {
			return err
		}
	}
	return rows.Err()
}

// readEvents reads the log through q and calls fn with each event.
func readEvents(ctx context.Context, q querier, name string, fn func(event.Event)) error {
	pr, pw := io.Pipe()
	go func() {
		pw.CloseWithError(eachBatch(ctx, q, func(b []byte) error {
			_, err := pw.Write(b)
			return err
		}))
	}()
	defer pr.Close()
	var bad []*event.LineError
	r := event.NewReader(pr)
	for {
		e, err := r.Read()
		if err == io.EOF {
			break
		}
		var le *event.LineError
		if errors.As(err, &le) {
			bad = append(bad, le)
			continue
		}
		if err != nil {
			return fmt.Errorf("postgres: read the event log of %s: %w", name, err)
		}
		fn(e)
	}
	if len(bad) > 0 {
		return &event.BadLinesError{Path: name, Lines: bad}
	}
	return nil
}

// WriteEvents writes the store's whole event log to w, as the lines of an
// event file (qshare check-events reads it so), oldest first, without
// taking the store: it may run while a server owns it.
func (wa *Watcher) WriteEvents(ctx context.Context, w io.Writer) error {
	err := eachBatch(ctx, wa.pool, func(b []byte) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("postgres: read the event log of %s: %w", wa.name, err)
	}
	return nil
}
