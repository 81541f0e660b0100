package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"testing"

	"qshare/internal/longtest"
	"qshare/postgres/postgrestest"
)

// srv is the PostgreSQL server of this test binary, or nil when PostgreSQL
// is not installed (skipWhy says so).
var (
	srv     *postgrestest.Server
	skipWhy string
)

// TestMain starts a throwaway PostgreSQL (postgrestest) for the tests and stops
// it at the end, whatever the tests did; a child process that storetest
// starts finds its parent's server in the environment and uses it. Each
// random case of storetest's RandomChanges empties the store and commits
// and loads up to 12 times through the server: rapid's 100 cases took
// 48 s of the package's 176 s on a loaded 2-core machine, so it tries 20
// here (longtest.RapidChecks; the SQLite store's tests try the 100, and
// so does .ci/run's QSHARE_LONG=1 step here).
//
// The tests that call t.Parallel, each on a database of its own (newDB),
// run four at once (longtest.MinParallel): they mostly wait on the
// server, on leases and on cut connections, about 3 s each and 50 s one
// after the other on a loaded 2-core machine. TestStore's cases (which
// start child processes that crash) are among them, and so is
// TestDurableAcrossDatabaseCrash, which crashes a server of its own.
func TestMain(m *testing.M) {
	longtest.RapidChecks(20)
	longtest.MinParallel(4)
	if u := os.Getenv(postgrestest.URLEnv); u != "" {
		srv = postgrestest.Attach(u)
		os.Exit(m.Run())
	}
	s, err := postgrestest.Start()
	if errors.Is(err, postgrestest.ErrNotInstalled) {
		skipWhy = err.Error()
		os.Exit(m.Run())
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "postgres tests: cannot start PostgreSQL:", err)
		os.Exit(1)
	}
	srv = s
	os.Setenv(postgrestest.URLEnv, s.URL())
	code := m.Run()
	s.Stop()
	os.Exit(code)
}

// newDB returns the URL of a new, empty database, skipping t (a test or a
// benchmark) when there is no PostgreSQL.
func newDB(t testing.TB) string {
	t.Helper()
	if srv == nil {
		t.Skip(skipWhy)
	}
	u, err := srv.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}
