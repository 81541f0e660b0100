// Package pgtest starts a real, throwaway PostgreSQL server for tests: initdb
// in a temporary directory, the server on a free loopback port, run as an
// unprivileged user when the tests run as root (PostgreSQL refuses root),
// with fsync on. Tests of postgres/ and of anything that runs qshare on
// PostgreSQL use it from their TestMain; when PostgreSQL is not installed,
// Start says so (ErrNotInstalled) and the tests skip.
package postgrestest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"qshare/internal/freeport"
)

// ErrNotInstalled is returned by Start when no PostgreSQL server binaries
// are found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, and $QSHARE_PG_BIN is not set); install it, for example with apt-get install -y postgresql, to run these tests")

// URLEnv names the environment variable through which a server started by
// Start is handed to child processes of the test (storetest's crash checks
// run the test binary again): a TestMain that finds it set uses that server
// instead of starting one.
const URLEnv = "QSHARE_PGTEST_URL"

// Server is a running PostgreSQL server.
type Server struct {
	dir  string // the temporary directory (data directory, socket, log)
	bin  string
	port int
	cmd  *exec.Cmd
	gone chan struct{} // closed when cmd has exited
	cred *syscall.Credential
	dbs  atomic.Int64
	// url is the base URL: user qshare, trust authentication, no database.
	url string
}

// Bin returns the directory of the PostgreSQL server binaries: $QSHARE_PG_BIN,
// or the newest /usr/lib/postgresql/*/bin that has initdb; ErrNotInstalled
// when there is none.
func Bin() (string, error) {
	if b := os.Getenv("QSHARE_PG_BIN"); b != "" {
		if _, err := os.Stat(filepath.Join(b, "initdb")); err != nil {
			return "", fmt.Errorf("$QSHARE_PG_BIN=%s: %w", b, err)
		}
		return b, nil
	}
	ms, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
	if len(ms) == 0 {
		return "", ErrNotInstalled
	}
	sort.Slice(ms, func(i, j int) bool { return version(ms[i]) < version(ms[j]) })
	return filepath.Dir(ms[len(ms)-1]), nil
}

func version(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// Start initialises a new database cluster in a temporary directory and
// starts a server on it, on a free loopback port, and waits until it
// accepts connections. The caller must Stop it. When the process runs as
// root, the server runs as the user nobody.
func Start() (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	parent := ""
	if os.Geteuid() == 0 {
		// The server runs as nobody, who must reach the directory: $TMPDIR
		// may be under root's home; /tmp is open to every user.
		if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
			parent = "/tmp"
		}
	}
	dir, err := os.MkdirTemp(parent, "qshare-pgtest-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir, bin: bin}
	ok := false
	defer func() {
		if !ok {
			s.Stop()
		}
	}()
	if os.Geteuid() == 0 {
		u, err := user.Lookup("nobody")
		if err != nil {
			return nil, fmt.Errorf("running as root, PostgreSQL needs an unprivileged user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	// --no-sync only skips flushing the new cluster's files once; the
	// server itself runs with fsync on, so every commit is flushed.
	if out, err := s.command("initdb", "-D", s.data(), "-U", "qshare", "--auth=trust", "-E", "UTF8", "--no-locale", "--no-sync").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("initdb: %v: %s", err, out)
	}
	for try := 0; ; try++ {
		ports, err := freeport.Ports(1)
		if err != nil {
			return nil, err
		}
		s.port = ports[0]
		if err = s.start(); err == nil {
			break
		}
		if try == 3 {
			return nil, err
		}
	}
	s.url = fmt.Sprintf("postgres://qshare@127.0.0.1:%d", s.port)
	ok = true
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "pg") }

// LogPath returns the path of the server's log file.
func (s *Server) LogPath() string { return filepath.Join(s.dir, "log") }

func (s *Server) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	return cmd
}

// start runs the server on s.port and waits for it.
func (s *Server) start() error {
	log, err := os.OpenFile(s.LogPath(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	if s.cred != nil {
		os.Chown(s.LogPath(), int(s.cred.Uid), int(s.cred.Gid)) //nolint:errcheck // only the log
	}
	cmd := s.command("postgres", "-D", s.data(), "-p", strconv.Itoa(s.port), "-k", s.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=on", "-c", "synchronous_commit=on",
		"-c", "max_connections=200")
	cmd.Stdout, cmd.Stderr = log, log
	// If the test process dies, the server stops too (fast shutdown).
	cmd.SysProcAttr.Pdeathsig = syscall.SIGINT
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres: %w", err)
	}
	exited := make(chan error, 1)
	gone := make(chan struct{})
	go func() {
		err := cmd.Wait()
		close(gone)
		exited <- err
	}()
	url := fmt.Sprintf("postgres://qshare@127.0.0.1:%d/postgres?sslmode=disable", s.port)
	// Crash recovery after Restart("immediate") took over 60 s at load
	// averages of 47 and 70 on a 2-core machine shared with other builds and
	// tests, and every later test of the package then failed on the killed
	// server; a quiet machine takes well under a second.
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		c, err := pgx.Connect(ctx, url)
		cancel()
		if err == nil {
			c.Close(context.Background())
			s.cmd, s.gone = cmd, gone
			return nil
		}
		select {
		case werr := <-exited:
			tail, _ := os.ReadFile(s.LogPath())
			return fmt.Errorf("postgres exited (%v) on port %d: %s", werr, s.port, lastLines(string(tail), 10))
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill() //nolint:errcheck // giving up on it
			return fmt.Errorf("postgres did not accept connections within 3 minutes: %v", err)
		}
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// Attach returns a Server for the base URL that a parent test process
// started (URLEnv). Stop on it does nothing.
func Attach(url string) *Server { return &Server{url: url} }

// URL returns the base URL of the server (user qshare, no password, trust
// authentication, loopback), without a database.
func (s *Server) URL() string { return s.url }

// DatabaseURL returns the URL of the database db on the server.
func (s *Server) DatabaseURL(db string) string { return s.url + "/" + db + "?sslmode=disable" }

// NewDatabase creates a new, empty database with a fresh name and returns
// its URL.
func (s *Server) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("t%d_%d", os.Getpid(), s.dbs.Add(1))
	c, err := pgx.Connect(ctx, s.DatabaseURL("postgres"))
	if err != nil {
		return "", err
	}
	defer c.Close(context.Background())
	if _, err := c.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return s.DatabaseURL(name), nil
}

// Restart stops the server (mode "immediate" is a crash: no checkpoint) and
// starts it again on the same port.
func (s *Server) Restart(mode string) error {
	if s.cmd == nil {
		return errors.New("postgrestest: this process did not start the server")
	}
	if out, err := s.command("pg_ctl", "-D", s.data(), "-m", mode, "-w", "stop").CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %v: %s", err, out)
	}
	<-s.gone
	s.cmd = nil
	return s.start()
}

// Stop stops the server and removes its directory. It may be called more
// than once. The shutdown is immediate (SIGQUIT): a fast one first writes
// a checkpoint of every database the tests made, which took seconds on a
// loaded 2-core machine, for a directory that is removed next.
func (s *Server) Stop() {
	if s.cmd != nil && s.cmd.Process != nil {
		s.cmd.Process.Signal(syscall.SIGQUIT) //nolint:errcheck // it may be gone
		select {
		case <-s.gone:
		case <-time.After(30 * time.Second):
			s.cmd.Process.Kill() //nolint:errcheck // last resort
			<-s.gone
		}
		s.cmd = nil
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// Chown gives path to the user the server runs as (nobody, when the tests
// run as root), so that the server may use it (a tablespace, say). It does
// nothing when the server runs as this process's user.
func (s *Server) Chown(path string) error {
	if s.cred == nil {
		return nil
	}
	return os.Chown(path, int(s.cred.Uid), int(s.cred.Gid))
}
