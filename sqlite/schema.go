package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"
)

// migrations are the schema changes, in order: migrations[i] brings the
// schema from version i to version i+1. Never edit one that has shipped;
// append a new one.
//
// Every record is kept whole as JSON in the data column (the domain types
// carry JSON tags), except a job's payload, which has a column of its own
// (migration 3). The other columns are its key and what queries need: jobs
// keep their queue, share, status and creation time beside the JSON.
var migrations = []string{
	// 1: the first schema.
	`CREATE TABLE environments (
		name TEXT PRIMARY KEY,
		data TEXT NOT NULL
	) STRICT;
	CREATE TABLE policies (
		name TEXT PRIMARY KEY,
		data TEXT NOT NULL
	) STRICT;
	CREATE TABLE queues (
		name TEXT PRIMARY KEY,
		data TEXT NOT NULL
	) STRICT;
	CREATE TABLE shares (
		queue TEXT NOT NULL,
		name  TEXT NOT NULL,
		data  TEXT NOT NULL,
		PRIMARY KEY (queue, name)
	) STRICT;
	CREATE TABLE jobs (
		id         TEXT PRIMARY KEY,
		queue      TEXT NOT NULL,
		share      TEXT NOT NULL,
		status     TEXT NOT NULL,
		created_at TEXT NOT NULL,  -- fixed-width UTC, sorts like the time
		version    INTEGER NOT NULL,
		data       TEXT NOT NULL
	) STRICT;
	CREATE INDEX jobs_by_created ON jobs (created_at, id);
	CREATE INDEX jobs_by_queue ON jobs (queue, share, status);`,
	// 2: no query used jobs_by_queue, and every job change (four or more
	// per job: SCHEDULED, STARTING, RUNNING, its end) moved the job's
	// entry in it, since the status is one of its columns.
	`DROP INDEX IF EXISTS jobs_by_queue;`,
	// 3: a job's payload (the SageMaker request, itself JSON) gets a column
	// of its own, kept as the raw text. In the data column it was a JSON
	// string, escaped again (every quote) at each of the four or more
	// writes of a job: the most expensive part of encoding a job, and about
	// a tenth of its bytes.
	`ALTER TABLE jobs ADD COLUMN payload TEXT NOT NULL DEFAULT '';
	UPDATE jobs SET payload = json_extract(data, '$.payload'), data = json_remove(data, '$.payload')
		WHERE json_type(data, '$.payload') = 'text';`,
	// 4: capacity plans (issue 21), keyed by name like the other
	// resources.
	`CREATE TABLE plans (
		name TEXT PRIMARY KEY,
		data TEXT NOT NULL
	) STRICT;`,
}

// migrate creates the schema_version table if needed and applies the
// migrations the database has not seen, each in its own transaction. It
// refuses a database written by a newer qshare.
func (d *DB) migrate(ctx context.Context) error {
	c, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := c.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_version (
		version    INTEGER PRIMARY KEY,
		applied_at TEXT NOT NULL
	) STRICT`); err != nil {
		return fmt.Errorf("create schema_version table (is the data directory writable?): %w", err)
	}
	for {
		done, err := d.migrateOne(ctx, c)
		if err != nil || done {
			return err
		}
	}
}

// migrateOne applies the next migration, if any, in one transaction, and
// reports whether the schema was already current.
func (d *DB) migrateOne(ctx context.Context, c *sql.Conn) (done bool, err error) {
	if _, err := c.ExecContext(ctx, `BEGIN IMMEDIATE`); err != nil {
		return false, fmt.Errorf("migrate schema: %w", err)
	}
	defer func() {
		if err != nil {
			c.ExecContext(context.Background(), `ROLLBACK`) //nolint:errcheck // best effort; the error is err
		}
	}()
	var v int
	if err := c.QueryRowContext(ctx, `SELECT COALESCE(MAX(version), 0) FROM schema_version`).Scan(&v); err != nil {
		return false, fmt.Errorf("read schema version: %w", err)
	}
	if v > len(migrations) {
		return false, fmt.Errorf("the database has schema version %d but this qshare knows only up to %d; run a newer qshare or use another data directory", v, len(migrations))
	}
	if v == len(migrations) {
		_, err := c.ExecContext(ctx, `COMMIT`)
		return true, err
	}
	if _, err := c.ExecContext(ctx, migrations[v]); err != nil {
		return false, fmt.Errorf("migrate schema to version %d: %w", v+1, err)
	}
	if _, err := c.ExecContext(ctx, `INSERT INTO schema_version (version, applied_at) VALUES (?, ?)`,
		v+1, time.Now().UTC().Format(time.RFC3339Nano)); err != nil {
		return false, fmt.Errorf("record schema version %d: %w", v+1, err)
	}
	if _, err := c.ExecContext(ctx, `COMMIT`); err != nil {
		return false, fmt.Errorf("commit schema version %d: %w", v+1, err)
	}
	return false, nil
}
