package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"
)

// ServerOptions say how to start a temporary `qshare serve`.
type ServerOptions struct {
	// Binary is the qshare executable; the running one when empty.
	Binary string
	// Executor is "simulated" or "process".
	Executor string
	// MaxSharesPerQueue is passed as --max-quota-shares-per-queue when
	// non-zero.
	MaxSharesPerQueue int
	// LogLevel is passed as --log-level; "warn" when empty, so that the
	// server does not spend the benchmark writing a record per decision.
	LogLevel string
	// Args are extra arguments for serve.
	Args []string
}

// Server is a `qshare serve` child process on a loopback port with its own
// temporary data directory. Stop it with Close.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// DataDir is its data directory, removed by Close.
	DataDir string
	cmd     *exec.Cmd
	done    chan struct{}
	waitErr error
	logPath string
}

var listeningRE = regexp.MustCompile(`listening on (http://\S+)`)

// StartServer starts `qshare serve` with a fresh data directory on a port
// the kernel picks on 127.0.0.1, and returns once it has printed the
// address it listens on. Its output goes to serve.log in a directory next
// to the data; the tail of it is in the error if it does not come up.
func StartServer(ctx context.Context, opt ServerOptions) (*Server, error) {
	bin := opt.Binary
	if bin == "" {
		var err error
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("bench: finding the qshare binary: %w", err)
		}
	}
	if opt.LogLevel == "" {
		opt.LogLevel = "warn"
	}
	dir, err := os.MkdirTemp("", "qshare-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	s := &Server{DataDir: filepath.Join(dir, "data"), logPath: filepath.Join(dir, "serve.log"), done: make(chan struct{})}
	args := []string{"serve", "--addr", "127.0.0.1:0", "--data-dir", s.DataDir, "--log-level", opt.LogLevel}
	if opt.Executor != "" {
		args = append(args, "--executor", opt.Executor)
	}
	if opt.MaxSharesPerQueue > 0 {
		args = append(args, "--max-quota-shares-per-queue", fmt.Sprint(opt.MaxSharesPerQueue))
	}
	args = append(args, opt.Args...)
	logf, err := os.Create(s.logPath)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: %w", err)
	}
	defer logf.Close()
	pr, pw := io.Pipe()
	s.cmd = exec.Command(bin, args...)
	s.cmd.Stdout = io.MultiWriter(logf, pw)
	s.cmd.Stderr = logf
	// Settings from the environment or a config file must not change the
	// benchmark's server.
	s.cmd.Env = serverEnv()
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: starting %s serve: %w", bin, err)
	}
	go func() {
		s.waitErr = s.cmd.Wait()
		pw.Close()
		close(s.done)
	}()
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(pr)
		sent := false
		for sc.Scan() {
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil && !sent {
				found <- m[1]
				sent = true
			}
		}
		io.Copy(io.Discard, pr) //nolint:errcheck // drain so the server never blocks on stdout
	}()
	select {
	case ep := <-found:
		s.Endpoint = ep
		return s, nil
	case <-s.done:
		err = fmt.Errorf("bench: qshare serve exited before listening: %v%s", s.waitErr, s.logTail())
	case <-time.After(30 * time.Second):
		err = fmt.Errorf("bench: qshare serve did not say where it listens within 30 s%s", s.logTail())
	case <-ctx.Done():
		err = ctx.Err()
	}
	s.Close()
	return nil, err
}

func serverEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QSHARE_") {
			env = append(env, kv)
		}
	}
	return env
}

func (s *Server) logTail() string {
	data, _ := os.ReadFile(s.logPath)
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	if t := strings.TrimSpace(strings.Join(lines, "\n")); t != "" {
		return "\n--- serve.log ---\n" + t
	}
	return ""
}

// Pid returns the server's process id (for profiling or resource use).
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Close stops the server (SIGTERM, then SIGKILL after 15 s) and removes its
// directory. It is safe to call more than once.
func (s *Server) Close() error {
	if s == nil || s.cmd == nil {
		return nil
	}
	select {
	case <-s.done:
	default:
		syscall.Kill(-s.cmd.Process.Pid, syscall.SIGTERM) //nolint:errcheck
		select {
		case <-s.done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL) //nolint:errcheck
			<-s.done
		}
	}
	s.cmd = nil
	return os.RemoveAll(filepath.Dir(s.DataDir))
}

// errServerGone reports that the server died during a benchmark.
var errServerGone = errors.New("bench: the server exited during the run")

// Alive returns errServerGone, with the tail of its log, if the server has
// exited.
func (s *Server) Alive() error {
	select {
	case <-s.done:
		return fmt.Errorf("%w: %v%s", errServerGone, s.waitErr, s.logTail())
	default:
		return nil
	}
}
