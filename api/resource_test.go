package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/executor/simulated"
)

// TestResourceLifecycle creates, describes, updates and deletes every kind
// of resource in the order the reference client does, checking the
// preconditions AWS enforces on the way.
func TestResourceLifecycle(t *testing.T) {
	s := newServer(t)
	c := s.c
	queueARN := s.setup("q", 4, shareSpec{name: "A", limit: 2, strategy: types.QuotaShareResourceSharingStrategyLend})
	envARN := "arn:aws:batch:us-east-1:000000000000:service-environment/q-env"
	polARN := "arn:aws:batch:us-east-1:000000000000:scheduling-policy/q-policy"
	shareARN := queueARN + "/quota-share/A"
	if queueARN != "arn:aws:batch:us-east-1:000000000000:job-queue/q" {
		t.Fatalf("queue ARN = %s", queueARN)
	}

	// Duplicates.
	_, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("q-env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}}})
	clientErr(t, err, "Object already exists")
	_, err = c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("q-policy")})
	clientErr(t, err, "Object already exists")
	_, err = c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("A"), JobQueue: aws.String("q"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyReserve},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	clientErr(t, err, "already exists")

	// Describe: by name and by ARN; status VALID, state ENABLED.
	envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{envARN}})
	must(t, err)
	if len(envs.ServiceEnvironments) != 1 || envs.ServiceEnvironments[0].Status != types.ServiceEnvironmentStatusValid ||
		envs.ServiceEnvironments[0].State != types.ServiceEnvironmentStateEnabled || aws.ToInt32(envs.ServiceEnvironments[0].CapacityLimits[0].MaxCapacity) != 4 {
		t.Fatalf("DescribeServiceEnvironments = %+v", envs.ServiceEnvironments)
	}
	qs, err := c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{"q"}})
	must(t, err)
	if len(qs.JobQueues) != 1 || aws.ToString(qs.JobQueues[0].SchedulingPolicyArn) != polARN || qs.JobQueues[0].Status != types.JQStatusValid ||
		qs.JobQueues[0].JobQueueType != types.JobQueueTypeSagemakerTraining || aws.ToString(qs.JobQueues[0].ServiceEnvironmentOrder[0].ServiceEnvironment) != envARN {
		t.Fatalf("DescribeJobQueues = %+v", qs.JobQueues)
	}
	pols, err := c.DescribeSchedulingPolicies(ctx, &batch.DescribeSchedulingPoliciesInput{Arns: []string{polARN}})
	must(t, err)
	if len(pols.SchedulingPolicies) != 1 || pols.SchedulingPolicies[0].QuotaSharePolicy.IdleResourceAssignmentStrategy != types.QuotaShareIdleResourceAssignmentStrategyFifo {
		t.Fatalf("DescribeSchedulingPolicies = %+v", pols.SchedulingPolicies)
	}
	sh, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(shareARN)})
	must(t, err)
	if aws.ToString(sh.JobQueueArn) != queueARN || sh.Status != types.QuotaShareStatusValid || sh.State != types.QuotaShareStateEnabled ||
		sh.ResourceSharingConfiguration.Strategy != types.QuotaShareResourceSharingStrategyLend || sh.ResourceSharingConfiguration.BorrowLimit != nil {
		t.Fatalf("DescribeQuotaShare = %+v", sh)
	}

	// Update a policy in place, then give the queue another quota-share policy.
	_, err = c.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: aws.String(polARN),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(t, err)
	pol2, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("q-policy-2"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(t, err)
	uq, err := c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), SchedulingPolicyArn: pol2.Arn, Priority: aws.Int32(7)})
	must(t, err)
	qs, err = c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{*uq.JobQueueArn}})
	must(t, err)
	if aws.ToString(qs.JobQueues[0].SchedulingPolicyArn) != *pol2.Arn || aws.ToInt32(qs.JobQueues[0].Priority) != 7 {
		t.Fatalf("after UpdateJobQueue: %+v", qs.JobQueues[0])
	}
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String("q"), SchedulingPolicyArn: aws.String(polARN)})
	must(t, err)
	_, err = c.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: pol2.Arn})
	must(t, err)

	// Update a share: LEND_AND_BORROW with a borrow limit, then back.
	_, err = c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(shareARN),
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, BorrowLimit: aws.Int32(50)},
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(3)}}})
	must(t, err)
	sh, err = c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(shareARN)})
	must(t, err)
	if aws.ToInt32(sh.ResourceSharingConfiguration.BorrowLimit) != 50 || aws.ToInt32(sh.CapacityLimits[0].MaxCapacity) != 3 {
		t.Fatalf("after update: %+v", sh)
	}

	// Deletion needs DISABLED first, and goes share -> queue -> policy -> environment.
	_, err = c.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: aws.String(shareARN)})
	clientErr(t, err, "ENABLED", "DISABLED")
	_, err = c.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: aws.String(queueARN), State: types.JQStateDisabled})
	must(t, err)
	_, err = c.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: aws.String("q")})
	clientErr(t, err, "still has quota shares", "A")
	_, err = c.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: aws.String(polARN)})
	clientErr(t, err, "used by job queue", "q")
	_, err = c.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: aws.String("q-env"), State: types.ServiceEnvironmentStateDisabled})
	must(t, err)
	_, err = c.DeleteServiceEnvironment(ctx, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: aws.String(envARN)})
	clientErr(t, err, "used by job queue")

	_, err = c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(shareARN), State: types.QuotaShareStateDisabled})
	must(t, err)
	_, err = c.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: aws.String(shareARN)})
	must(t, err)
	_, err = c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(shareARN)})
	clientErr(t, err, "does not exist")
	_, err = c.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: aws.String("q")})
	must(t, err)
	_, err = c.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: aws.String(polARN)})
	must(t, err)
	_, err = c.DeleteServiceEnvironment(ctx, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: aws.String(envARN)})
	must(t, err)
	envs, err = c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{})
	must(t, err)
	qs, err = c.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{})
	must(t, err)
	if len(envs.ServiceEnvironments)+len(qs.JobQueues) != 0 {
		t.Fatalf("after deletes: %d environments, %d queues", len(envs.ServiceEnvironments), len(qs.JobQueues))
	}
}

// TestResourcePagination pages through every paginated resource listing with
// the SDK's paginators.
func TestResourcePagination(t *testing.T) {
	s := newServer(t, func(c *daemonConfig) { c.MaxSharesPerQueue = 30 })
	c := s.c
	s.setup("q", 10)
	for i := range 25 {
		s.createPolicy(fmt.Sprintf("p%02d", i))
		s.createEnv(fmt.Sprintf("e%02d", i), 1)
		s.createShare(aws.String("q"), shareSpec{name: fmt.Sprintf("s%02d", i), limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
	}
	count := func(name string, pages, items int, wantPages, wantItems int) {
		t.Helper()
		if pages != wantPages || items != wantItems {
			t.Fatalf("%s: %d pages, %d items; want %d pages, %d items", name, pages, items, wantPages, wantItems)
		}
	}
	pp := batch.NewListSchedulingPoliciesPaginator(c, &batch.ListSchedulingPoliciesInput{}, func(o *batch.ListSchedulingPoliciesPaginatorOptions) { o.Limit = 10 })
	policies, pages := allPages(t, pp, func(out *batch.ListSchedulingPoliciesOutput) []types.SchedulingPolicyListingDetail {
		return out.SchedulingPolicies
	})
	seen := map[string]bool{}
	for _, p := range policies {
		if seen[*p.Arn] {
			t.Fatalf("policy %s listed twice", *p.Arn)
		}
		seen[*p.Arn] = true
	}
	count("ListSchedulingPolicies", pages, len(policies), 3, 26)

	ep := batch.NewDescribeServiceEnvironmentsPaginator(c, &batch.DescribeServiceEnvironmentsInput{}, func(o *batch.DescribeServiceEnvironmentsPaginatorOptions) { o.Limit = 7 })
	envs, pages := allPages(t, ep, func(out *batch.DescribeServiceEnvironmentsOutput) []types.ServiceEnvironmentDetail {
		return out.ServiceEnvironments
	})
	count("DescribeServiceEnvironments", pages, len(envs), 4, 26)

	sp := batch.NewListQuotaSharesPaginator(c, &batch.ListQuotaSharesInput{JobQueue: aws.String("q")}, func(o *batch.ListQuotaSharesPaginatorOptions) { o.Limit = 5 })
	shares, pages := allPages(t, sp, func(out *batch.ListQuotaSharesOutput) []types.QuotaShareDetail { return out.QuotaShares })
	count("ListQuotaShares", pages, len(shares), 5, 25)

	// The default page is 100: one page.
	out, err := c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q")})
	must(t, err)
	if len(out.QuotaShares) != 25 || out.NextToken != nil {
		t.Fatalf("default page: %d shares, next %v", len(out.QuotaShares), out.NextToken)
	}
	_, err = c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q"), MaxResults: aws.Int32(101)})
	clientErr(t, err, "maxResults", "1 to 100")
	_, err = c.ListQuotaShares(ctx, &batch.ListQuotaSharesInput{JobQueue: aws.String("q"), NextToken: aws.String("!!")})
	clientErr(t, err, "nextToken")
}

// pager is what the SDK's paginators have in common.
type pager[O any] interface {
	HasMorePages() bool
	NextPage(context.Context, ...func(*batch.Options)) (O, error)
}

// allPages reads every page of p and returns the items of all of them
// (items says where a page holds them) and the number of pages.
func allPages[O, T any](t *testing.T, p pager[O], items func(O) []T) (all []T, pages int) {
	t.Helper()
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		must(t, err)
		pages++
		all = append(all, items(out)...)
	}
	return all, pages
}

// TestTags tags, lists and untags every kind of resource, including quota
// shares and service jobs, with ARNs that the SDK escapes in the path.
func TestTags(t *testing.T) {
	s := newServer(t)
	c := s.c
	queueARN := s.setup("q", 2, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve})
	job := s.submit("q", "A", "j", 0, payload(g5, 1, 0, 0))
	arns := []string{
		"arn:aws:batch:us-east-1:000000000000:service-environment/q-env",
		"arn:aws:batch:us-east-1:000000000000:scheduling-policy/q-policy",
		queueARN,
		queueARN + "/quota-share/A",
		*s.describe(job).JobArn,
	}
	for _, arn := range arns {
		_, err := c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(arn), Tags: map[string]string{"team": "ml", "cost": "1"}})
		must(t, err)
		_, err = c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(arn), Tags: map[string]string{"cost": "2"}})
		must(t, err)
		_, err = c.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: []string{"team", "absent"}})
		must(t, err)
		out, err := c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String(arn)})
		must(t, err)
		if len(out.Tags) != 1 || out.Tags["cost"] != "2" {
			t.Fatalf("tags of %s = %v, want {cost: 2}", arn, out.Tags)
		}
	}
	// Tags show in describes.
	sh, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(queueARN + "/quota-share/A")})
	must(t, err)
	if sh.Tags["cost"] != "2" {
		t.Fatalf("DescribeQuotaShare tags = %v", sh.Tags)
	}
	if d := s.describe(job); d.Tags["cost"] != "2" {
		t.Fatalf("DescribeServiceJob tags = %v", d.Tags)
	}
	_, err = c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String("arn:aws:batch:us-east-1:000000000000:job-queue/nope")})
	clientErr(t, err, "does not exist")
	_, err = c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String("arn:aws:batch:eu-west-1:000000000000:job-queue/q")})
	clientErr(t, err, "does not exist")
	big := map[string]string{}
	for i := range 51 {
		big[fmt.Sprint("k", i)] = "v"
	}
	_, err = c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(queueARN), Tags: big})
	clientErr(t, err, "at most 50")
	// Creating with tags.
	_, err = c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("tagged"), Tags: map[string]string{"a": "b"}})
	must(t, err)
	out, err := c.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String("arn:aws:batch:us-east-1:000000000000:scheduling-policy/tagged")})
	must(t, err)
	if out.Tags["a"] != "b" {
		t.Fatalf("tags at create: %v", out.Tags)
	}
}

// fewGPUs is an executor whose host has 2 GPUs of one instance each.
type fewGPUs struct{ *simulated.Executor }

func (fewGPUs) CheckCapacity(l qshare.Capacity) string {
	if n := l["ml.g5.xlarge"]; n > 2 {
		return "the limits need 3 GPUs but this host has only 2"
	}
	return ""
}

// TestEnvironmentCapacityWarning: an environment that asks for more than the
// host has is created, and describing it says so (statusReason, a qshare
// extension the SDKs ignore), until an update brings it within the host.
func TestEnvironmentCapacityWarning(t *testing.T) {
	// The harness's simulated executor, on a host of 2 GPUs.
	s := newServer(t, func(c *daemonConfig) { c.Executor = fewGPUs{c.Executor.(*simulated.Executor)} })
	call := func(op, body string) map[string]any {
		t.Helper()
		resp, b := s.post("/v1/"+op, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reason := func() any {
		out := call("describeserviceenvironments", `{"serviceEnvironments":["pool"]}`)
		return out["serviceEnvironments"].([]any)[0].(map[string]any)["statusReason"]
	}
	call("createserviceenvironment", `{"serviceEnvironmentName":"pool","serviceEnvironmentType":"SAGEMAKER_TRAINING","capacityLimits":[{"capacityUnit":"ml.g5.xlarge","maxCapacity":3}]}`)
	if r, _ := reason().(string); !strings.Contains(r, "only 2") {
		t.Fatalf("statusReason of an environment larger than the host = %v, want the executor's warning", r)
	}
	call("updateserviceenvironment", `{"serviceEnvironment":"pool","capacityLimits":[{"capacityUnit":"ml.g5.xlarge","maxCapacity":2}]}`)
	if r := reason(); r != nil {
		t.Fatalf("statusReason after the update = %v, want none", r)
	}
}

// TestMinRunTimeTag: the quota-share tag qshare:minRunTimeSeconds, set
// through the AWS SDK unchanged, is validated (a ClientException naming
// it), and protects a running job from in-share preemption: the job that
// waits for it says so in its statusReason.
func TestMinRunTimeTag(t *testing.T) {
	s := newServer(t)
	c := s.c
	queueARN := s.setup("q", 1, shareSpec{name: "A", limit: 1, strategy: types.QuotaShareResourceSharingStrategyReserve, inShare: true})
	shareARN := aws.String(queueARN + "/quota-share/A")
	for _, bad := range []string{"10m", "-5", "604801", ""} {
		_, err := c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: shareARN, Tags: map[string]string{"qshare:minRunTimeSeconds": bad}})
		clientErr(t, err, "qshare:minRunTimeSeconds", "whole number of seconds")
	}
	_, err := c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{
		QuotaShareName: aws.String("B"), JobQueue: aws.String(queueARN),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLend},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled},
		Tags:                         map[string]string{"qshare:minRunTimeSeconds": "1.5"},
	})
	clientErr(t, err, "qshare:minRunTimeSeconds")
	_, err = c.TagResource(ctx, &batch.TagResourceInput{ResourceArn: shareARN, Tags: map[string]string{"qshare:minRunTimeSeconds": "3600"}})
	must(t, err)

	low := s.submit("q", "A", "low", 0, payload(g5, 1, time.Hour, 0))
	s.waitStatus(low, types.ServiceJobStatusRunning)
	high := s.submit("q", "A", "high", 5, payload(g5, 1, time.Millisecond, 0))
	deadline := time.Now().Add(10 * time.Second)
	for {
		d := s.describe(high)
		if r := aws.ToString(d.StatusReason); strings.Contains(r, "lower-priority job "+low+" of A is protected from preemption for") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("high: %s %q; want a reason naming the protected job", d.Status, aws.ToString(d.StatusReason))
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Without the tag, the protection is gone at the next pass.
	_, err = c.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: shareARN, TagKeys: []string{"qshare:minRunTimeSeconds"}})
	must(t, err)
	s.waitStatus(high, types.ServiceJobStatusSucceeded)
}
