// Package kubetest is the test harness of the Kubernetes executor: a real
// Kubernetes control plane (etcd and kube-apiserver, built from the Go module
// proxy by .ci/build-kube) in temporary directories on loopback ports, and a
// played kubelet and scheduler (Kubelet) that place, run and end the
// executor's pods the way a cluster would. There is no kubelet binary: the
// tests act as the node agents, as Kueue's integration tests do.
//
// Tests that need the binaries call Require, which skips them with a message
// naming .ci/build-kube where the binaries are absent, so that a plain
// `go test ./...` stays fast.
package kubetest

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/rest"

	"qshare/executor/kubernetes/kubeclient"
	"qshare/internal/freeport"
	"qshare/internal/toolcache"
)

// Version is the Kubernetes release the harness runs.
const Version = "v1.37.2"

// BinDir is where the control-plane binaries are: $QSHARE_KUBE_BIN, else
// the cache directory .ci/build-kube builds them into.
func BinDir() string {
	return toolcache.Path("QSHARE_KUBE_BIN", "kube-"+Version)
}

// Available returns nil when etcd and kube-apiserver are in BinDir, else an
// error that says how to build them.
func Available() error {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		p := filepath.Join(BinDir(), b)
		if st, err := os.Stat(p); err != nil || st.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is missing: build the Kubernetes test binaries with .ci/build-kube (or set QSHARE_KUBE_BIN to where they are)", p)
		}
	}
	return nil
}

// TB is the part of testing.TB that the harness uses, so that this
// package, which `qshare bench kube` links, need not import testing.
type TB interface {
	Helper()
	Skipf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// Require skips t when the control-plane binaries are absent.
func Require(t TB) {
	t.Helper()
	if err := Available(); err != nil {
		t.Skipf("no Kubernetes control plane here, so this test is skipped: %v", err)
	}
}

// Server is a running etcd and kube-apiserver. Its methods are safe for
// concurrent use.
type Server struct {
	dir        string
	etcdPort   int
	apiPort    int
	peerPort   int
	token      string
	kubeconfig string

	mu   sync.Mutex
	etcd *proc
	api  *proc
}

// proc is a started component and a channel closed once it has exited.
type proc struct {
	cmd  *exec.Cmd
	done chan struct{}
}

func startProc(cmd *exec.Cmd, log *os.File) (*proc, error) {
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	p := &proc{cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); log.Close(); close(p.done) }()
	return p, nil
}

// Start starts etcd and kube-apiserver in a new temporary directory and
// waits until the API server is ready (a few seconds). Close stops them.
// Where a component exits before it is ready (a port taken between its
// choice and the bind, say), it starts both again on other ports, up to
// three times in all.
func Start(ctx context.Context) (*Server, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	for try := 1; ; try++ {
		s, err := start(ctx)
		if err == nil || try == 3 || !errors.Is(err, errStopped) || ctx.Err() != nil {
			return s, err
		}
	}
}

func start(ctx context.Context) (*Server, error) {
	dir, err := os.MkdirTemp("", "qshare-kube-")
	if err != nil {
		return nil, err
	}
	s := &Server{dir: dir}
	if err := s.init(); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.startEtcd(ctx); err != nil {
		s.Close()
		return nil, err
	}
	if err := s.StartAPIServer(ctx); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

func (s *Server) init() error {
	ports, err := freeport.Ports(3)
	if err != nil {
		return err
	}
	s.etcdPort, s.apiPort, s.peerPort = ports[0], ports[1], ports[2]
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	s.token = hex.EncodeToString(b)
	if err := os.WriteFile(filepath.Join(s.dir, "tokens.csv"), []byte(s.token+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&key.PublicKey)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "sa.key"), pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(s.dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		return err
	}
	s.kubeconfig = filepath.Join(s.dir, "kubeconfig")
	return os.WriteFile(s.kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster:
    server: https://127.0.0.1:%d
    insecure-skip-tls-verify: true
users:
- name: admin
  user:
    token: %s
contexts:
- name: test
  context:
    cluster: test
    user: admin
    namespace: default
current-context: test
`, s.apiPort, s.token)), 0o600)
}

func (s *Server) logFile(name string) (*os.File, error) {
	return os.OpenFile(filepath.Join(s.dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
}

func (s *Server) startEtcd(ctx context.Context) error {
	peer := s.peerPort
	client := fmt.Sprintf("http://127.0.0.1:%d", s.etcdPort)
	log, err := s.logFile("etcd")
	if err != nil {
		return err
	}
	cmd := exec.Command(filepath.Join(BinDir(), "etcd"), "--data-dir", filepath.Join(s.dir, "etcd"),
		"--listen-client-urls", client, "--advertise-client-urls", client,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peer),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peer),
		"--unsafe-no-fsync", "--log-level", "warn")
	if s.etcd, err = startProc(cmd, log); err != nil {
		return fmt.Errorf("starting etcd: %w", err)
	}
	done := s.etcd.done
	return poll(ctx, 60*time.Second, func() error {
		select {
		case <-done:
			return errStopped
		default:
		}
		req, _ := http.NewRequest("GET", client+"/health", nil)
		return getOK(http.DefaultClient, req)
	}, s.tail("etcd"))
}

// getOK makes a request and wants 200 OK.
func getOK(hc *http.Client, req *http.Request) error {
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", req.URL.Path, resp.Status)
	}
	return nil
}

// StartAPIServer starts kube-apiserver (again, after StopAPIServer) on the
// same port and waits until it is ready.
func (s *Server) StartAPIServer(ctx context.Context) error {
	s.mu.Lock()
	if s.api != nil {
		s.mu.Unlock()
		return errors.New("kubetest: the API server runs already")
	}
	log, err := s.logFile("kube-apiserver")
	if err != nil {
		s.mu.Unlock()
		return err
	}
	cmd := exec.Command(filepath.Join(BinDir(), "kube-apiserver"),
		"--etcd-servers", fmt.Sprintf("http://127.0.0.1:%d", s.etcdPort),
		"--secure-port", strconv.Itoa(s.apiPort), "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
		"--endpoint-reconciler-type=none", "--cert-dir", filepath.Join(s.dir, "certs"),
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file", filepath.Join(s.dir, "sa.pub"),
		"--service-account-signing-key-file", filepath.Join(s.dir, "sa.key"),
		"--token-auth-file", filepath.Join(s.dir, "tokens.csv"),
		"--authorization-mode=RBAC", "--service-cluster-ip-range=10.0.0.0/24",
		"--disable-admission-plugins=ServiceAccount", "--enable-priority-and-fairness=false",
		"--kubelet-preferred-address-types=InternalIP")
	p, err := startProc(cmd, log)
	if err != nil {
		s.mu.Unlock()
		return fmt.Errorf("starting kube-apiserver: %w", err)
	}
	s.api = p
	s.mu.Unlock()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	return poll(ctx, 90*time.Second, func() error {
		select {
		case <-p.done:
			return errStopped
		default:
		}
		req, _ := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d/readyz", s.apiPort), nil)
		req.Header.Set("Authorization", "Bearer "+s.token)
		return getOK(hc, req)
	}, s.tail("kube-apiserver"))
}

var errStopped = errors.New("the process exited")

// StopAPIServer stops kube-apiserver (etcd keeps its data), as an outage
// of the control plane; StartAPIServer brings it back.
func (s *Server) StopAPIServer() {
	s.mu.Lock()
	p := s.api
	s.api = nil
	s.mu.Unlock()
	p.stop()
}

// PauseAPIServer freezes kube-apiserver (SIGSTOP): it keeps its
// connections but answers nothing, as a hung or overloaded server does;
// ResumeAPIServer lets it go on (SIGCONT).
func (s *Server) PauseAPIServer() error { return s.signalAPIServer(syscall.SIGSTOP) }

// ResumeAPIServer undoes PauseAPIServer.
func (s *Server) ResumeAPIServer() error { return s.signalAPIServer(syscall.SIGCONT) }

func (s *Server) signalAPIServer(sig syscall.Signal) error {
	s.mu.Lock()
	p := s.api
	s.mu.Unlock()
	if p == nil {
		return errStopped
	}
	return p.cmd.Process.Signal(sig)
}

func (p *proc) stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// tail returns the end of a component's log, for an error.
func (s *Server) tail(name string) func() string {
	return func() string {
		b, _ := os.ReadFile(filepath.Join(s.dir, name+".log"))
		if len(b) > 2000 {
			b = b[len(b)-2000:]
		}
		return string(bytes.TrimSpace(b))
	}
}

func poll(ctx context.Context, limit time.Duration, f func() error, tail func() string) error {
	deadline := time.Now().Add(limit)
	for {
		err := f()
		if err == nil {
			return nil
		}
		if errors.Is(err, errStopped) || time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("kubetest: not ready: %w; its log ends:\n%s", err, tail())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kubeconfig is the path of a kubeconfig file for the API server, with an
// administrator's token.
func (s *Server) Kubeconfig() string { return s.kubeconfig }

// Config is the client configuration of an administrator.
func (s *Server) Config() *rest.Config {
	return &rest.Config{Host: fmt.Sprintf("https://127.0.0.1:%d", s.apiPort), BearerToken: s.token,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, QPS: 500, Burst: 1000}
}

// Client is an administrator's client of the core API group, the one the
// executor uses.
func (s *Server) Client() *kubeclient.Core {
	c, err := kubeclient.NewCore(s.Config())
	if err != nil {
		panic(err) // only a malformed host fails, and the host is ours
	}
	return c
}

// Close stops the API server and etcd and removes their directory.
func (s *Server) Close() {
	s.StopAPIServer()
	s.etcd.stop()
	if os.Getenv("QSHARE_KUBE_KEEP") == "" {
		os.RemoveAll(s.dir)
	}
}

// Dir is the directory holding the components' data and logs.
func (s *Server) Dir() string { return s.dir }
