package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// migrations are the schema changes, in order: migrations[i] brings the
// schema from version i to version i+1. Never edit one that has shipped;
// append a new one. Open applies them on the owner's connection, after it
// took the lock, so two servers never migrate at once.
//
// Every record is kept whole as JSON text in the data column (text, not
// jsonb: jsonb would reorder keys and normalise numbers, and the store gives
// back what it was given), except a job's payload, which has a bytea column
// of its own, kept byte for byte (the daemon's payload is JSON, but the
// store does not rely on it). Keys use the "C" collation, so that records
// sort by their bytes, as Go compares strings, whatever the database's
// locale; created_at is a fixed-width UTC text whose byte order is the
// order of the instants, to the nanosecond (timestamptz keeps microseconds).
//
// The owner table holds one row: the epoch of the server that owns the
// store, one more at each Open, and the last batch it committed. Every
// commit updates it in its transaction through qshare_fence, which fails
// unless the writing connection holds the store's advisory lock and the
// epoch is still its own (lock.go).
var migrations = []string{
	// 1: the first schema.
	`CREATE TABLE environments (
		name text COLLATE "C" PRIMARY KEY,
		data text NOT NULL
	);
	CREATE TABLE policies (
		name text COLLATE "C" PRIMARY KEY,
		data text NOT NULL
	);
	CREATE TABLE queues (
		name text COLLATE "C" PRIMARY KEY,
		data text NOT NULL
	);
	CREATE TABLE shares (
		queue text COLLATE "C" NOT NULL,
		name  text COLLATE "C" NOT NULL,
		data  text NOT NULL,
		PRIMARY KEY (queue, name)
	);
	CREATE TABLE jobs (
		id         text COLLATE "C" PRIMARY KEY,
		queue      text NOT NULL,
		share      text NOT NULL,
		status     text NOT NULL,
		created_at text COLLATE "C" NOT NULL,
		version    bigint NOT NULL,
		data       text NOT NULL,
		payload    bytea NOT NULL
	);
	CREATE INDEX jobs_by_created ON jobs (created_at, id);
	CREATE TABLE owner (
		id         int PRIMARY KEY CHECK (id = 1),
		epoch      bigint NOT NULL,
		holder     text NOT NULL,
		since      timestamptz NOT NULL,
		last_batch bigint NOT NULL
	);
	CREATE FUNCTION qshare_fence(lock_class int, lock_obj int, owner_epoch bigint, batch bigint) RETURNS void
	LANGUAGE plpgsql AS $$
	BEGIN
		IF NOT EXISTS (SELECT 1 FROM pg_locks
			WHERE locktype = 'advisory' AND pid = pg_backend_pid() AND granted
			AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
			AND classid = lock_class::oid AND objid = lock_obj::oid AND objsubid = 2) THEN
			RAISE EXCEPTION 'qshare: this connection does not hold the store''s lock' USING ERRCODE = '55P03';
		END IF;
		UPDATE owner SET last_batch = batch WHERE id = 1 AND epoch = owner_epoch;
		IF NOT FOUND THEN
			RAISE EXCEPTION 'qshare: another server has taken the store over (the owner epoch is no longer %)', owner_epoch USING ERRCODE = '55P03';
		END IF;
	END
	$$;`,
	// 2: several servers on one store (leader.go, events.go). The owner
	// row says where the leader serves its API, for standbys to forward
	// to; the capacity event log lives in the store, one row per batch,
	// fenced by event_owner, which Open sets to its epoch.
	`ALTER TABLE owner ADD COLUMN advertise text NOT NULL DEFAULT '';
	CREATE TABLE event_owner (
		id    int PRIMARY KEY CHECK (id = 1),
		epoch bigint NOT NULL
	);
	CREATE TABLE events (
		seq   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
		batch bytea NOT NULL
	);`,
	// 3: capacity plans (issue 21), keyed by name like the other
	// resources.
	`CREATE TABLE plans (
		name text COLLATE "C" PRIMARY KEY,
		data text NOT NULL
	);`,
	// 4: the last batch of every past owner epoch, which takeEpoch keeps
	// before it resets the owner row, so that a writer whose connection
	// broke during a commit can still learn that commit's outcome after a
	// standby took over (writer.outcome). One row per takeover.
	`CREATE TABLE owner_history (
		epoch      bigint PRIMARY KEY,
		last_batch bigint NOT NULL
	);`,
}

// migrate creates the schema_version table if needed and applies the
// migrations the database has not seen, each in its own transaction. It
// refuses a database written by a newer qshare.
func migrate(ctx context.Context, c *pgx.Conn) error {
	if _, err := c.Exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    int PRIMARY KEY,
		applied_at timestamptz NOT NULL
	)`); err != nil {
		return fmt.Errorf("create the schema_version table (may this user create tables in the schema?): %w", err)
	}
	for {
		done, err := migrateOne(ctx, c)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration, if any, in one transaction, and
// reports whether the schema was already current.
func migrateOne(ctx context.Context, c *pgx.Conn) (done bool, err error) {
	tx, err := c.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("migrate schema: %w", err)
	}
	defer tx.Rollback(context.Background()) //nolint:errcheck // after Commit it does nothing
	var v int
	if err := tx.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return false, fmt.Errorf("the database has schema version %d but this qshare knows only up to %d; run a newer qshare or use another database", v, len(migrations))
	}
	if v == len(migrations) {
		return true, tx.Commit(ctx)
	}
	if _, err := tx.Exec(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migrate schema to version %d: %w", v+1, err)
	}
	if _, err := tx.Exec(ctx, `INSERT INTO schema_version (version, applied_at) VALUES ($1, now())`, v+1); err != nil {
		return false, fmt.Errorf("record schema version %d: %w", v+1, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit schema version %d: %w", v+1, err)
	}
	return false, nil
}
