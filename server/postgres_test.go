package server

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"qshare/internal/longtest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/aws/smithy-go"
	"github.com/jackc/pgx/v5"

	"qshare/auth"
	"qshare/internal/batchclient"
	"qshare/postgres/postgrestest"
)

// The tests of qshare serve on PostgreSQL share one throwaway server
// (postgrestest), started by the first test that needs it and stopped by
// TestMain; without PostgreSQL they skip.
var pg postgrestest.Lazy

// TestMain stops the PostgreSQL server, if a test started one.
func TestMain(m *testing.M) {
	// The long tests mostly wait on a binary or a database of their own.
	longtest.MinParallel(6)
	code := m.Run()
	pg.Stop()
	os.Exit(code)
}

// postgresDB returns the URL of a new database on the shared server.
func postgresDB(t *testing.T) string { return pg.Database(t) }

// TestServePostgres runs qshare serve --store postgres://...: the listening
// line names the store and the role; a second server on the same database
// stands by (/readyz 503) and forwards the API to the leader; when the
// leader's database session is cut, the standby takes the store over with
// what the first one stored, and the old leader stands by and forwards.
func TestServePostgres(t *testing.T) {
	t.Parallel()
	db := postgresDB(t)
	s := testServeSettings(t)
	s.Store = db
	s.Guard.AllowHosts = "127.0.0.1" // the Host a standby forwards
	a := serveInProcess(t, s)
	if line := a.out.String(); !strings.Contains(line, ", store postgres://qshare@") || !strings.Contains(line, ", leader)") {
		t.Errorf("the listening line does not name the store and the role: %q", line)
	}
	aAddr := addrOf(t, a.out.String())
	c := serveClient(aAddr)
	ctx := context.Background()
	if _, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("kept"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}}); err != nil {
		t.Fatal(err)
	}

	s2 := testServeSettings(t)
	s2.Store = db
	s2.Guard.AllowHosts = "127.0.0.1"
	b := serveInProcess(t, s2)
	if line := b.out.String(); !strings.Contains(line, ", standby)") {
		t.Errorf("the second server's listening line does not say it stands by: %q", line)
	}
	bAddr := addrOf(t, b.out.String())
	if code := readyz(t, bAddr); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz on the standby = %d, want 503", code)
	}
	if code := readyz(t, aAddr); code != http.StatusOK {
		t.Errorf("GET /readyz on the leader = %d, want 200", code)
	}
	listsKept := func(via string) {
		t.Helper()
		out, err := serveClient(via).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
		if err != nil {
			t.Fatal(err)
		}
		if len(out.SchedulingPolicies) != 1 || !strings.HasSuffix(aws.ToString(out.SchedulingPolicies[0].Arn), "/kept") {
			t.Fatalf("through %s the server lists %+v, want the policy kept", via, out.SchedulingPolicies)
		}
	}
	listsKept(bAddr) // forwarded to the leader

	// Cut the leader's database session: it steps down and stands by,
	// and the standby leads.
	conn, err := pgx.Connect(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, `SELECT pg_terminate_backend(pid, 5000) FROM pg_locks WHERE locktype = 'advisory' AND granted
		AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`); err != nil {
		t.Fatal(err)
	}
	// The old leader's next probe proves its ownership, fails, and says
	// so, even before its heartbeat finds out (past the 100 ms in which a
	// proof stands).
	time.Sleep(150 * time.Millisecond)
	if code := readyz(t, aAddr); code != http.StatusServiceUnavailable {
		t.Errorf("GET /readyz on the leader whose session was just cut = %d, want 503", code)
	}
	waitReady := func(addr string, want int, what string) {
		t.Helper()
		deadline := time.Now().Add(20 * time.Second)
		for readyz(t, addr) != want {
			if time.Now().After(deadline) {
				t.Fatalf("%s: /readyz is not %d after 20 s", what, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitReady(bAddr, http.StatusOK, "the standby, once the leader's session was cut")
	waitReady(aAddr, http.StatusServiceUnavailable, "the old leader, once its session was cut")
	// The old leader forwards to the new one once it has stepped down:
	// until then it answers 503 "stepping down" (its /readyz said 503 from
	// the cut on), which the SDK's three quick retries can outlast on a
	// loaded machine, so wait for the forwarding before checking it.
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := serveClient(aAddr).ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
		if err == nil || !strings.Contains(err.Error(), "stepping down") || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	listsKept(aAddr)
	a.stop(t)
	listsKept(bAddr)
}

// TestServeStandbyReadyzNamesNoStore: /readyz answers unsigned, even with
// --auth, so a standby's answer says that it stands by without naming the
// store: its URL is the operator's, and one with a password in its query
// string (which libpq and pgx take, and url.URL.Redacted leaves) would give
// the password to whoever asks.
func TestServeStandbyReadyzNamesNoStore(t *testing.T) {
	db := postgresDB(t) + "&password=probe-secret"
	s := testServeSettings(t)
	s.Store = db
	serveInProcess(t, s)
	s2 := testServeSettings(t)
	s2.Store = db
	b := serveInProcess(t, s2)
	resp, err := http.Get(addrOf(t, b.out.String()) + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(string(body), "standby") || strings.Contains(string(body), "probe-secret") || strings.Contains(string(body), "postgres://") {
		t.Fatalf("GET /readyz on a standby: %d %q, want 503 saying it stands by, without the store's URL", resp.StatusCode, body)
	}
}

// readyz returns the status of GET /readyz at addr (http://HOST:PORT).
func readyz(t *testing.T, addr string) int {
	t.Helper()
	resp, err := http.Get(addr + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
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

// TestServeLeaderSettingsRefused: a bad --leader-lease or --advertise-addr
// is refused before the store is touched, with a message that names the
// flag.
func TestServeLeaderSettingsRefused(t *testing.T) {
	for _, tc := range []struct {
		lease, advertise, want string
	}{
		{"abc", "", "--leader-lease"},
		{"500ms", "", "--leader-lease"},
		{"-5s", "", "--leader-lease"},
		{"5s", "10.0.0.5:8750", "--advertise-addr"},
		{"5s", "ftp://10.0.0.5:8750", "--advertise-addr"},
		{"5s", "http://10.0.0.5:8750/some/path", "--advertise-addr"},
		{"5s", "http://", "--advertise-addr"},
	} {
		s := testServeSettings(t)
		s.Store = "postgres://qshare@127.0.0.1:1/nowhere?sslmode=disable" // never reached
		s.LeaderLease, s.AdvertiseAddr = tc.lease, tc.advertise
		err := serveOnce(t, s)
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("lease %q, advertise %q: %v; want an error about %s", tc.lease, tc.advertise, err, tc.want)
		}
	}
}

// TestServePostgresSignedThroughStandby: with authentication on, a request
// signed for the standby's address (SigV4 signs the Host) is forwarded
// with its Host unchanged and verified again by the leader (which has
// authentication on too, and would refuse a changed Host); one signed with
// a wrong secret is refused (by the standby's own guard, before forwarding).
func TestServePostgresSignedThroughStandby(t *testing.T) {
	db := postgresDB(t)
	k, err := auth.NewKey()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "auth.yaml")
	if err := os.WriteFile(file, []byte("principals: [{name: ops, accessKeys: [{id: "+k.ID+", secret: \""+k.Secret+"\"}], policies: [all]}]\n"+
		"policies: {all: {Version: \"2012-10-17\", Statement: [{Effect: Allow, Action: \"batch:*\", Resource: \"*\"}]}}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() string {
		s := testServeSettings(t)
		s.Store, s.Guard.AllowHosts, s.Guard.Auth = db, "127.0.0.1", file
		return addrOf(t, serveInProcess(t, s).out.String())
	}
	start() // the leader
	standby := start()
	ctx := context.Background()
	signed := func(secret string) error {
		c := batchclient.NewSigned(standby, "us-east-1", credentials.NewStaticCredentialsProvider(k.ID, secret, ""), nil, batchclient.NoRetry)
		_, err := c.ListSchedulingPolicies(ctx, &batch.ListSchedulingPoliciesInput{})
		return err
	}
	if err := signed(k.Secret); err != nil {
		t.Fatalf("a signed request through the standby: %v", err)
	}
	var ae smithy.APIError
	if err := signed("not-the-secret"); !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Fatalf("a request with a bad signature through the standby: %v, want InvalidSignatureException", err)
	}
}
