package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"qshare/auth"
	"qshare/internal/serveproc"
)

// ServerOptions say how to start a temporary `qshare serve`.
type ServerOptions struct {
	// Binary is the qshare executable; the running one when empty.
	Binary string
	// Executor is "simulated", "process", "slurm" or "container".
	Executor string
	// MaxSharesPerQueue is passed as --max-quota-shares-per-queue when
	// non-zero.
	MaxSharesPerQueue int
	// LogLevel is passed as --log-level; "warn" when empty, so that the
	// server does not spend the benchmark writing a record per decision.
	LogLevel string
	// Args are extra arguments for serve; Env is added to its environment.
	Args []string
	Env  []string
	// ContainerHost is passed as --container-host when set.
	ContainerHost string
	// Auth starts the server with authentication on (--auth), over an auth
	// file in its directory with one principal allowed everything, whose
	// new access key is Server.Key.
	Auth bool
}

// Server is a `qshare serve` child process on a loopback port with its own
// temporary data directory. Stop it with Close.
type Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	// DataDir is its data directory, removed by Close.
	DataDir string
	// Key is the access key (id, secret) of the server's one principal
	// with ServerOptions.Auth; empty otherwise.
	Key  [2]string
	srv  *serveproc.Server
	logf *os.File
}

// StartServer starts `qshare serve` with a fresh data directory on a port
// the kernel picks on 127.0.0.1, and returns once it has printed the
// address it listens on. Its output goes to serve.log in a directory next
// to the data; the tail of it is in the error if it does not come up. ctx
// bounds the start only: the server runs until Close, in a process group
// of its own, so that a Ctrl-C meant for the benchmark does not reach it.
func StartServer(ctx context.Context, opt ServerOptions) (*Server, error) {
	if opt.LogLevel == "" {
		opt.LogLevel = "warn"
	}
	args := []string{"--log-level", opt.LogLevel}
	if opt.Executor != "" {
		args = append(args, "--executor", opt.Executor)
	}
	if opt.MaxSharesPerQueue > 0 {
		args = append(args, "--max-quota-shares-per-queue", strconv.Itoa(opt.MaxSharesPerQueue))
	}
	if opt.ContainerHost != "" {
		args = append(args, "--container-host", opt.ContainerHost)
	}
	args = append(args, opt.Args...)
	dir, err := os.MkdirTemp("", "qshare-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	logf, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: %w", err)
	}
	var key [2]string
	if opt.Auth {
		k, err := auth.NewKey()
		if err == nil {
			key = [2]string{k.ID, k.Secret}
			file := filepath.Join(dir, "auth.yaml")
			err = os.WriteFile(file, []byte("principals: [{name: bench, accessKeys: [{id: "+k.ID+", secret: \""+k.Secret+"\"}], policies: [all]}]\n"+
				"policies: {all: {Version: \"2012-10-17\", Statement: [{Effect: Allow, Action: \"batch:*\", Resource: \"*\"}]}}\n"), 0o600)
			args = append(args, "--auth", file)
		}
		if err != nil {
			logf.Close()
			os.RemoveAll(dir)
			return nil, fmt.Errorf("bench: %w", err)
		}
	}
	srv, err := serveproc.Start(ctx, serveproc.Options{
		Binary: opt.Binary, DataDir: filepath.Join(dir, "data"), Args: args, Env: opt.Env, Output: logf,
		StopSignal: syscall.SIGTERM, StopWait: 15 * time.Second, StartWait: 30 * time.Second,
		Group: true, OutliveContext: true,
	})
	if err != nil {
		logf.Close()
		os.RemoveAll(dir)
		return nil, fmt.Errorf("bench: %w", err)
	}
	return &Server{Endpoint: srv.Endpoint, DataDir: srv.DataDir, Key: key, srv: srv, logf: logf}, nil
}

// logTail returns the last lines the server printed, for an error message.
func (s *Server) logTail() string {
	lines := strings.Split(strings.TrimSpace(s.srv.Log()), "\n")
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	if t := strings.TrimSpace(strings.Join(lines, "\n")); t != "" {
		return "\n--- serve.log ---\n" + t
	}
	return ""
}

// Pid returns the server's process id (for profiling or resource use).
func (s *Server) Pid() int { return s.srv.Pid() }

// Close stops the server (SIGTERM, then SIGKILL after 15 s) and removes its
// directory. It is safe to call more than once.
func (s *Server) Close() error {
	if s == nil || s.logf == nil {
		return nil
	}
	stopErr := s.srv.Stop()
	s.logf.Close()
	s.logf = nil
	return errors.Join(stopErr, os.RemoveAll(filepath.Dir(s.DataDir)))
}

// errServerGone reports that the server died during a benchmark.
var errServerGone = errors.New("bench: the server exited during the run")

// Alive returns errServerGone, with the tail of its log, if the server has
// exited.
func (s *Server) Alive() error {
	select {
	case <-s.srv.Done():
		return fmt.Errorf("%w: %v%s", errServerGone, s.srv.Err(), s.logTail())
	default:
		return nil
	}
}
