package kubee2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor/kubernetes/kubetest"
)

// TestBesideAnotherExecutor: one server with the Kubernetes executor
// (named default) and a simulated one (sim) at once (qshare serve
// --executors, docs/executors.md): the worked example's environment runs
// its job as a pod on the API server; a job of an environment tagged
// qshare:executor=sim runs as no pod at all; both succeed, and the pod's
// log is served through the Kubernetes executor.
func TestBesideAnotherExecutor(t *testing.T) {
	c := newSideCluster(t, "g5.xlarge", 2, 1)
	dir := t.TempDir()
	file := filepath.Join(dir, "executors.yaml")
	if err := os.WriteFile(file, []byte("default: {kind: kubernetes, kubeconfig: "+c.Kubeconfig()+", namespace: "+c.ns+", kubeConfig: "+c.kubeConfigFile(dir, "")+"}\nsim: {kind: simulated}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, c: c, dataDir: filepath.Join(dir, "data"), args: []string{"--executors", file, "--stop-grace", "5s"}}
	s.start()
	if !strings.Contains(s.proc.Log(), "executors default (kubernetes), sim (simulated)") {
		t.Errorf("the listening line does not name both executors:\n%s", s.proc.Log())
	}
	s.apply(threeShares(t))
	ctx := context.Background()
	_, err := s.C.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("sim-pool"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining, Tags: map[string]string{"qshare:executor": "sim"},
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(2)}}})
	must(t, err)
	_, err = s.C.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("sim-q"), Priority: aws.Int32(1),
		SchedulingPolicyArn: aws.String("qm"), JobQueueType: types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("sim-pool")}}})
	must(t, err)
	_, err = s.C.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("S"), JobQueue: aws.String("sim-q"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(2)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyReserve},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	must(t, err)

	pod := s.submit("in-k8s", "QS1", 1, g5, 1, kubetest.Program{Run: time.Second, Output: "hello from a pod"})
	out, err := s.C.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String("in-sim"), JobQueue: aws.String("sim-q"), QuotaShareName: aws.String("S"),
		ServiceJobType:        types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(`{"ResourceConfig":{"InstanceType":"` + g5 + `","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"2s"}}`)})
	must(t, err)
	sim := aws.ToString(out.JobId)
	// The simulated job runs 2 s from its start, a moment after its
	// submit; the pod's start took 2 s beside the README's other tests
	// (6 December 2026), and awaited first, the simulated job had ended
	// by then. So it is awaited first.
	s.Await(sim, "RUNNING", func(d *batch.DescribeServiceJobOutput) bool { return d.Status == types.ServiceJobStatusRunning })
	s.Await(pod, "RUNNING", func(d *batch.DescribeServiceJobOutput) bool { return d.Status == types.ServiceJobStatusRunning })
	if n := len(c.pods(pod)); n != 1 {
		t.Errorf("the Kubernetes environment's job has %d pods, want 1", n)
	}
	if n := len(c.pods(sim)); n != 0 {
		t.Errorf("the simulated environment's job has %d pods, want none", n)
	}
	for _, id := range []string{pod, sim} {
		if d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded); len(d.Attempts) != 1 {
			t.Errorf("%s: %d attempts, want 1", aws.ToString(d.JobName), len(d.Attempts))
		}
	}
	if out := s.logs(pod); out != "hello from a pod\n" {
		t.Errorf("the pod's log through the server: %q", out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
