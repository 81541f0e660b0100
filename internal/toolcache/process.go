package toolcache

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"qshare/internal/freeport"
)

// Process is a server that a test or a benchmark started from a program
// the build scripts built: what it prints is kept (its first MiB) for the
// caller's error messages, and its end is awaited once.
type Process struct {
	cmd   *exec.Cmd
	done  chan struct{}
	mu    sync.Mutex
	out   strings.Builder
	after []func()
}

// StartProcess starts cmd (name, in messages) with its output kept; on
// Linux, the process is killed if the caller's process dies first.
func StartProcess(name string, cmd *exec.Cmd) (*Process, error) {
	p := &Process{cmd: cmd, done: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = (*processLog)(p), (*processLog)(p)
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { cmd.Wait(); close(p.done) }()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Log returns what the process printed.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

type processLog Process

func (w *processLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() < 1<<20 {
		w.out.Write(b)
	}
	return len(b), nil
}

// AfterClose adds f to what Close does once the process has exited: the
// removal of what it leaves where the caller cannot choose the place.
func (p *Process) AfterClose(f func()) { p.after = append(p.after, f) }

// Close kills the process, waits for it, and runs the AfterClose
// functions.
func (p *Process) Close() error {
	if err := p.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-p.done
	for _, f := range p.after {
		f()
	}
	p.after = nil
	return nil
}

// StartOnPorts starts the server that cmd makes for n free loopback
// ports (name, in messages), and returns it, with its ports, once a GET
// of the URL that url makes of them answers with any status. It tries
// three times, for a port that another program took between its choice
// and the server's bind. after, when not nil, is what Close does once
// the server has exited, for its ports (a try that failed included).
// ctx bounds the start only.
func StartOnPorts(ctx context.Context, name string, n int, cmd func(ports []int) *exec.Cmd, url func(ports []int) string, after func(ports []int)) (*Process, []int, error) {
	var last error
	for try := 0; try < 3; try++ {
		ports, err := freeport.Ports(n)
		if err != nil {
			return nil, nil, err
		}
		p, err := StartProcess(name, cmd(ports))
		if err != nil {
			return nil, nil, err
		}
		if after != nil {
			p.AfterClose(func() { after(ports) })
		}
		if last = AwaitHTTP(ctx, name, url(ports), p.Done(), p.Log, func(int) bool { return true }); last == nil {
			return p, ports, nil
		}
		p.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, nil, last
}

// S3Server is an S3-compatible server that no one here wrote (versitygw,
// SeaweedFS), started by a test or a benchmark.
type S3Server struct {
	// URL is its S3 endpoint, http://127.0.0.1:PORT (path-style).
	URL string
	// AccessKey and SecretKey are the key that every request must be
	// signed with.
	AccessKey, SecretKey string

	*Process
}
