// Package postgres is qshare's PostgreSQL store: a store.Store kept in one
// PostgreSQL database (or one schema of it), through github.com/jackc/pgx/v5.
// A server picks it with --store postgres://USER@HOST:PORT/DB (url.go).
//
// It keeps the contract of store.Store as sqlite/ does, and passes the same
// conformance suite (store/storetest):
//
//   - Commit is atomic and durable: a group of changes is written as one
//     pipelined batch that PostgreSQL runs as one implicit transaction, and
//     a caller is answered only after the server has acknowledged the commit,
//     which with synchronous_commit=on (forced on the writing connection) is
//     after its WAL was flushed.
//   - Concurrent commits are grouped (commit.go): one writer goroutine takes
//     every change that is waiting into one transaction and one round trip.
//   - Exclusive ownership (lock.go): the writing connection holds a
//     session-level advisory lock for as long as the store is open, so a
//     second Open fails at once with store.ErrLocked, and the database drops
//     the lock when the owner's connection ends, however its process died.
//   - Fencing: every commit runs on that connection and, in its own
//     transaction, proves that the connection still holds the lock and that
//     no later owner has taken over (the owner row's epoch). A store whose
//     connection was lost never reconnects to write: its commits fail with
//     ErrDeposed from then on, and the server must start again from Load.
//
// The schema is created and migrated by Open, in versioned steps
// (schema.go), as sqlite/ does.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"qshare/store"
	"qshare/store/groupcommit"
	"qshare/store/jsonload"
	"qshare/store/row"
)

var _ store.Store = (*DB)(nil)

// ErrDeposed is returned (wrapped) by Commit once the store has lost the
// connection that holds its ownership: another server may own the storage
// now, so this one must not write again. Only a new Open (which loads what
// is stored) can own it again.
var ErrDeposed = errors.New("this server no longer owns the PostgreSQL store (its connection, and with it the lock, was lost)")

// DB is a store.Store in a PostgreSQL database. It is safe for concurrent
// use. Open it with Open and release it with Close.
type DB struct {
	name string // the URL without its password, for messages
	pool *pgxpool.Pool
	opts options

	q *groupcommit.Queue[*row.Change] // the group-commit queue and its writer goroutine

	w *writer // owned by the queue's writer goroutine after Open

	keepalive chan struct{} // closed by Close to stop keepAlive; nil without a lease
	kaDone    chan struct{} // closed when keepAlive has returned
	closeOnce sync.Once
}

type options struct {
	maxBatch     int
	maxRows      int
	batchTimeout time.Duration
	wait         bool          // WithWait
	advertise    string        // WithAdvertise
	lease        time.Duration // WithLease
}

// Option configures Open.
type Option func(*options)

// WithMaxBatch bounds how many concurrent commits are grouped into one
// transaction (default 1024). A batch also stops growing once it holds
// about 20,000 rows; a single larger change is still committed whole.
// WithMaxBatch(1) turns group commit off: one transaction per Commit.
func WithMaxBatch(n int) Option {
	return func(o *options) {
		if n >= 1 {
			o.maxBatch = n
		}
	}
}

// Open opens the PostgreSQL store that connString (a postgres:// URL or a
// libpq key=value string, as pgx.ParseConfig reads it) names, takes its
// ownership, and brings its schema up to date. The tables live in the
// connection's current schema (the first of its search_path that exists).
// When another open store owns it, Open fails at once with an error that
// wraps store.ErrLocked and names the holder. The caller must Close the DB.
// No error message holds the password.
func Open(ctx context.Context, connString string, opts ...Option) (*DB, error) {
	o := options{maxBatch: 1024, maxRows: 20000, batchTimeout: time.Minute}
	for _, opt := range opts {
		opt(&o)
	}
	name := redact(connString)
	fail := func(err error) (*DB, error) {
		return nil, fmt.Errorf("postgres: open %s: %w", name, err)
	}
	cfg, err := pgx.ParseConfig(connString)
	if err != nil {
		return fail(redactErr(err, connString))
	}
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	// Durability is the store's promise, whatever the server's default.
	cfg.RuntimeParams["synchronous_commit"] = "on"
	if cfg.RuntimeParams["application_name"] == "" {
		host, _ := os.Hostname()
		cfg.RuntimeParams["application_name"] = fmt.Sprintf("qshare (host %s, pid %d)", host, os.Getpid())
	}
	w, err := newWriter(ctx, cfg, name, connString, o)
	if err != nil {
		return fail(err)
	}
	pcfg, err := pgxpool.ParseConfig("")
	if err != nil {
		w.close()
		return fail(err)
	}
	pcfg.ConnConfig = cfg.Copy()
	if o.lease > 0 {
		// A paused process must not hold a transaction open for longer
		// than its lease either: an event append holds the row a takeover
		// must lock (events.go).
		pcfg.ConnConfig.RuntimeParams["idle_in_transaction_session_timeout"] = strconv.FormatInt(o.lease.Milliseconds(), 10)
	}
	pcfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		w.close()
		return fail(redactErr(err, connString))
	}
	d := &DB{
		name: name,
		pool: pool,
		opts: o,
		w:    w,
	}
	d.q = groupcommit.New(groupcommit.Config{MaxBatch: o.maxBatch, MaxRows: o.maxRows, Prefix: "postgres: commit"}, d.applyBatch)
	d.q.Start()
	if o.lease > 0 {
		d.keepalive, d.kaDone = make(chan struct{}), make(chan struct{})
		go d.keepAlive(o.lease / 4)
	}
	return d, nil
}

// Name returns the store's URL without its password.
func (d *DB) Name() string { return d.name }

// Epoch returns the owner epoch this DB took at Open: one more than the
// previous owner's. Every commit checks, in its transaction, that the
// stored epoch is still this one.
func (d *DB) Epoch() int64 { return d.w.epoch }

// Stats counts what the DB has done since it was opened: its commits,
// failures, transactions and rows (see groupcommit.Stats).
type Stats = groupcommit.Stats

// Stats returns the DB's counters. It is safe to call at any time.
func (d *DB) Stats() Stats { return d.q.Stats() }

// Close waits for the commits already handed over to finish, stops the
// writer, releases the ownership and closes the connections. Commit and
// Load fail with store.ErrClosed afterwards. Closing a closed DB does
// nothing and returns nil.
func (d *DB) Close() error {
	if d.keepalive != nil {
		d.closeOnce.Do(func() { close(d.keepalive) })
		<-d.kaDone
	}
	if !d.q.Close() {
		return nil
	}
	err := d.w.close()
	d.pool.Close()
	if err != nil {
		return fmt.Errorf("postgres: close %s: %w", d.name, err)
	}
	return nil
}

// Load returns everything stored, read in one REPEATABLE READ transaction
// so that it is a consistent snapshot even while commits go on. Jobs come in
// CreatedAt order, ties broken by ID (byte order). Load reads through its
// own connections, not the owner's: it needs no ownership.
func (d *DB) Load(ctx context.Context) (*store.State, error) {
	if d.q.Closed() {
		return nil, fmt.Errorf("postgres: load: %w", store.ErrClosed)
	}
	fail := func(what string, err error) (*store.State, error) {
		return nil, fmt.Errorf("postgres: load %sfrom %s: %w", what, d.name, err)
	}
	tx, err := d.pool.BeginTx(ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead, AccessMode: pgx.ReadOnly})
	if err != nil {
		return fail("", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // read-only; nothing to undo
	query := func(sql string) (jsonload.Rows, func(), error) {
		rows, err := tx.Query(ctx, sql)
		if err != nil {
			return nil, nil, err
		}
		return rows, rows.Close, nil
	}
	st, table, err := jsonload.State(query, func(payload []byte) string { return string(payload) })
	if err != nil {
		return fail(table+" ", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fail("", err)
	}
	return st, nil
}

// redact returns connString without its password, for messages: a URL as
// store.RedactURL gives it, a key=value string with password=xxxxx.
func redact(connString string) string {
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		return store.RedactURL(u)
	}
	return kvPasswordRE.ReplaceAllString(connString, "${1}xxxxx")
}
