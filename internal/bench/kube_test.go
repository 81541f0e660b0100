package bench

import (
	"context"
	"testing"
	"time"

	"qshare/executor/kubernetes/kubetest"
)

// TestRunKube runs `qshare bench kube` at a tiny scale against the test
// control plane and checks that its figures are complete and consistent.
// It asserts nothing about speed.
func TestRunKube(t *testing.T) {
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
