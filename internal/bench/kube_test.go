package bench

import (
	"context"
	"os"
	"testing"
	"time"

	"qshare/executor/kubernetes/kubetest"
	"qshare/internal/longtest"
)

// TestRunKube runs `qshare bench kube` at a tiny scale against the test
// control plane and checks that its figures are complete and consistent.
// It asserts nothing about speed. It checks the measuring tool, not
// qshare's behaviour, and starts a control plane of its own (a
// kube-apiserver start is some 5 s of CPU on the slower 2-core machines),
// so it runs where the long scenarios do.
func TestRunKube(t *testing.T) {
	longtest.Only(t, "`qshare bench kube` against a control plane of its own; the README's command checks the executor it measures in executor/kubernetes")
	t.Parallel() // a server (and API server) of its own; the two longest, side by side
	kubetest.Require(t)
	bin := buildQshare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := RunKube(ctx, KubeOptions{Server: ServerOptions{Binary: bin}, Jobs: 20, Clients: 2, Capacity: 10, Run: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if r.Jobs != 20 || r.JobsPerS <= 0 || r.WallS < 0.2 || r.SubmitToPod.P50 <= 0 || r.PodsPerS < r.JobsPerS || r.SubmitToPod.P99 < r.SubmitToPod.P50 || r.ServerCPUPerJobMs <= 0 {
		t.Errorf("result %+v", r)
	}
}

// TestRunKubeVsKueue runs `qshare bench kube --vs-kueue` at a tiny scale:
// Kueue's half on its own control plane, each admitted Job making its pod
// through the played Job controller. It checks that every figure is there
// and that the pods come after the admissions; nothing about speed.
func TestRunKubeVsKueue(t *testing.T) {
	kubetest.Require(t)
	if err := kueueAvailable(); err != nil {
		t.Skip(err)
	}
	if os.Geteuid() != 0 {
		t.Skip("Kueue's metrics certificate goes to /etc/kueue/metrics/certs, which needs root")
	}
	bin := buildQshare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	r, err := RunKube(ctx, KubeOptions{Server: ServerOptions{Binary: bin}, Jobs: 20, Clients: 2, Capacity: 20, Run: 200 * time.Millisecond, VsKueue: true})
	if err != nil {
		t.Fatal(err)
	}
	if r.KueueAdmitPerS <= 0 || r.KueuePodsPerS <= 0 || r.KueuePodsPerS > r.KueueAdmitPerS || r.Ratio <= 0 || r.KueueCreatedS <= 0 {
		t.Errorf("result %+v", r)
	}
}
