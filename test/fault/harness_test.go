// Package fault injects faults into the real qshare binary: kill -9 at
// random moments under a mixed workload, a store that cannot write, jobs and
// clients that misbehave. It builds the binary once (TestMain), runs it as
// a server on a loopback port with the process executor, and checks what a
// user would check: every acknowledged request took effect, no job ran two
// attempts at once, every job ended as it should, and the server's capacity
// event log (serve --events) keeps the scheduler's guarantees.
//
// Each test has servers, data directories, ports and (on PostgreSQL) a
// database of its own, and mostly waits on them, so the tests run in
// parallel, six at once (longtest.MinParallel: go test starts the
// waiting tests in no set order, and with four slots the long ones often
// waited for others); TestPostgresRestart,
// which restarts the PostgreSQL server all of them share, and
// TestPostgresDiskFull, whose check of the event log is the most
// sensitive to a loaded machine, run alone before them (go test runs the
// sequential tests first), in .ci/run's long step only (QSHARE_LONG=1):
// alone, they held the README's command half a minute.
package fault

import (
	"context"
	"flag"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/api"
	"qshare/daemon"
	"qshare/internal/batchclient"
	"qshare/internal/longtest"
	"qshare/internal/serveproc"
	"qshare/sqlite"
)

// bin is the qshare binary TestMain built.
var bin string

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	longtest.MinParallel(6)
	code := serveproc.WithBinary("qshare-faulttest-", &bin, m.Run)
	pg.Stop() // started by the first test on PostgreSQL (ha_test.go)
	os.Exit(code)
}

func needBinary(t *testing.T) {
	t.Helper()
	if testing.Short() || bin == "" {
		t.Skip("runs the real binary; not in -short")
	}
}

// parallelBinary is needBinary for a test that runs in parallel with the
// package's others (all but two; see the package doc).
func parallelBinary(t *testing.T) {
	t.Helper()
	needBinary(t)
	t.Parallel()
}

// startServer runs qshare serve on a free loopback port over dataDir, with
// the process executor and fake GPUs, and returns once it listens. Extra
// arguments follow the defaults, so they override them. What the server
// prints is appended to dataDir's name + ".stderr", across restarts, and
// its end is in the test's log when it does not come up. Stop sends
// SIGTERM, and SIGKILL 20 s later.
func startServer(t testing.TB, dataDir string, args ...string) *serveproc.Server {
	t.Helper()
	logf, err := os.OpenFile(filepath.Join(filepath.Dir(dataDir), filepath.Base(dataDir)+".stderr"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := serveproc.Start(context.Background(), serveproc.Options{Binary: bin, DataDir: dataDir,
		Args:   append([]string{"--executor", "process", "--gpus", "0,1,2,3,4,5,6,7", "--log-level", "warn", "--stop-grace", "1s"}, args...),
		Output: logf, StopSignal: syscall.SIGTERM, StopWait: 20 * time.Second})
	if err != nil {
		logf.Close()
		t.Fatalf("%v\n(the whole output is in %s)", err, logf.Name())
	}
	t.Cleanup(func() {
		srv.Kill()
		logf.Close()
	})
	return srv
}

// openDB opens the SQLite store of dir, closed when the test ends.
func openDB(t testing.TB, dir string) *sqlite.DB {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// serveInProcess runs a daemon with cfg (its logs discarded) behind the API
// on a loopback port, for the tests that reach inside the server (a log
// cap, a store that fails), and returns the server's URL and the daemon
// (which a test may close early; closing again is harmless). The daemon and
// the listener stop when the test ends, before what cfg holds is closed.
func serveInProcess(t testing.TB, cfg daemon.Config) (string, *daemon.Daemon) {
	t.Helper()
	cfg.Logger = slog.New(slog.DiscardHandler)
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	srv := httptest.NewServer(api.New(d, cfg.Logger))
	t.Cleanup(srv.Close)
	return srv.URL, d
}

// client returns an SDK client of the server that does not retry, so that
// every answer the test sees is the answer to one request.
func client(url string) *batch.Client {
	return batchclient.New(url, "us-east-1", batchclient.NoRetry)
}

// runQshare runs the binary with args and returns its combined output.
func runQshare(t testing.TB, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	return string(out), err
}

// applyConfig applies a configuration file to the server at url.
func applyConfig(t testing.TB, url, yaml string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := runQshare(t, "apply", "-f", path, "--endpoint", url)
	if err != nil {
		t.Fatalf("qshare apply: %v\n%s", err, out)
	}
	return path
}
