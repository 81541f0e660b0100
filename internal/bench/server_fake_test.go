package bench

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/internal/serveproc"
)

// fakeServe is a `qshare serve` in sh: it prints its arguments and the one
// QSHARE_* setting it looks at, says where it listens, and then, as
// FAKE_SERVE says, exits 0 on SIGTERM, dies on its own, or exits before it
// listens.
const fakeServe = `#!/bin/sh
echo "args $*" >&2
echo "env QSHARE_LOG_LEVEL=${QSHARE_LOG_LEVEL-unset}" >&2
if [ "$FAKE_SERVE" = exit ]; then echo "cannot open the store" >&2; exit 1; fi
trap 'echo "got TERM" >&2; exit 0' TERM
echo "qshare: listening on http://127.0.0.1:1 (executor x, data in y)"
if [ "$FAKE_SERVE" = die ]; then sleep 0.3; echo "the store is lost" >&2; exit 3; fi
sleep 60 &
wait
`

// fakeServer writes fakeServe to a file, points the temporary directory
// (where StartServer makes its own) at an empty one, and returns both.
func fakeServer(t *testing.T, mode string) (bin, tmp string) {
	t.Helper()
	bin = filepath.Join(t.TempDir(), "qshare")
	if err := serveproc.WriteExecutable(bin, []byte(fakeServe)); err != nil {
		t.Fatal(err)
	}
	tmp = t.TempDir()
	t.Setenv("TMPDIR", tmp)
	t.Setenv("FAKE_SERVE", mode)
	return bin, tmp
}

func TestStartServerAndClose(t *testing.T) {
	bin, tmp := fakeServer(t, "serve")
	t.Setenv("QSHARE_LOG_LEVEL", "debug")
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := StartServer(ctx, ServerOptions{Binary: bin, Executor: "simulated", MaxSharesPerQueue: 3, Args: []string{"--events", "ev"}})
	if err != nil {
		t.Fatal(err)
	}
	// The server is the benchmark's until Close, whatever becomes of the
	// context it was started with.
	cancel()
	time.Sleep(200 * time.Millisecond)
	if err := srv.Alive(); err != nil {
		t.Fatalf("the server went with its start context: %v", err)
	}
	if srv.Endpoint != "http://127.0.0.1:1" || srv.Pid() <= 0 {
		t.Errorf("endpoint %q, pid %d", srv.Endpoint, srv.Pid())
	}
	dir := filepath.Dir(srv.DataDir)
	if filepath.Dir(dir) != tmp || !strings.HasPrefix(filepath.Base(dir), "qshare-bench-") {
		t.Errorf("data directory %s is not in a fresh temporary directory under %s", srv.DataDir, tmp)
	}
	if fi, err := os.Stat(srv.DataDir); err != nil || !fi.IsDir() {
		t.Errorf("no data directory: %v", err)
	}
	// The log is written as the server prints it, not when it stops.
	log, err := os.ReadFile(filepath.Join(dir, "serve.log"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"args serve --addr 127.0.0.1:0 --data-dir " + srv.DataDir + " --log-level warn --executor simulated --max-quota-shares-per-queue 3 --events ev\n",
		"env QSHARE_LOG_LEVEL=unset\n",
		"listening on http://127.0.0.1:1",
	} {
		if !strings.Contains(string(log), want) {
			t.Errorf("serve.log lacks %q:\n%s", want, log)
		}
	}
	// A clean Close: the server went on SIGTERM, not after 15 s and SIGKILL.
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(srv.srv.Log(), "got TERM") {
		t.Errorf("the server was not sent SIGTERM:\n%s", srv.srv.Log())
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Close left %s behind", dir)
	}
	if err := srv.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestAliveReportsADeadServer(t *testing.T) {
	bin, _ := fakeServer(t, "die")
	srv, err := StartServer(context.Background(), ServerOptions{Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	deadline := time.Now().Add(10 * time.Second)
	for srv.Alive() == nil {
		if time.Now().After(deadline) {
			t.Fatal("Alive still says nothing of a server that exited")
		}
		time.Sleep(20 * time.Millisecond)
	}
	err = srv.Alive()
	if !errors.Is(err, errServerGone) || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "the store is lost") {
		t.Errorf("Alive: %v", err)
	}
}

func TestStartServerFails(t *testing.T) {
	bin, tmp := fakeServer(t, "exit")
	_, err := StartServer(context.Background(), ServerOptions{Binary: bin})
	if err == nil || !strings.Contains(err.Error(), "cannot open the store") {
		t.Errorf("a server that exits before it listens: %v", err)
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("a failed start left %v behind", left)
	}
}
