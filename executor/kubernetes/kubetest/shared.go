package kubetest

import (
	"context"
	"sync"
	"time"
)

// Cluster is a control plane with its played kubelet.
type Cluster struct {
	*Server
	Kubelet *Kubelet
}

// StartCluster starts a Server and a Kubelet over it.
func StartCluster(ctx context.Context) (*Cluster, error) {
	s, err := Start(ctx)
	if err != nil {
		return nil, err
	}
	k, err := NewKubelet(s.Client())
	if err != nil {
		s.Close()
		return nil, err
	}
	return &Cluster{Server: s, Kubelet: k}, nil
}

// Own starts a Cluster of t's own within ctx: it skips t where the
// binaries are absent, fails it where the cluster does not start, and
// closes the cluster when t ends.
func Own(ctx context.Context, t interface {
	TB
	Cleanup(func())
}) *Cluster {
	t.Helper()
	Require(t)
	c, err := StartCluster(ctx)
	if err == nil {
		t.Cleanup(c.Close)
		return c
	}
	t.Fatalf("starting the Kubernetes control plane: %v", err)
	return nil
}

// Close stops the kubelet and the control plane.
func (c *Cluster) Close() {
	c.Kubelet.Close()
	c.Server.Close()
}

// Shared is one Cluster for a test package: started by the first Get,
// closed by Close (from TestMain). Its zero value is ready to use.
type Shared struct {
	once sync.Once
	c    *Cluster
	err  error
	// Setup, if set, runs once on the new cluster (to add nodes).
	Setup func(ctx context.Context, c *Cluster) error
}

// Get returns the package's cluster, starting it at the first call; it
// skips t where the binaries are absent and fails it where the cluster
// does not start.
func (s *Shared) Get(t TB) *Cluster {
	t.Helper()
	Require(t)
	s.once.Do(s.start)
	if s.err != nil {
		t.Fatalf("starting the Kubernetes control plane: %v", s.err)
	}
	return s.c
}

func (s *Shared) start() {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s.c, s.err = StartCluster(ctx)
	if s.err == nil && s.Setup != nil {
		s.err = s.Setup(ctx, s.c)
	}
}

// Prestart starts the cluster in the background, where the binaries are
// here, so that the first Get finds it started or under way: for a test
// that would otherwise start a control plane of its own only once its
// turn among the parallel tests comes.
func (s *Shared) Prestart() {
	if Available() == nil {
		go s.once.Do(s.start)
	}
}

// Close closes the cluster if Get or Prestart started one, after waiting
// for a start under way. A second Close does nothing; a Get after it (go
// test -count=N runs the tests again) starts another cluster.
func (s *Shared) Close() {
	s.once.Do(func() {})
	if s.c != nil {
		s.c.Close()
	}
	s.c, s.err, s.once = nil, nil, sync.Once{}
}
