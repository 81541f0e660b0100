package postgres

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"qshare/store"
)

// Exclusive ownership and fencing.
//
// The writer's connection takes a session-level advisory lock,
// pg_try_advisory_lock(lockClass, objid), before it migrates or writes
// anything, and holds it until Close. objid is a hash of the current schema,
// so stores in two schemas of one database do not exclude each other
// (advisory locks are per database already). The lock is tied to the
// connection's server process: when the owner's process dies, however
// (SIGKILL included), its socket closes, the server ends that backend and
// the lock is gone; the next Open takes it. The try form never waits, so a
// second Open fails at once with store.ErrLocked, naming the holder from
// pg_stat_activity (its application_name says host and pid).
//
// Under the lock, Open increments the owner row's epoch. Every commit then
// calls qshare_fence(lockClass, objid, epoch, batch) first, in the same
// transaction: it fails unless this backend holds the lock and the stored
// epoch is still ours, and it records the batch number. A commit therefore
// can only ever apply on the connection that holds the lock, and a server
// that lost its connection (PostgreSQL restarted, the backend was
// terminated, the network was cut) cannot commit again: the writer never
// reconnects to write (ErrDeposed). The epoch check also refuses a commit
// once any later owner has taken over, should the lock ever be bypassed.
// The batch number lets a writer whose connection broke during a commit
// learn, from a fresh connection, whether that commit was applied (see
// outcome).

// outcomeTimeout bounds how long a writer whose connection broke during a
// commit tries to learn that commit's outcome (the callers wait for it)
// while the database does not answer.
const outcomeTimeout = 30 * time.Second

// outcomeRecoveryTimeout bounds it while the database answers that it is
// starting up (startingUp): a PostgreSQL server recovering from a crash
// replays its write-ahead log before it takes connections, which took over
// 30 s on a loaded 2-core machine, and the outcome is known once it has.
const outcomeRecoveryTimeout = 5 * time.Minute

// startingUp reports whether err is PostgreSQL's refusal of a connection
// while it starts, recovers or shuts down (SQLSTATE 57P03,
// cannot_connect_now): the server is there, and will answer.
func startingUp(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "57P03"
}

// lockClass is the first key of the store's advisory lock ("qshr").
const lockClass int32 = 0x71736872

// writer owns the connection that holds the lock and that every write goes
// through. Only the writer goroutine uses it after Open.
type writer struct {
	cfg   *pgx.ConnConfig
	conn  *pgx.Conn // nil once lost
	lost  error     // why the connection was given up; wraps ErrDeposed
	name  string
	objid int32
	epoch int64
	pid   uint32 // the server process of conn
	// started is when that process started: with pid, it names the
	// process even after a database restart, when pids are reused.
	started time.Time
	batch   int64 // the number of the last batch sent
	schema  string
	// deposed is closed when the connection is lost (lose).
	deposed chan struct{}
}

// newWriter connects, takes the lock, migrates the schema and takes the
// next owner epoch.
func newWriter(ctx context.Context, cfg *pgx.ConnConfig, name, connString string, o options) (*writer, error) {
	if o.lease > 0 {
		// The lease (leader.go): PostgreSQL ends this session when it
		// stays idle longer, and the lock goes with it.
		// idle_in_transaction_session_timeout covers a process stopped in
		// the middle of sending a batch (an open transaction).
		cfg = cfg.Copy()
		ms := strconv.FormatInt(o.lease.Milliseconds(), 10)
		cfg.RuntimeParams["idle_session_timeout"] = ms
		cfg.RuntimeParams["idle_in_transaction_session_timeout"] = ms
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect: %w", redactErr(err, connString))
	}
	w := &writer{cfg: cfg, conn: conn, name: name, pid: conn.PgConn().PID(), deposed: make(chan struct{})}
	ok := false
	defer func() {
		if !ok {
			conn.Close(context.Background())
		}
	}()
	var schema *string
	if err := conn.QueryRow(ctx, `SELECT current_schema(), (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid())`).Scan(&schema, &w.started); err != nil {
		return nil, fmt.Errorf("read the current schema: %w", err)
	}
	if schema == nil {
		return nil, errors.New("no schema of the search_path exists; create it, or fix search_path")
	}
	w.schema = *schema
	w.objid = schemaObjID(w.schema)
	if o.wait {
		// A standby waits in the database's lock queue: it is granted the
		// lock the moment the leader's session ends, whatever ended it.
		if _, err := conn.Exec(ctx, `SELECT pg_advisory_lock($1, $2)`, lockClass, w.objid); err != nil {
			return nil, fmt.Errorf("wait for the store's lock: %w", err)
		}
	} else {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1, $2)`, lockClass, w.objid).Scan(&got); err != nil {
			return nil, fmt.Errorf("take the store's lock: %w", err)
		}
		if !got {
			return nil, fmt.Errorf("%w: %s", store.ErrLocked, holder(ctx, conn, w.objid))
		}
	}
	if err := migrate(ctx, conn); err != nil {
		return nil, err
	}
	if err := takeEpoch(ctx, conn, w, cfg.RuntimeParams["application_name"], o.advertise); err != nil {
		return nil, err
	}
	ok = true
	return w, nil
}

// takeEpoch takes the next owner epoch, under the lock, and records who
// holds it and where it serves. In the same transaction it moves the event
// log's fence (event_owner) to the new epoch: that waits for an append of
// a deposed owner still in flight, and refuses every later one.
func takeEpoch(ctx context.Context, conn *pgx.Conn, w *writer, app, advertise string) error {
	tx, err := conn.Begin(ctx)
	if err != nil {
		return fmt.Errorf("take the next owner epoch: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit it does nothing
	// The previous owner's last batch is final (its session, and so its
	// transactions, ended before this one got the lock); keep it for that
	// owner's outcome.
	if _, err := tx.Exec(ctx, `INSERT INTO owner_history (epoch, last_batch) SELECT epoch, last_batch FROM owner WHERE id = 1
		ON CONFLICT (epoch) DO UPDATE SET last_batch = excluded.last_batch`); err != nil {
		return fmt.Errorf("keep the previous owner's last batch: %w", err)
	}
	if err := tx.QueryRow(ctx, `INSERT INTO owner (id, epoch, holder, since, last_batch, advertise)
		VALUES (1, 1, $1, now(), 0, $2)
		ON CONFLICT (id) DO UPDATE SET epoch = owner.epoch + 1, holder = excluded.holder, since = excluded.since, last_batch = 0, advertise = excluded.advertise
		RETURNING epoch`, app, advertise).Scan(&w.epoch); err != nil {
		return fmt.Errorf("take the next owner epoch: %w", err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO event_owner (id, epoch) VALUES (1, $1) ON CONFLICT (id) DO UPDATE SET epoch = excluded.epoch`, w.epoch); err != nil {
		return fmt.Errorf("fence the event log: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("take the next owner epoch: %w", err)
	}
	return nil
}

// schemaObjID is the second key of the advisory lock of the store in
// schema: a hash of its name.
func schemaObjID(schema string) int32 {
	h := fnv.New32a()
	h.Write([]byte(schema))
	return int32(h.Sum32() & 0x7fffffff)
}

// holder describes who holds the lock, as far as this user may see.
func holder(ctx context.Context, conn *pgx.Conn, objid int32) string {
	var pid int32
	var app, addr string
	var since time.Time
	err := conn.QueryRow(ctx, `SELECT l.pid, COALESCE(a.application_name, ''), COALESCE(host(a.client_addr), 'a local socket'), COALESCE(a.backend_start, now())
		FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid
		WHERE l.locktype = 'advisory' AND l.granted AND l.classid = $1::int::oid AND l.objid = $2::int::oid AND l.objsubid = 2
		AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`, lockClass, objid).Scan(&pid, &app, &addr, &since)
	if err != nil {
		return "another connection holds its lock"
	}
	who := fmt.Sprintf("held by server process %d", pid)
	if app != "" {
		who += ", " + app
	}
	return fmt.Sprintf("%s, connected from %s since %s", who, addr, since.UTC().Format(time.RFC3339))
}

// close releases the lock and the connection for good.
func (w *writer) close() error {
	if w.conn == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Unlock explicitly: the server drops the lock when the backend exits,
	// but that may come a moment after Close returns, and the next Open
	// must find the store free.
	_, err := w.conn.Exec(ctx, `SELECT pg_advisory_unlock($1, $2)`, lockClass, w.objid)
	if cerr := w.conn.Close(ctx); err == nil {
		err = cerr
	}
	w.conn = nil
	return err
}

// lose gives the connection up for good: from now on every commit fails
// with ErrDeposed.
func (w *writer) lose(why error) {
	if w.conn != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		w.conn.Close(ctx) //nolint:errcheck // it is broken already
		cancel()
		w.conn = nil
	}
	if w.lost == nil {
		w.lost = fmt.Errorf("%w: %v", ErrDeposed, why)
		if w.deposed != nil {
			close(w.deposed)
		}
	}
}

// outcome finds out, after the connection broke during the commit of batch,
// whether that commit was applied. It connects afresh (without taking the
// lock: it only reads), ends the old backend if it still runs, so that its
// transaction is over one way or the other, and reads our epoch's last
// batch, from the owner row or, once another server took the store over,
// from owner_history: the batch was applied if and only if that is at
// least batch's number. While the database does not answer (it may be
// restarting) it tries again, for up to outcomeTimeout, or up to
// outcomeRecoveryTimeout while it answers that it is starting up; it reports an
// error when it cannot tell.
func (w *writer) outcome(batch int64) (applied bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), outcomeRecoveryTimeout)
	defer cancel()
	// The database may be restarting: try again until it answers, for
	// outcomeTimeout, or longer while it says it is starting up.
	var conn *pgx.Conn
	for begun := time.Now(); ; {
		// One try may not outlast outcomeTimeout by much: a database
		// that does not answer at all is not given the longer bound.
		tctx, tcancel := context.WithTimeout(ctx, max(time.Until(begun.Add(outcomeTimeout)), 5*time.Second))
		var err error
		conn, err = pgx.ConnectConfig(tctx, w.cfg)
		tcancel()
		if err == nil {
			break
		}
		if ctx.Err() != nil || (time.Since(begun) > outcomeTimeout && !startingUp(err)) {
			return false, fmt.Errorf("reconnect to learn the outcome, for %v: %w", time.Since(begun).Round(time.Second), err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	defer conn.Close(context.Background())
	for {
		var alive bool
		if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2)`, int32(w.pid), w.started).Scan(&alive); err != nil {
			return false, fmt.Errorf("look for the old connection's server process: %w", err)
		}
		if !alive {
			break
		}
		if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE pid = $1 AND backend_start = $2`, int32(w.pid), w.started); err != nil {
			return false, fmt.Errorf("end the old connection's server process %d: %w", w.pid, err)
		}
		select {
		case <-ctx.Done():
			return false, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	// Our epoch's last batch: in the owner row while no one took over,
	// in owner_history once someone did (takeEpoch moves it there in the
	// transaction that resets the row, so one of the two holds it).
	var last int64
	err = conn.QueryRow(ctx, `SELECT COALESCE((SELECT last_batch FROM owner WHERE id = 1 AND epoch = $1),
		(SELECT last_batch FROM owner_history WHERE epoch = $1), -1)`, w.epoch).Scan(&last)
	if err != nil {
		return false, fmt.Errorf("read the owner row: %w", err)
	}
	return last >= batch, nil
}

// isFenceError reports whether err is qshare_fence's refusal.
func isFenceError(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "55P03" && strings.HasPrefix(pe.Message, "qshare:")
}
