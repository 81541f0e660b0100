package e2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCapacityPlanEndToEnd: qshare apply creates a capacity plan, a job
// whose payload names it runs on it, the server's event log names the plan
// on the job's submit line, and check-events, reading the configuration
// (plans included) from the server, finds the log clean.
func TestCapacityPlanEndToEnd(t *testing.T) {
	t.Parallel()
	events := filepath.Join(t.TempDir(), "events.jsonl")
	e := newEnv(t, "--events", events)
	start := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	end := time.Now().Add(time.Hour).UTC().Format(time.RFC3339)
	out := e.OK("apply", "-f", e.Write("plan.yaml", `serviceEnvironments:
  - serviceEnvironmentName: gpus
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
schedulingPolicies:
  - name: quotas
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: training
    priority: 1
    schedulingPolicy: quotas
    serviceEnvironment: gpus
    quotaShares:
      - quotaShareName: research
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND}
        preemptionConfiguration: {inSharePreemption: DISABLED}
capacityPlans:
  - {capacityPlanName: burst, jobQueue: training, quotaShareName: research, instanceType: ml.g5.xlarge,
     instanceCount: 2, startTime: "`+start+`", endTime: "`+end+`"}
`))
	if !strings.Contains(out, "capacityPlan burst created") {
		t.Fatalf("apply did not create the plan:\n%s", out)
	}
	arn := "arn:aws:sagemaker:us-east-1:000000000000:training-plan/burst"
	payload := e.Write("job.json", `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":2,"TrainingPlanArn":"`+arn+`"},"Environment":{"QSHARE_SIM_DURATION":"1h"}}`)
	e.OK("submit", "--queue", "training", "--share", "research", "--name", "planned", "--payload", payload)
	e.Await(map[string]string{"planned": "RUNNING"}, nil)
	b, err := os.ReadFile(events)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"event":"submit"`) || !strings.Contains(string(b), `"plan":"`+arn+`"`) {
		t.Fatalf("the event log does not name the plan on the submit line:\n%s", b)
	}
	if out := e.OK("check-events", events, "--settle", "1"); !strings.Contains(out, ": 0 violations") {
		t.Fatalf("check-events against the server's configuration:\n%s", out)
	}
}
