// Package registry starts the CNCF Distribution registry
// (github.com/distribution/distribution), an OCI image registry that no one
// here wrote, for the container executor's pull tests: on a loopback port,
// over a storage directory of the test's own, with htpasswd (Basic)
// authentication of one user. In front of it stands a reverse proxy of this
// package on another loopback port, which is the registry's name in image
// references (localhost:PORT: the engines take a registry on the loopback
// as plain HTTP): it records every request, so that a test can tell whether
// an image was pulled, and it can pace the blobs it serves, so that a pull
// lasts long enough to be watched. .ci/build-registry builds the binary
// into a cache outside the repository; callers skip, with a message, where
// it is absent (Available).
package registry

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/bcrypt"

	"qshare/internal/freeport"
	"qshare/internal/toolcache"
)

// Version is the registry that .ci/build-registry builds.
const Version = "v3.1.2"

// Binary returns where the registry is: $QSHARE_REGISTRY, or where
// .ci/build-registry puts it ($XDG_CACHE_HOME or ~/.cache, then
// qshare/registry-<Version>/registry).
func Binary() string { return tool.Path() }

// tool is the binary that .ci/build-registry builds.
var tool = toolcache.Tool{Name: "the registry", Env: "QSHARE_REGISTRY", Script: "build-registry", Elem: []string{"registry-" + Version, "registry"}}

// Available returns nil where the binary is there, and otherwise an error
// that says how to build it.
func Available() error { return tool.Available() }

// Options are a registry's user and pace.
type Options struct {
	// User and Password are the one account that may push and pull.
	User, Password string
	// Rate, where above 0, is the bytes per second at which the front
	// serves each blob a client GETs.
	Rate int64
}

// Server is a running registry and its front.
type Server struct {
	// Host is the front's address, localhost:PORT: the registry part of an
	// image reference.
	Host string
	Options

	dir   string
	cmd   *exec.Cmd
	done  chan struct{}
	front *http.Server
	mu    sync.Mutex
	reqs  []string
}

// Start runs a registry storing its images in dir, with o's account, and
// its front; it returns once both answer. ctx bounds the start only; Close
// stops them.
func Start(ctx context.Context, dir string, o Options) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	if o.User == "" || strings.ContainsAny(o.User, ":\n") || o.Password == "" {
		return nil, fmt.Errorf("registry: a user without ':' and a password are needed")
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	secret := make([]byte, 16)
	rand.Read(secret)
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
		return nil, err
	}
	var last error
	for try := 0; try < 3; try++ { // a port taken between its choice and the registry's bind
		ports, err := freeport.Ports(1)
		if err != nil {
			return nil, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[0])
		conf := filepath.Join(dir, "config.yml")
		yml := fmt.Sprintf(`version: 0.1
log:
  level: info
storage:
  filesystem:
    rootdirectory: %q
  delete:
    enabled: true
http:
  addr: %q
  secret: %q
auth:
  htpasswd:
    realm: qshare-test
    path: %q
`, filepath.Join(dir, "data"), addr, hex.EncodeToString(secret), htpasswd)
		if err := os.WriteFile(conf, []byte(yml), 0o600); err != nil {
			return nil, err
		}
		s := &Server{Options: o, dir: dir, done: make(chan struct{})}
		if last = s.run(ctx, conf, addr); last == nil {
			return s, nil
		}
		s.Close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, last
}

// run starts the registry on addr with conf, then the front.
func (s *Server) run(ctx context.Context, conf, addr string) error {
	log, err := os.Create(filepath.Join(s.dir, "registry.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	s.cmd = exec.Command(Binary(), "serve", conf)
	s.cmd.Stdout, s.cmd.Stderr = log, log
	// It exports traces to an OpenTelemetry collector by default: none here.
	s.cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=none", "OTEL_SDK_DISABLED=true")
	if err := s.cmd.Start(); err != nil {
		return fmt.Errorf("registry: %w", err)
	}
	go func() { s.cmd.Wait(); close(s.done) }()
	// Without credentials the registry answers 401: it is up.
	unauthorized := func(status int) bool { return status == http.StatusUnauthorized }
	if err := toolcache.AwaitHTTP(ctx, "the registry", "http://"+addr+"/v2/", s.done, s.Log, unauthorized); err != nil {
		return err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	s.Host = fmt.Sprintf("localhost:%d", l.Addr().(*net.TCPAddr).Port)
	back := &url.URL{Scheme: "http", Host: addr}
	rp := &httputil.ReverseProxy{
		// The request's Host stays the front's, so that the registry's
		// upload locations name the front.
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(back); r.Out.Host = r.In.Host },
		FlushInterval: -1,
		ModifyResponse: func(resp *http.Response) error {
			r := resp.Request
			s.note(r.Method + " " + r.URL.Path + " " + fmt.Sprint(resp.StatusCode))
			if s.Rate > 0 && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/blobs/") {
				resp.Body = &paced{ReadCloser: resp.Body, rate: s.Rate, start: time.Now()}
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			s.note(r.Method + " " + r.URL.Path + " proxy error: " + err.Error())
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	s.front = &http.Server{Handler: rp, ReadHeaderTimeout: 10 * time.Second}
	go s.front.Serve(l)
	return nil
}

func (s *Server) note(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, line)
}

// Requests returns the requests the front has passed on, in order, each
// "METHOD PATH STATUS" ("GET /v2/team/img/manifests/1 200").
func (s *Server) Requests() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.reqs...)
}

// Log returns what the registry printed.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "registry.log"))
	return string(b)
}

// Close stops the front and kills the registry, and waits for it.
func (s *Server) Close() error {
	if s.front != nil {
		s.front.Close()
	}
	if s.cmd == nil || s.cmd.Process == nil {
		return nil
	}
	if err := s.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return err
	}
	<-s.done
	return nil
}

// paced is a body read at no more than rate bytes a second since start.
type paced struct {
	io.ReadCloser
	rate  int64
	start time.Time
	n     int64
}

func (p *paced) Read(b []byte) (int, error) {
	if len(b) > 32<<10 {
		b = b[:32<<10]
	}
	n, err := p.ReadCloser.Read(b)
	p.n += int64(n)
	if ahead := time.Duration(p.n*int64(time.Second)/p.rate) - time.Since(p.start); ahead > 0 {
		time.Sleep(ahead)
	}
	return n, err
}
