package plan_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/api"
	"qshare/config"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/internal/batchclient"
	"qshare/plan"
	"qshare/sqlite"
)

// newServer starts a real qshare server (SQLite store, simulated executor,
// the API handler) on a loopback port and returns an SDK client for it:
// the planner is tested against the server it plans for, not a stand-in.
func newServer(t *testing.T) *batch.Client {
	t.Helper()
	c, _ := newServerURL(t)
	return c
}

// newServerURL is newServer, with the capacity-plan endpoint mounted too,
// and the server's URL.
func newServerURL(t *testing.T) (*batch.Client, string) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	ex := simulated.New(simulated.Options{})
	log := slog.New(slog.DiscardHandler)
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Logger: log, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle(api.PlansPath, api.PlansHandler(d))
	mux.Handle(api.PlansPath+"/", api.PlansHandler(d))
	mux.Handle("/", api.New(d, log))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		d.Close()
		ex.Close()
		db.Close()
	})
	return batchclient.New(srv.URL, "us-east-1"), srv.URL
}

const example = `serviceEnvironments:
  - serviceEnvironmentName: gpu-pool
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 3}]
schedulingPolicies:
  - name: qm
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: training
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: gpu-pool
    quotaShares:
      - quotaShareName: QS2
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND}
        preemptionConfiguration: {inSharePreemption: DISABLED}
      - quotaShareName: QS1
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 200}
        preemptionConfiguration: {inSharePreemption: ENABLED}
`

var ctx = context.Background()

func parse(t *testing.T, src string) *config.File {
	t.Helper()
	f, err := config.Parse("test.yaml", []byte(src), config.Options{MaxSharesPerQueue: qshare.DefaultQuotaSharesPerQueue, AllowExternalReferences: true})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// lines renders a plan as apply prints it.
func lines(acts []plan.Action) string {
	var b strings.Builder
	for _, a := range acts {
		b.WriteString(a.String() + "\n")
	}
	return b.String()
}

// planned plans src against c with o and returns the plan as apply
// prints it.
func planned(t *testing.T, c plan.API, src string, o plan.Options) string {
	t.Helper()
	acts, err := plan.New(c, o).Plan(ctx, "test.yaml", parse(t, src))
	if err != nil {
		t.Fatal(err)
	}
	return lines(acts)
}

// apply plans and runs src against c and returns what it printed.
func apply(t *testing.T, c plan.API, src string, o plan.Options) string {
	t.Helper()
	var out bytes.Buffer
	o.Progress = &out
	o.Wait = 10 * time.Second
	if _, err := plan.New(c, o).Apply(ctx, "test.yaml", []byte(src), config.Options{MaxSharesPerQueue: qshare.DefaultQuotaSharesPerQueue, AllowExternalReferences: true}); err != nil {
		t.Fatalf("apply: %v", err)
	}
	return out.String()
}

func shareNames(t *testing.T, c *batch.Client, queue string) string {
	t.Helper()
	out, err := c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String(queue)})
	if err != nil {
		return "error: " + err.Error()
	}
	var names []string
	for _, s := range out.QuotaShares {
		names = append(names, aws.ToString(s.QuotaShareName))
	}
	return strings.Join(names, " ")
}

// TestCreateInOrderThenNoOp: on an empty server every resource is created,
// bottom of the hierarchy up and shares in the file's order; planning
// changes nothing; after the run a second plan finds nothing to do.
func TestCreateInOrderThenNoOp(t *testing.T) {
	c := newServer(t)
	got := planned(t, c, example, plan.Options{Wait: 10 * time.Second})
	want := `serviceEnvironment gpu-pool created
schedulingPolicy qm created
jobQueue training created
quotaShare training/QS2 created
quotaShare training/QS1 created
`
	if got != want {
		t.Errorf("plan on an empty server:\n%s\nwant\n%s", got, want)
	}
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})
	if err != nil || len(envs.ServiceEnvironments) != 0 {
		t.Fatalf("Plan changed the server: %+v, %v", envs, err)
	}

	if got := apply(t, c, example, plan.Options{}); got != want {
		t.Errorf("apply printed\n%s\nwant\n%s", got, want)
	}
	if got := shareNames(t, c, "training"); got != "QS1 QS2" {
		t.Errorf("after apply the queue has shares %q", got)
	}
	again := apply(t, c, example, plan.Options{})
	if strings.Count(again, " unchanged\n") != 5 || strings.Contains(again, "created") {
		t.Errorf("a second apply is not a no-op:\n%s", again)
	}
}

// TestDryRun marks every action, prints it, and changes nothing.
func TestDryRun(t *testing.T) {
	c := newServer(t)
	got := apply(t, c, example, plan.Options{DryRun: true})
	if strings.Count(got, " (dry run)\n") != 5 {
		t.Errorf("dry run printed\n%s", got)
	}
	out, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{})
	if err != nil || len(out.JobQueues) != 0 {
		t.Errorf("the dry run created queues: %+v, %v", out, err)
	}
}

// TestUpdates: each changed field is one change line, "configured" only
// for the resources that differ, and tags are planned from have to want.
func TestUpdates(t *testing.T) {
	c := newServer(t)
	apply(t, c, example, plan.Options{})
	changed := strings.NewReplacer(
		"maxCapacity: 3}", "maxCapacity: 4}",
		"priority: 1", "priority: 2\n    tags: {team: ml}",
		"{strategy: LEND_AND_BORROW, borrowLimit: 200}", "{strategy: LEND_AND_BORROW, borrowLimit: 50}",
		"{idleResourceAssignmentStrategy: FIFO}", "{idleResourceAssignmentStrategy: FIFO}\n    tags: {}",
	).Replace(example)
	got := planned(t, c, changed, plan.Options{})
	want := `serviceEnvironment gpu-pool configured: capacityLimits 3×ml.g5.xlarge -> 4×ml.g5.xlarge
schedulingPolicy qm unchanged
jobQueue training configured: priority 1 -> 2; tag team=ml
quotaShare training/QS2 unchanged
quotaShare training/QS1 configured: borrowLimit 200 -> 50
`
	if got != want {
		t.Errorf("plan of the changes:\n%s\nwant\n%s", got, want)
	}
	if got := apply(t, c, changed, plan.Options{}); got != want {
		t.Errorf("apply printed\n%s", got)
	}
	q, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"training"}})
	if err != nil || len(q.JobQueues) != 1 || aws.ToInt32(q.JobQueues[0].Priority) != 2 || q.JobQueues[0].Tags["team"] != "ml" {
		t.Errorf("the queue update did not take: %+v, %v", q, err)
	}
	// An empty tags map removes tags; no tags key keeps them.
	untag := strings.Replace(changed, "tags: {team: ml}", "tags: {}", 1)
	got = planned(t, c, untag, plan.Options{})
	if !strings.Contains(got, "jobQueue training configured: untag team\n") {
		t.Errorf("plan with tags {}:\n%s", got)
	}
	keep := strings.Replace(changed, "\n    tags: {team: ml}", "", 1)
	got = planned(t, c, keep, plan.Options{})
	if !strings.Contains(got, "jobQueue training unchanged\n") {
		t.Errorf("plan without a tags key:\n%s", got)
	}
}

// TestPruneOrder: without Prune nothing is deleted; with it, what the file
// does not name is deleted from the top down (shares, queues, policies,
// environments), each kind in name order, after the creations and updates.
func TestPruneOrder(t *testing.T) {
	c := newServer(t)
	apply(t, c, example, plan.Options{})
	apply(t, c, `serviceEnvironments:
  - serviceEnvironmentName: b-env
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
  - serviceEnvironmentName: a-env
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
schedulingPolicies:
  - name: other
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: zq
    priority: 1
    schedulingPolicy: other
    serviceEnvironment: b-env
    quotaShares:
      - quotaShareName: Z
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: RESERVE}
        preemptionConfiguration: {inSharePreemption: DISABLED}
`, plan.Options{})
	only := strings.Replace(example, `      - quotaShareName: QS1
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 1}]
        resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 200}
        preemptionConfiguration: {inSharePreemption: ENABLED}
`, "", 1)

	got := planned(t, c, only, plan.Options{})
	if strings.Contains(got, "deleted") {
		t.Errorf("a plan without Prune deletes:\n%s", got)
	}

	got = planned(t, c, only, plan.Options{Prune: true})
	want := `serviceEnvironment gpu-pool unchanged
schedulingPolicy qm unchanged
jobQueue training unchanged
quotaShare training/QS2 unchanged
quotaShare training/QS1 deleted
quotaShare zq/Z deleted
jobQueue zq deleted
schedulingPolicy other deleted
serviceEnvironment a-env deleted
serviceEnvironment b-env deleted
`
	if got != want {
		t.Errorf("prune plan:\n%s\nwant\n%s", got, want)
	}
	got = apply(t, c, only, plan.Options{Prune: true})
	if got != want {
		t.Errorf("prune printed\n%s", got)
	}
	if got := shareNames(t, c, "training"); got != "QS2" {
		t.Errorf("after prune training has %q", got)
	}
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})
	if err != nil {
		t.Fatal(err)
	}
	var live []string
	for _, e := range envs.ServiceEnvironments {
		if e.Status != types.ServiceEnvironmentStatusDeleted {
			live = append(live, aws.ToString(e.ServiceEnvironmentName))
		}
	}
	if fmt.Sprint(live) != "[gpu-pool]" {
		t.Errorf("after prune the environments are %v", live)
	}
}

// TestErrors: problems found while planning change nothing and say what
// to do; a failed action stops the run and names the action.
func TestErrors(t *testing.T) {
	c := newServer(t)

	// A reference neither the file nor the server has: every one is
	// reported, with its field.
	dangling := `jobQueues:
  - jobQueueName: q
    priority: 1
    schedulingPolicy: nope
    serviceEnvironment: nowhere
`
	_, err := plan.New(c, plan.Options{}).Plan(ctx, "test.yaml", parse(t, dangling))
	var ce *config.Errors
	if !errors.As(err, &ce) || len(ce.Problems) != 2 || ce.Problems[0].Path != "jobQueues[0].schedulingPolicy" || ce.Problems[1].Path != "jobQueues[0].serviceEnvironment" {
		t.Fatalf("dangling references: %v", err)
	}

	apply(t, c, example, plan.Options{})

	// A prune that would end unfinished jobs is refused before anything
	// changes.
	payload := `{"TrainingJobName":"t","AlgorithmSpecification":{"TrainingImage":"img","TrainingInputMode":"File"},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":1},"StoppingCondition":{"MaxRuntimeInSeconds":86400},"Environment":{"QSHARE_SIM_DURATION":"1h"}}`
	if _, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String("busy"), JobQueue: aws.String("training"), QuotaShareName: aws.String("QS1"),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload),
	}); err != nil {
		t.Fatal(err)
	}
	withoutQS1 := example[:strings.Index(example, "      - quotaShareName: QS1")]
	_, err = plan.New(c, plan.Options{Prune: true}).Plan(ctx, "test.yaml", parse(t, withoutQS1))
	if qshare.ErrorCodeOf(err) != qshare.ECONFLICT || !strings.Contains(err.Error(), "quota share training/QS1 has 1 unfinished job (busy)") {
		t.Errorf("prune of a share with a job: %v", err)
	}
	if got := shareNames(t, c, "training"); got != "QS1 QS2" {
		t.Errorf("the refused prune changed the shares: %q", got)
	}

	// A plan whose action the server refuses when it runs (here, another
	// client created the environment in between): Run stops there, returns
	// the actions done before it, and names the action.
	c2 := newServer(t)
	a := plan.New(c2, plan.Options{Wait: 10 * time.Second})
	acts, err := a.Plan(ctx, "test.yaml", parse(t, example))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{
		ServiceEnvironmentName: aws.String("gpu-pool"), ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(3)}},
	}); err != nil {
		t.Fatal(err)
	}
	done, err := a.Run(ctx, acts)
	var ae *plan.ActionError
	if !errors.As(err, &ae) || ae.Kind != "serviceEnvironment" || ae.Name != "gpu-pool" || len(done) != 0 {
		t.Fatalf("run after a concurrent create: %d done, %v", len(done), err)
	}
	var ex *types.ClientException
	if !errors.As(err, &ex) || !strings.HasPrefix(err.Error(), "serviceEnvironment gpu-pool: ") {
		t.Errorf("the action's error does not carry the API's: %v", err)
	}
}

// TestApplyCapacityPlans: capacityPlans are created, left unchanged when
// they match, replaced when they differ, and pruned when the file drops
// them (before the shares they give capacity to); a file with plans needs
// the endpoint.
func TestApplyCapacityPlans(t *testing.T) {
	c, u := newServerURL(t)
	pc := &plan.PlanClient{Endpoint: u}
	withPlan := example + `capacityPlans:
  - {capacityPlanName: p5-two-weeks, jobQueue: training, quotaShareName: QS1, instanceType: ml.p5.48xlarge,
     instanceCount: 16, startTime: "2026-12-01T00:00:00Z", endTime: "2026-12-15T00:00:00Z"}
`
	apply := func(file string, prune bool) []string {
		t.Helper()
		acts, err := plan.New(c, plan.Options{Plans: pc, Prune: prune, Wait: 10 * time.Second}).Apply(ctx, "f.yaml", []byte(file), config.Options{AllowExternalReferences: true})
		if err != nil {
			t.Fatalf("apply: %v", err)
		}
		var out []string
		for _, a := range acts {
			if a.Kind == "capacityPlan" {
				out = append(out, a.String())
			}
		}
		return out
	}
	if got := apply(withPlan, false); len(got) != 1 || got[0] != "capacityPlan p5-two-weeks created" {
		t.Fatalf("first apply: %q", got)
	}
	if got := apply(withPlan, false); len(got) != 1 || got[0] != "capacityPlan p5-two-weeks unchanged" {
		t.Fatalf("second apply: %q", got)
	}
	changed := strings.Replace(withPlan, "instanceCount: 16", "instanceCount: 8, warningSeconds: 300", 1)
	if got := apply(changed, false); len(got) != 1 || got[0] != "capacityPlan p5-two-weeks configured: instanceCount 16 → 8; warningSeconds 600 → 300" {
		t.Fatalf("changed apply: %q", got)
	}
	ps, err := pc.Plans(ctx)
	if err != nil || len(ps) != 1 || ps[0].InstanceCount != 8 || ps[0].Warning() != 300*time.Second {
		t.Fatalf("the server's plans: %+v, %v", ps, err)
	}
	if got := apply(example, true); len(got) != 1 || got[0] != "capacityPlan p5-two-weeks deleted" {
		t.Fatalf("prune: %q", got)
	}
	if ps, err := pc.Plans(ctx); err != nil || len(ps) != 0 {
		t.Fatalf("after the prune: %+v, %v", ps, err)
	}
	_, err = plan.New(c, plan.Options{}).Apply(ctx, "f.yaml", []byte(withPlan), config.Options{AllowExternalReferences: true})
	if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "capacityPlans") {
		t.Fatalf("apply with plans and no endpoint: %v", err)
	}
}
