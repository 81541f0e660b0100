// Package serveproc runs `qshare serve` as a child process on a port the
// kernel picks on 127.0.0.1, and returns once the server has said where it
// listens. The demo, the command line's end-to-end tests, the process
// end-to-end tests, the fault tests, the soak and the benchmark harness all
// start their servers with it: stopped cleanly or killed with SIGKILL, and
// started again on the same data directory, with the server's output kept
// in memory or written where the caller says.
//
// It holds no scheduling logic, and needs nothing of the server but its
// command line and the line it prints once it listens.
package serveproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options say how to start a server. Only DataDir is required.
type Options struct {
	// Binary is the qshare executable; the running one when empty.
	Binary string
	// DataDir is the server's --data-dir. Start creates it if need be. A
	// server started again on the same DataDir recovers what the last one
	// left there.
	DataDir string
	// Args are more arguments of serve (--executor, --log-level, --events…).
	// They follow --addr and --data-dir, so a flag here overrides those.
	Args []string
	// Env is added to the server's environment, which is otherwise this
	// process's without its QSHARE_* settings (they would change the
	// server). A later entry wins, so "PATH=dir:"+os.Getenv("PATH") puts dir
	// in front of the path.
	Env []string
	// Output receives everything the server prints, standard output and
	// standard error, as it prints it. When it is nil, the server's output
	// is kept in memory whole (see Server.Log).
	Output io.Writer
	// StopSignal is what Stop sends first: os.Interrupt (as Ctrl-C would)
	// when nil.
	StopSignal os.Signal
	// StopWait is how long Stop waits after StopSignal before it kills the
	// server: 15 s when zero.
	StopWait time.Duration
	// StartWait is how long Start waits for the server to say where it
	// listens: a minute when zero.
	StartWait time.Duration
	// ExtraFiles are open files the server inherits as descriptors 3, 4…
	// (exec.Cmd.ExtraFiles): what a careless launcher leaves open to it.
	ExtraFiles []*os.File
	// Group starts the server in a process group of its own; Stop and Kill
	// then signal the whole group.
	Group bool
	// OutliveContext makes Start's context bound only the start: once the
	// server listens, it runs until Stop or Kill whatever becomes of the
	// context, so that its owner decides when it goes (and can tell a server
	// that died from one that was stopped).
	OutliveContext bool
}

// Server is a running `qshare serve` child process.
type Server struct {
	// Endpoint is the server's URL, http://127.0.0.1:PORT.
	Endpoint string
	// DataDir is its data directory.
	DataDir string

	o       Options
	cmd     *exec.Cmd
	out     *output
	done    chan struct{}
	waitErr error
}

// Start runs `qshare serve --addr 127.0.0.1:0 --data-dir DataDir ARGS...`
// and returns once the server has printed the address it listens on. When
// ctx is done before that, Start kills the server and returns ctx's error;
// when it is done later, the server is stopped as Stop does, unless
// Options.OutliveContext is set. The error of a server that does not come
// up carries the end of its output.
func Start(ctx context.Context, o Options) (*Server, error) {
	if o.DataDir == "" {
		return nil, errors.New("serveproc: no data directory")
	}
	if o.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("serveproc: finding the qshare binary: %w", err)
		}
		o.Binary = b
	}
	if o.StopSignal == nil {
		o.StopSignal = os.Interrupt
	}
	if o.StopWait <= 0 {
		o.StopWait = 15 * time.Second
	}
	if o.StartWait <= 0 {
		o.StartWait = time.Minute
	}
	if err := os.MkdirAll(o.DataDir, 0o755); err != nil {
		return nil, fmt.Errorf("serveproc: %w", err)
	}
	args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", o.DataDir}, o.Args...)
	cmd := exec.Command(o.Binary, args...)
	cmd.Env = append(Environ(), o.Env...)
	cmd.ExtraFiles = o.ExtraFiles
	if o.Group {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	}
	s := &Server{DataDir: o.DataDir, o: o, cmd: cmd, done: make(chan struct{}),
		out: &output{w: o.Output, keepAll: o.Output == nil, found: make(chan string, 1)}}
	cmd.Stdout = (*stdout)(s.out)
	cmd.Stderr = s.out
	// The server's children never hold its output, but should one, Wait
	// must not wait for it.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("serveproc: starting %s: %w", o.Binary, err)
	}
	go func() {
		s.waitErr = cmd.Wait()
		close(s.done)
	}()
	select {
	case s.Endpoint = <-s.out.found:
		if !o.OutliveContext {
			context.AfterFunc(ctx, func() { _ = s.Stop() })
		}
		return s, nil
	case <-s.done:
		return nil, fmt.Errorf("qshare serve exited before it listened (%v):\n%s", s.waitErr, s.out.tail())
	case <-time.After(o.StartWait):
		s.Kill()
		return nil, fmt.Errorf("qshare serve did not say where it listens within %s:\n%s", o.StartWait, s.out.tail())
	case <-ctx.Done():
		s.Kill()
		return nil, ctx.Err()
	}
}

// Environ returns this process's environment without its QSHARE_*
// settings: the environment Start gives a server before Options.Env.
func Environ() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "QSHARE_") {
			env = append(env, kv)
		}
	}
	return env
}

// Post sends body, JSON, to the server's path (such as
// /v1/describejobqueues) with c, and reads the answer to its end: nil for a
// 200, else the request's error or the status.
func (s *Server) Post(c *http.Client, path, body string) error {
	resp, err := c.Post(s.Endpoint+path, "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s", resp.Status)
	}
	return nil
}

// Pid returns the server's process id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Done is closed once the server has exited.
func (s *Server) Done() <-chan struct{} { return s.done }

// Err returns how the server exited (exec.Cmd.Wait's error) once Done is
// closed, and nil before.
func (s *Server) Err() error {
	select {
	case <-s.done:
		return s.waitErr
	default:
		return nil
	}
}

// Log returns what the server has printed so far: all of it when
// Options.Output is nil, else its last lines (the whole is in Output).
func (s *Server) Log() string { return s.out.String() }

// Stop sends the server Options.StopSignal and waits for it to exit; after
// Options.StopWait it kills it and says so. It does nothing to a server
// that has exited, and may be called more than once, concurrently too.
func (s *Server) Stop() error {
	select {
	case <-s.done:
		return nil
	default:
	}
	s.signal(s.o.StopSignal)
	select {
	case <-s.done:
		return nil
	case <-time.After(s.o.StopWait):
		s.Kill()
		return fmt.Errorf("qshare serve did not exit within %s of %v and was killed", s.o.StopWait, s.o.StopSignal)
	}
}

// Kill ends the server with SIGKILL, as a crash would, and waits until it
// has exited. The jobs it started run on.
func (s *Server) Kill() {
	s.signal(syscall.SIGKILL)
	<-s.done
}

func (s *Server) signal(sig os.Signal) {
	if s.o.Group {
		if n, ok := sig.(syscall.Signal); ok {
			_ = syscall.Kill(-s.cmd.Process.Pid, n)
			return
		}
	}
	_ = s.cmd.Process.Signal(sig)
}

// listenRE finds the address in the line serve prints once it listens.
var listenRE = regexp.MustCompile(`listening on (https?://\S+)`)

// tailSize is how much of the output a Server keeps when Options.Output
// has the whole of it.
const tailSize = 8 << 10

// output takes what the server prints, keeps it (whole, or its tail) and
// passes it on to Options.Output.
type output struct {
	mu      sync.Mutex
	w       io.Writer
	keepAll bool
	buf     bytes.Buffer
	// line is the start of a line of standard output not yet ended.
	line  []byte
	found chan string
}

// Write takes standard error.
func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.keep(p)
	if o.w != nil {
		// The server must not stop because a log file cannot be written.
		_, _ = o.w.Write(p)
	}
	return len(p), nil
}

func (o *output) keep(p []byte) {
	o.buf.Write(p)
	if !o.keepAll && o.buf.Len() > 2*tailSize {
		b := o.buf.Bytes()[o.buf.Len()-tailSize:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
		b = append([]byte(nil), b...)
		o.buf.Reset()
		o.buf.Write(b)
	}
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

// tail returns the last lines of the output, for an error message.
func (o *output) tail() string {
	s := o.String()
	if len(s) > tailSize {
		s = s[len(s)-tailSize:]
	}
	return s
}

// stdout is the output seen as standard output, which it also reads line
// by line for the address the server listens on.
type stdout output

func (s *stdout) Write(p []byte) (int, error) {
	o := (*output)(s)
	n, err := o.Write(p)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.line = append(o.line, p...)
	for {
		i := bytes.IndexByte(o.line, '\n')
		if i < 0 {
			break
		}
		if m := listenRE.FindSubmatch(o.line[:i]); m != nil {
			select {
			case o.found <- string(m[1]):
			default:
			}
		}
		o.line = o.line[i+1:]
	}
	if len(o.line) > 4096 {
		o.line = o.line[:0] // no address is that long
	}
	return n, err
}

// Command runs `bin ARGS...` in the directory dir against the server (its
// environment this process's, with QSHARE_ENDPOINT set to s.Endpoint),
// killing it after two minutes, and returns what it printed on standard
// output and standard error, and the error of exec.Cmd.Run (an
// *exec.ExitError when it ran and exited with a status other than 0).
func (s *Server) Command(bin, dir string, args ...string) (stdout, stderr string, err error) {
	return s.CommandEnv(bin, dir, nil, args...)
}

// CommandEnv is Command with env (NAME=VALUE) added to the command's
// environment: a parallel test's settings, which it cannot put in this
// process's.
func (s *Server) CommandEnv(bin, dir string, env []string, args ...string) (stdout, stderr string, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "QSHARE_ENDPOINT="+s.Endpoint), env...)
	var o, e bytes.Buffer
	cmd.Stdout, cmd.Stderr = &o, &e
	err = cmd.Run()
	return o.String(), e.String(), err
}
