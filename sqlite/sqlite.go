// Package sqlite is qshare's embedded, default store: a store.Store kept in
// one SQLite database file, through the pure-Go driver modernc.org/sqlite (so
// a CGO_ENABLED=0 build works).
//
// The daemon writes every change through Commit before it acts on it, and
// rebuilds its state from Load when it starts. Commit is durable when it
// returns: the database runs in WAL mode with synchronous=FULL, so the WAL is
// fsynced before a commit is acknowledged. To make durability cheap under
// load, concurrent commits are grouped: one writer goroutine applies every
// change that is waiting into a single transaction, commits it with one
// fsync, and then answers each caller (see commit.go and docs/store.md).
package sqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	_ "modernc.org/sqlite" // registers the "sqlite" database/sql driver

	"qshare/store"
	"qshare/store/groupcommit"
	"qshare/store/jsonload"
	"qshare/store/row"
)

var _ store.Store = (*DB)(nil)

// DB is a store.Store backed by one SQLite database file. It is safe for
// concurrent use. Open it with Open and release it with Close.
type DB struct {
	path string
	db   *sql.DB
	opts options
	lock *fileLock
	// noStore: a measuring build's "nostore" experiment (experiment.go),
	// read once at Open; always false in the product.
	noStore bool

	q *groupcommit.Queue[*row.Change] // the group-commit queue and its writer goroutine

	w *writer // owned by the queue's writer goroutine after Open
}

type options struct {
	maxBatch    int
	maxRows     int
	busyTimeout time.Duration
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

// WithBusyTimeout sets how long SQLite waits for a lock that another
// connection holds before it fails (default 10s).
func WithBusyTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.busyTimeout = d
		}
	}
}

// Open opens the database file at path, creating it and its directory if
// they do not exist, and brings its schema up to date. It takes an exclusive
// lock on path+".lock", so two processes never write one database: a second
// Open of the same path fails until the first DB is closed (or its process
// has died). The caller must Close the DB.
func Open(path string, opts ...Option) (*DB, error) {
	o := options{maxBatch: 1024, maxRows: 20000, busyTimeout: 10 * time.Second}
	for _, opt := range opts {
		opt(&o)
	}
	if path == "" {
		return nil, errors.New("sqlite: open: empty database path; give the path of the database file")
	}
	syncMode, noStore, err := storeMode()
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o700); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: cannot create its directory (check that the parent is writable): %w", path, err)
	}
	lock, err := lockFile(lockPath(abs))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// A new database is its owner's alone (0600; SQLite gives its log and
	// index the database's mode): it holds every job's payload, secrets
	// in Environment included. An empty file is an empty database.
	if f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600); err == nil {
		f.Close()
	}
	db, err := sql.Open("sqlite", dsn(abs, o, syncMode))
	if err != nil {
		lock.unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	// The writer holds one connection for good; the others serve Load.
	db.SetMaxOpenConns(4)
	db.SetMaxIdleConns(4)
	db.SetConnMaxIdleTime(0)
	d := &DB{
		path:    abs,
		db:      db,
		opts:    o,
		lock:    lock,
		noStore: noStore,
	}
	ctx := context.Background()
	if err := d.migrate(ctx); err != nil {
		db.Close()
		lock.unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w%s", path, err, hint(err))
	}
	w, err := newWriter(ctx, db)
	if err != nil {
		db.Close()
		lock.unlock()
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	d.w = w
	d.q = groupcommit.New(groupcommit.Config{MaxBatch: o.maxBatch, MaxRows: o.maxRows, Prefix: "sqlite: commit"}, d.applyBatch)
	d.q.Start()
	return d, nil
}

// dsn builds the driver's data source name: a SQLite URI for the file, with
// the pragmas every connection runs when it opens.
func dsn(abs string, o options, synchronous string) string {
	p := filepath.ToSlash(abs)
	if p[0] != '/' {
		p = "/" + p // a Windows volume: file:/C:/...
	}
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", o.busyTimeout.Milliseconds()))
	q.Add("_pragma", "journal_mode(WAL)")
	// FULL: the WAL is fsynced at every commit, so an acknowledged commit
	// survives a power loss, not only a crash of the process. (Only a
	// measuring build, tagged qshare_experiment, sets another mode; see
	// experiment.go.)
	q.Add("_pragma", "synchronous("+synchronous+")")
	q.Add("_pragma", "foreign_keys(OFF)")
	q.Add("_pragma", "cache_size(-8192)")
	// Keep the WAL file from staying large after a burst.
	q.Add("_pragma", "journal_size_limit(67108864)")
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}

// Path returns the absolute path of the database file.
func (d *DB) Path() string { return d.path }

// Stats counts what the DB has done since it was opened: its commits,
// failures, transactions and rows (see groupcommit.Stats).
type Stats = groupcommit.Stats

// Stats returns the DB's counters. It is safe to call at any time.
func (d *DB) Stats() Stats { return d.q.Stats() }

// Close waits for the commits already handed over to finish, stops the
// writer and closes the database. Commit and Load fail with store.ErrClosed
// afterwards. Closing a closed DB does nothing and returns nil.
func (d *DB) Close() error {
	if !d.q.Close() {
		return nil
	}
	err := d.w.close()
	if cerr := d.db.Close(); err == nil {
		err = cerr
	}
	d.lock.unlock()
	if err != nil {
		return fmt.Errorf("sqlite: close %s: %w", d.path, err)
	}
	return nil
}

// Load returns everything stored, read in one transaction so that it is a
// consistent snapshot even while commits go on. Jobs come in CreatedAt order,
// ties broken by ID.
func (d *DB) Load(ctx context.Context) (*store.State, error) {
	if d.q.Closed() {
		return nil, fmt.Errorf("sqlite: load: %w", store.ErrClosed)
	}
	tx, err := d.db.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, fmt.Errorf("sqlite: load from %s: %w%s", d.path, err, hint(err))
	}
	defer tx.Rollback() //nolint:errcheck // read-only; nothing to undo
	query := func(sql string) (jsonload.Rows, func(), error) {
		rows, err := tx.QueryContext(ctx, sql)
		if err != nil {
			return nil, nil, err
		}
		return rows, func() { rows.Close() }, nil
	}
	st, table, err := jsonload.State(query, func(payload string) string { return payload })
	if err != nil {
		if table == "plans" {
			table = "capacity plans" // as this store's message has always said
		}
		return nil, fmt.Errorf("sqlite: load %s from %s: %w", table, d.path, err)
	}
	return st, nil
}

// discardConn makes database/sql close c's driver connection instead of
// returning it to the pool, so that a connection left in an unknown state by
// a failed write is never used again.
func discardConn(c *sql.Conn) {
	c.Raw(func(any) error { return driver.ErrBadConn }) //nolint:errcheck // the point is the error
	c.Close()
}

// lockPath returns the lock file of the database at abs: beside the file
// that abs resolves to, symbolic links followed, since SQLite follows them
// too. Two names of one database (a link to its file, even one made before
// the file exists) must share one lock, or two servers could open it.
func lockPath(abs string) string {
	for range 40 { // as many links as Linux follows
		if real, err := filepath.EvalSymlinks(abs); err == nil {
			return real + ".lock"
		}
		target, err := os.Readlink(abs)
		if err != nil {
			break // not a link: a file not created yet
		}
		if !filepath.IsAbs(target) {
			target = filepath.Join(filepath.Dir(abs), target)
		}
		abs = target
	}
	return abs + ".lock"
}
