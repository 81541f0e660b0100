package fault

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

	"qshare/internal/batchclient"
)

// twoEnvConfig is two environments, one on each executor of
// TestFailoverExecutors' file, each with its queue and share A.
const twoEnvConfig = `serviceEnvironments:
  - serviceEnvironmentName: pool-a
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
  - serviceEnvironmentName: pool-b
    executor: second
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
schedulingPolicies:
  - name: qm
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: qa
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: pool-a
    quotaShares:
      - quotaShareName: A
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
        resourceSharingConfiguration: {strategy: RESERVE}
        preemptionConfiguration: {inSharePreemption: DISABLED}
  - jobQueueName: qb
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: pool-b
    quotaShares:
      - quotaShareName: A
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
        resourceSharingConfiguration: {strategy: RESERVE}
        preemptionConfiguration: {inSharePreemption: DISABLED}
`

// TestFailoverExecutors: two servers on one PostgreSQL store with the same
// executors file (docs/executors.md): the leader runs a job on each of its
// two executors and is killed with SIGKILL; the standby that takes over
// recovers each attempt through the executor the store names, and both
// jobs succeed with their first attempt.
func TestFailoverExecutors(t *testing.T) {
	parallelBinary(t)
	file := filepath.Join(t.TempDir(), "executors.yaml")
	if err := os.WriteFile(file, []byte("default: {kind: simulated}\nsecond: {kind: simulated}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cl := newClusterWith(t, 2, "5s", []string{"--executors", file})
	leader := cl.waitLeader(30*time.Second, -1)
	applyConfig(t, cl.servers[leader].Endpoint, twoEnvConfig)
	jobs := batchclient.Jobs{T: t, C: client(cl.servers[leader].Endpoint), Limit: time.Minute}
	var ids []string
	for _, q := range []string{"qa", "qb"} {
		out, err := jobs.C.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String("on-" + q), JobQueue: aws.String(q),
			QuotaShareName: aws.String("A"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"8s"}}`)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.JobId))
		jobs.AwaitStatus(ids[len(ids)-1], types.ServiceJobStatusRunning)
	}
	cl.servers[leader].Kill()
	next := cl.waitLeader(30*time.Second, leader)
	jobs.C = client(cl.servers[next].Endpoint)
	for _, id := range ids {
		d := jobs.AwaitStatus(id, types.ServiceJobStatusSucceeded)
		if len(d.Attempts) != 1 {
			t.Errorf("%s: %d attempts after the failover, want its first only", aws.ToString(d.JobName), len(d.Attempts))
		}
	}
	if n := strings.Count(cl.log(next), "recovery: attempt re-attached"); n != 2 {
		t.Errorf("the new leader re-attached %d attempts, want 2 (one per executor):\n%s", n, cl.log(next))
	}
}
