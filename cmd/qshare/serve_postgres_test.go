package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/postgres/postgrestest"
	"qshare/store"
)

// The tests of qshare serve on PostgreSQL share one throwaway server
// (postgrestest), started by the first test that needs it and stopped by
// TestMain; without PostgreSQL they skip.
var (
	pgOnce sync.Once
	pgSrv  *postgrestest.Server
	pgErr  error
)

// TestMain stops the PostgreSQL server, if a test started one.
func TestMain(m *testing.M) {
	code := m.Run()
	if pgSrv != nil {
		pgSrv.Stop()
	}
	os.Exit(code)
}

// postgresDB returns the URL of a new database on the shared server.
func postgresDB(t *testing.T) string {
	t.Helper()
	pgOnce.Do(func() { pgSrv, pgErr = postgrestest.Start() })
	if errors.Is(pgErr, postgrestest.ErrNotInstalled) {
		t.Skip(pgErr)
	}
	if pgErr != nil {
		t.Fatal(pgErr)
	}
	u, err := pgSrv.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// TestServePostgres runs qshare serve --store postgres://...: what it
// stores survives a restart, a second server on the same database is
// refused while the first runs, and the listening line names the store.
func TestServePostgres(t *testing.T) {
	db := postgresDB(t)
	s := testServeSettings(t)
	s.Store = db
	a := serveInProcess(t, s)
	if line := a.out.String(); !strings.Contains(line, ", store postgres://qshare@") {
		t.Errorf("the listening line does not name the store: %q", line)
	}
	c := serveClient(addrOf(t, a.out.String()))
	ctx := context.Background()
	if _, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("kept"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}}); err != nil {
		t.Fatal(err)
	}

	s2 := testServeSettings(t)
	s2.Store = db
	if err := serveOnce(t, s2); !errors.Is(err, store.ErrLocked) || !strings.Contains(err.Error(), "in use by another qshare server") {
		t.Errorf("a second server on the same database: %v; want store.ErrLocked", err)
	}
	a.stop(t)

	b := serveInProcess(t, s2)
	c = serveClient(addrOf(t, b.out.String()))
	out, err := c.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.SchedulingPolicies) != 1 || !strings.HasSuffix(aws.ToString(out.SchedulingPolicies[0].Arn), "/kept") {
		t.Fatalf("after a restart the server lists %+v, want the policy kept", out.SchedulingPolicies)
	}
}

// addrOf returns the address of a listening line.
func addrOf(t *testing.T, line string) string {
	t.Helper()
	m := regexp.MustCompile(`listening on (http://\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("no listening line in %q", line)
	}
	return m[1]
}
