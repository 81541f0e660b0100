package e2e_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/internal/batchclient"
)

// sharesView is the part of `qshare shares -o json` the tests read.
type sharesView []struct {
	JobQueue           string `json:"jobQueue"`
	ServiceEnvironment string `json:"serviceEnvironment"`
	Capacity           []struct {
		CapacityUnit string `json:"capacityUnit"`
		MaxCapacity  int    `json:"maxCapacity"`
		InUse        int    `json:"inUse"`
	} `json:"capacity"`
	QuotaShares []struct {
		QuotaShareName    string `json:"quotaShareName"`
		Strategy          string `json:"strategy"`
		InSharePreemption string `json:"inSharePreemption"`
		Capacity          []struct {
			Owned        int `json:"owned"`
			InUse        int `json:"inUse"`
			Borrowed     int `json:"borrowed"`
			Lent         int `json:"lent"`
			Idle         int `json:"idle"`
			BorrowedFrom []struct {
				QuotaShare string `json:"quotaShare"`
				Quantity   int    `json:"quantity"`
			} `json:"borrowedFrom"`
		} `json:"capacity"`
		Waiting int `json:"waiting"`
		Head    *struct {
			JobName string `json:"jobName"`
		} `json:"head"`
	} `json:"quotaShares"`
}

func (v sharesView) names() string {
	var out []string
	for _, q := range v {
		for _, s := range q.QuotaShares {
			out = append(out, q.JobQueue+"/"+s.QuotaShareName)
		}
	}
	return strings.Join(out, " ")
}

func TestApplyDryRunAndPrune(t *testing.T) {
	t.Parallel()
	e := newEnv(t)

	out := e.OK("apply", "-f", "examples/three-shares.yaml", "--dry-run")
	want := `serviceEnvironment gpu-pool created (dry run)
schedulingPolicy qm created (dry run)
jobQueue training created (dry run)
quotaShare training/QS1 created (dry run)
quotaShare training/QS2 created (dry run)
quotaShare training/QS3 created (dry run)
`
	if out != want {
		t.Errorf("dry run printed\n%s\nwant\n%s", out, want)
	}
	if out := e.OK("shares"); !strings.Contains(out, "no job queue has quota shares") {
		t.Fatalf("the dry run changed the server:\n%s", out)
	}

	if out := e.OK("apply", "-f", "examples/three-shares.yaml"); out != strings.ReplaceAll(want, " (dry run)", "") {
		t.Errorf("apply printed\n%s", out)
	}
	// apply returns only once each resource has settled: everything is VALID.
	c := batchclient.New(e.Srv.Endpoint, "us-east-1")
	ctx := context.Background()
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})
	if err != nil || len(envs.ServiceEnvironments) != 1 || envs.ServiceEnvironments[0].Status != types.ServiceEnvironmentStatusValid {
		t.Errorf("after apply: service environments %+v, %v; want one VALID", envs, err)
	}
	queues, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{})
	if err != nil || len(queues.JobQueues) != 1 || queues.JobQueues[0].Status != types.JQStatusValid {
		t.Errorf("after apply: job queues %+v, %v; want one VALID", queues, err)
	}
	shares, err := c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("training")})
	if err != nil || len(shares.QuotaShares) != 3 {
		t.Fatalf("after apply: quota shares %+v, %v; want 3", shares, err)
	}
	for _, sh := range shares.QuotaShares {
		if sh.Status != types.QuotaShareStatusValid {
			t.Errorf("after apply: quota share %s is %s, want VALID", aws.ToString(sh.QuotaShareName), sh.Status)
		}
	}
	if out := e.OK("apply", "-f", "examples/three-shares.yaml"); strings.Count(out, " unchanged\n") != 6 {
		t.Errorf("a second apply changed something:\n%s", out)
	}

	// Change the file: a bigger environment, QS3 gone, QS4 new, QS1 with
	// in-share preemption off and a tag.
	example, err := os.ReadFile(root + "/examples/three-shares.yaml")
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.NewReplacer(
		"maxCapacity: 3}", "maxCapacity: 4}",
		"quotaShareName: QS3", "quotaShareName: QS4",
		"{inSharePreemption: ENABLED}", "{inSharePreemption: DISABLED}\n        tags: {team: vision}",
	).Replace(string(example))
	file := e.Write("changed.yaml", changed)

	out = e.OK("apply", "-f", file, "--prune", "--dry-run")
	for _, line := range []string{
		"serviceEnvironment gpu-pool configured: capacityLimits 3×ml.g5.xlarge -> 4×ml.g5.xlarge (dry run)",
		"quotaShare training/QS1 configured: inSharePreemption ENABLED -> DISABLED; tag team=vision (dry run)",
		"quotaShare training/QS4 created (dry run)",
		"quotaShare training/QS3 deleted (dry run)",
	} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("prune dry run lacks %q:\n%s", line, out)
		}
	}
	var v sharesView
	e.JSONOf(&v, "shares")
	if v.names() != "training/QS1 training/QS2 training/QS3" {
		t.Fatalf("the dry run changed the shares: %s", v.names())
	}

	// Without --prune, QS3 stays.
	e.OK("apply", "-f", file)
	v = nil
	e.JSONOf(&v, "shares")
	if v.names() != "training/QS1 training/QS2 training/QS3 training/QS4" {
		t.Errorf("after apply without --prune: %s", v.names())
	}
	if v[0].Capacity[0].MaxCapacity != 4 || v[0].QuotaShares[0].InSharePreemption != "DISABLED" {
		t.Errorf("the update did not take: %+v", v[0])
	}

	// --prune refuses, before it changes anything, to delete a share
	// whose jobs are not finished.
	e.Submit("QS3", "reserved-job", 1)
	msg := e.Fail("apply", "-f", file, "--prune")
	if !strings.Contains(msg, "quota share training/QS3 has 1 unfinished job (reserved-job)") {
		t.Errorf("prune with an unfinished job: %s", msg)
	}
	if j := e.describe("reserved-job"); j.Status == "FAILED" {
		t.Errorf("prune terminated a job: %+v", j)
	}
	e.OK("terminate", "reserved-job", "--reason", "make way for the prune")
	// A termination is acknowledged before the job has stopped; the prune
	// refuses until it has.
	e.Await(map[string]string{"reserved-job": "FAILED"}, nil)
	out = e.OK("apply", "-f", file, "--prune")
	if !strings.Contains(out, "quotaShare training/QS3 deleted\n") {
		t.Errorf("prune printed\n%s", out)
	}
	v = nil
	e.JSONOf(&v, "shares")
	if v.names() != "training/QS1 training/QS2 training/QS4" {
		t.Errorf("after prune: %s", v.names())
	}

	// A file with the environment alone prunes the queue and the policy.
	only := e.Write("env-only.yaml", "serviceEnvironments:\n  - serviceEnvironmentName: gpu-pool\n    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 4}]\n")
	out = e.OK("apply", "-f", only, "--prune")
	for _, line := range []string{"quotaShare training/QS1 deleted", "jobQueue training deleted", "schedulingPolicy qm deleted", "serviceEnvironment gpu-pool unchanged"} {
		if !strings.Contains(out, line+"\n") {
			t.Errorf("prune to the environment lacks %q:\n%s", line, out)
		}
	}
	if out := e.OK("shares"); !strings.Contains(out, "no job queue has quota shares") {
		t.Errorf("queues left after prune:\n%s", out)
	}

	// JSON output of apply lists the actions.
	var acts []struct{ Kind, Name, Action string }
	e.JSONOf(&acts, "apply", "-f", "examples/three-shares.yaml")
	if len(acts) != 6 || acts[2].Kind != "jobQueue" || acts[2].Action != "created" {
		t.Errorf("apply -o json: %+v", acts)
	}
}

func TestApplyFileErrors(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	bad := e.Write("bad.yaml", `serviceEnvironments:
  - serviceEnvironmentName: gpu-pool
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 0}]
schedulingPolicies:
  - name: qm
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: training
    priority: high
    schedulingPolicy: qm
    serviceEnvironment: gpu-pool
    quotaShares:
      - quotaShareName: QS1
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND, borrowLimit: 200}
        preemptionConfiguration: {inSharePreemption: MAYBE}
        colour: blue
`)
	_, stderr, code := e.Run("apply", "-f", bad)
	if code == 0 {
		t.Fatal("apply of a bad file succeeded")
	}
	for _, want := range []string{
		"has 2 errors",
		"line 9: jobQueues[0].priority must be an integer",
		"line 17: jobQueues[0].quotaShares[0]: unknown key \"colour\"",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("errors lack %q:\n%s", want, stderr)
		}
	}
	if out := e.OK("shares"); !strings.Contains(out, "no job queue has quota shares") {
		t.Errorf("a bad file changed the server:\n%s", out)
	}

	// Problems of values are all reported too, once the shape is right.
	bad = e.Write("bad2.yaml", strings.NewReplacer("        colour: blue\n", "", "priority: high", "priority: 1").Replace(readFile(t, bad)))
	_, stderr, _ = e.Run("apply", "-f", bad)
	for _, want := range []string{
		"has 3 errors",
		"line 3: serviceEnvironments[0].capacityLimits[0].maxCapacity 0 is not valid",
		"line 15: jobQueues[0].quotaShares[0].resourceSharingConfiguration.borrowLimit is only allowed with strategy LEND_AND_BORROW",
		"line 16: jobQueues[0].quotaShares[0].preemptionConfiguration.inSharePreemption \"MAYBE\" is not valid",
	} {
		if !strings.Contains(stderr, want) {
			t.Errorf("errors lack %q:\n%s", want, stderr)
		}
	}

	// A reference to what exists neither in the file nor on the server.
	ref := e.Write("ref.yaml", "jobQueues:\n  - jobQueueName: q\n    priority: 1\n    schedulingPolicy: nope\n    serviceEnvironment: gpu-pool\n")
	_, stderr, _ = e.Run("apply", "-f", ref)
	if !strings.Contains(stderr, `no scheduling policy "nope" in the file or on the server`) || !strings.Contains(stderr, `no service environment "gpu-pool"`) {
		t.Errorf("unresolved references: %s", stderr)
	}

	e.failsWith("cannot read the configuration", "apply", "-f", e.Dir+"/missing.yaml")
	msg := e.Fail("apply")
	if !strings.Contains(msg, "-f FILE is required") {
		t.Errorf("no file: %s", msg)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
