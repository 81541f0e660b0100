// Package versitygw starts versitygw (github.com/versity/versitygw), an
// S3 gateway that no one here wrote, over its POSIX backend: the real
// S3-compatible server that the data contract's tests and qshare bench s3
// run against beside qshare's embedded store. It checks every request's
// SigV4 signature against one root key. .ci/build-versitygw builds the
// binary into a cache outside the repository; callers skip, with a
// message, where it is absent (Available).
package versitygw

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"qshare/internal/freeport"
	"qshare/internal/toolcache"
)

// Version is the versitygw that .ci/build-versitygw builds.
const Version = "v1.8.0"

// Binary returns where versitygw is: $QSHARE_VERSITYGW, or where
// .ci/build-versitygw puts it ($XDG_CACHE_HOME or ~/.cache, then
// qshare/versitygw-<Version>/versitygw).
func Binary() string { return tool.Path() }

// tool is the binary that .ci/build-versitygw builds.
var tool = toolcache.Tool{Name: "versitygw", Env: "QSHARE_VERSITYGW", Script: "build-versitygw", Elem: []string{"versitygw-" + Version, "versitygw"}}

// Available returns nil where the binary is there, and otherwise an error
// that says how to build it.
func Available() error { return tool.Available() }

// Server is a running versitygw.
type Server struct {
	// URL is its S3 endpoint, http://127.0.0.1:PORT (path-style).
	URL string
	// AccessKey and SecretKey are its root account's, which every request
	// must be signed with.
	AccessKey, SecretKey string

	cmd  *exec.Cmd
	done chan struct{}
	mu   sync.Mutex
	out  strings.Builder
}

// Start runs versitygw on a free loopback port over the POSIX backend in
// dir (the buckets are its directories; metadata goes to a sidecar
// directory beside it, so that no extended attributes are needed), with a
// fresh root key, and returns once it answers HTTP. ctx bounds the start
// only; Close stops it.
func Start(ctx context.Context, dir string) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	root, meta := filepath.Join(dir, "buckets"), filepath.Join(dir, "meta")
	for _, d := range []string{root, meta} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, err
		}
	}
	var last error
	for try := 0; try < 3; try++ { // a port taken between its choice and versitygw's bind
		ports, err := freeport.Ports(1)
		if err != nil {
			return nil, err
		}
		port := ports[0]
		s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), AccessKey: "qshare-root", SecretKey: "qshare-root-secret", done: make(chan struct{})}
		s.cmd = exec.Command(Binary(), "--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", "--sidecar", meta, root)
		// The root key goes through the environment, out of ps's sight.
		s.cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+s.AccessKey, "ROOT_SECRET_ACCESS_KEY="+s.SecretKey)
		s.cmd.Stdout, s.cmd.Stderr = (*logWriter)(s), (*logWriter)(s)
		if err := s.cmd.Start(); err != nil {
			return nil, fmt.Errorf("versitygw: %w", err)
		}
		go func() { s.cmd.Wait(); close(s.done) }()
		if last = s.await(ctx); last == nil {
			return s, nil
		}
		s.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// await waits until the server answers HTTP (any status: an unsigned
// request is refused), or has exited.
func (s *Server) await(ctx context.Context) error {
	return toolcache.AwaitHTTP(ctx, "versitygw", s.URL+"/", s.done, s.Log, func(int) bool { return true })
}

// Log returns what the server printed.
func (s *Server) Log() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

type logWriter Server

func (w *logWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.out.Len() < 1<<20 {
		w.out.Write(p)
	}
	return len(p), nil
}

// Close kills the server and waits for it.
func (s *Server) Close() error {
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-s.done
	return nil
}
