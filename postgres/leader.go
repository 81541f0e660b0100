package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"qshare/periodic"
	"qshare/store/row"
)

// Several servers on one store: one leader, the others standbys.
//
// The store's ownership (lock.go) is the leadership: the server whose Open
// holds the advisory lock is the leader, and only it can commit. A standby
// opens the store WithWait: its connection waits in PostgreSQL's own lock
// queue, and is granted the lock the moment the leader's session ends.
// Nothing compares clocks between machines: whether the leader is gone is
// decided by the database server alone, which ends the leader's session
//
//   - when its socket closes (the leader's process died, even by SIGKILL, or
//     its machine reset the connection),
//   - when an operator ends it (pg_terminate_backend), or PostgreSQL
//     restarted,
//   - or, WithLease, when the session has stayed idle longer than the lease
//     (PostgreSQL's idle_session_timeout, measured by the database server
//     on its own clock): a leader that is paused (SIGSTOP), hung or cut off
//     by the network stops renewing it. A leader's DB renews it with a
//     fence-only commit every quarter of the lease, which also tells it
//     within that time that it was deposed.
//
// A deposed leader cannot commit again (the fence), and its DB says so on
// Deposed; the server then steps down. The owner row records where the
// leader serves (WithAdvertise), so that standbys can forward requests to
// it (Watcher).

// WithWait makes Open wait for the store's lock instead of failing with
// store.ErrLocked: the open of a standby, which returns once it is the
// leader. The wait ends with ctx (Open then fails with ctx's error) or
// when the waiting connection breaks (the caller tries again).
func WithWait() Option { return func(o *options) { o.wait = true } }

// WithAdvertise records addr, where this server serves its API (a URL
// such as http://10.0.0.5:8750), in the owner row when Open takes the
// store, for Watcher.Leader.
func WithAdvertise(addr string) Option { return func(o *options) { o.advertise = addr } }

// WithLease makes the store's ownership a lease of d: PostgreSQL ends the
// owning session once it has been idle for d (idle_session_timeout, and
// idle_in_transaction_session_timeout on every connection of the DB, so
// that a transaction left open by a paused process ends too), and the DB
// renews it with a fence-only commit every d/4. A process that
// stops renewing (paused, hung, cut off) loses the store within about d
// of its last renewal, by the database server's clock alone. d is rounded
// down to whole milliseconds; d under 100 ms is taken as 100 ms.
func WithLease(d time.Duration) Option {
	return func(o *options) {
		if d < 100*time.Millisecond {
			d = 100 * time.Millisecond
		}
		o.lease = d
	}
}

// keepAlive renews the lease every interval until Close, or until the DB
// is deposed.
func (d *DB) keepAlive(interval time.Duration) {
	defer close(d.kaDone)
	periodic.Run(interval, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 4*interval)
		d.Heartbeat(ctx) //nolint:errcheck // a lost connection shows on Deposed
		cancel()
	}, d.keepalive, d.w.deposed)
}

// Heartbeat commits a transaction that holds nothing but the fence: it
// proves, as every commit does, that this DB still owns the store, and
// renews the lease. It fails as Commit fails, with an error wrapping
// ErrDeposed once the store was lost. Each heartbeat counts as one commit
// of one row in Stats.
func (d *DB) Heartbeat(ctx context.Context) error {
	return d.q.Commit(ctx, &row.Change{}, 1)
}

// Deposed returns a channel that is closed once this DB has lost the
// store's ownership for good (its connection broke, its fence was refused):
// from then on every Commit fails with ErrDeposed. A leader steps down
// when it is closed.
func (d *DB) Deposed() <-chan struct{} { return d.w.deposed }

// DeposedErr returns why this DB lost the store (an error wrapping
// ErrDeposed), or nil while it owns it.
func (d *DB) DeposedErr() error {
	select {
	case <-d.w.deposed:
		return d.w.lost // written before deposed was closed
	default:
		return nil
	}
}

// Leader is what the owner row says about the store's current owner.
type Leader struct {
	// Epoch is the owner's epoch: one more at each Open.
	Epoch int64
	// Holder is the owner's application_name (qshare sets it to its host
	// and pid).
	Holder string
	// Advertise is where the owner serves its API (WithAdvertise), or "".
	Advertise string
	// Since is when the owner took the store, by the database's clock.
	Since time.Time
	// Alive reports whether a session holds the store's lock now; when it
	// is false the owner row names the last owner, which is gone.
	Alive bool
}

// Watcher reads who owns a store without taking it: a standby's view of
// its leader, and check-events' reader of the event log. It is safe for
// concurrent use.
type Watcher struct {
	pool  *pgxpool.Pool
	name  string
	objid int32
}

// NewWatcher connects to the store that connString names (as Open reads
// it), with at most two connections. It does not take the store's lock.
// The caller must Close it.
func NewWatcher(ctx context.Context, connString string) (*Watcher, error) {
	name := redact(connString)
	pcfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		return nil, fmt.Errorf("postgres: watch %s: %w", name, redactErr(err, connString))
	}
	pcfg.MaxConns = 2
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: watch %s: %w", name, redactErr(err, connString))
	}
	return &Watcher{pool: pool, name: name}, nil
}

// Close closes the watcher's connections.
func (wa *Watcher) Close() { wa.pool.Close() }

// Leader reads the owner row and whether its lock is held. It fails when
// the store has no owner row yet (no server has opened it) or the database
// does not answer.
func (wa *Watcher) Leader(ctx context.Context) (Leader, error) {
	var l Leader
	var schema *string
	err := wa.pool.QueryRow(ctx, `SELECT current_schema()`).Scan(&schema)
	if err != nil {
		return l, fmt.Errorf("postgres: read the owner of %s: %w", wa.name, err)
	}
	if schema == nil {
		return l, fmt.Errorf("postgres: read the owner of %s: no schema of the search_path exists", wa.name)
	}
	err = wa.pool.QueryRow(ctx, `SELECT o.epoch, o.holder, o.advertise, o.since,
			EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
				AND l.classid = $1::int::oid AND l.objid = $2::int::oid AND l.objsubid = 2
				AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()))
		FROM owner o WHERE o.id = 1`, lockClass, schemaObjID(*schema)).Scan(&l.Epoch, &l.Holder, &l.Advertise, &l.Since, &l.Alive)
	if err == pgx.ErrNoRows {
		return l, fmt.Errorf("postgres: %s has no owner yet: no server has opened it", wa.name)
	}
	if err != nil {
		return l, fmt.Errorf("postgres: read the owner of %s: %w", wa.name, err)
	}
	return l, nil
}
