package main

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/jackc/pgx/v5"

	"qshare/internal/longtest"
	"qshare/internal/serveproc"
	"qshare/postgres/postgrestest"
)

// The tests of qshare's commands on PostgreSQL share one throwaway server
// (postgrestest), started by the first test that needs it and stopped by
// TestMain; without PostgreSQL they skip.
var pg postgrestest.Lazy

// TestMain stops the PostgreSQL server, if a test started one.
func TestMain(m *testing.M) {
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// TestBenchSubmitStore: bench submit --store runs its temporary server on
// the store given: the jobs it submitted are in that PostgreSQL database
// (a run whose figures said PostgreSQL once measured SQLite, because the
// option did not reach the server). It checks the measuring tool and
// starts a PostgreSQL server for it alone (initdb and a start, the
// costliest processes on the slower 2-core machines), so it runs where
// the long scenarios do.
func TestBenchSubmitStore(t *testing.T) {
	longtest.Only(t, "bench submit --store against a PostgreSQL server of its own; the README's command runs qshare serve on PostgreSQL in server's tests")
	t.Parallel() // a database and a binary of its own, mostly waiting on them; with the package's other long tests
	db := pg.Database(t)
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "bench", "submit", "--store", db, "--clients", "4",
		"--duration", "300ms", "--warmup", "0s", "--latency-jobs", "0", "--json").CombinedOutput()
	if err != nil {
		t.Fatalf("bench submit --store: %v\n%s", err, out)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM jobs`).Scan(&n); err != nil || n == 0 {
		t.Fatalf("jobs in the --store database: %d (%v), want the benchmark's submits", n, err)
	}
}
