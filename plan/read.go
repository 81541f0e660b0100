package plan

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/config"
)

// read loads what the server has.
func (a *Applier) read(ctx context.Context, f *config.File) error {
	a.envs = map[string]types.ServiceEnvironmentDetail{}
	a.policies = map[string]types.SchedulingPolicyDetail{}
	a.queues = map[string]types.JobQueueDetail{}
	a.shares = map[string]map[string]types.QuotaShareDetail{}
	a.envARN, a.policyARN, a.queueARN = map[string]string{}, map[string]string{}, map[string]string{}

	err := eachPage(ctx, batch.NewDescribeServiceEnvironmentsPaginator(a.api, &batch.DescribeServiceEnvironmentsInput{}), func(out *batch.DescribeServiceEnvironmentsOutput) {
		for _, e := range out.ServiceEnvironments {
			if e.Status != types.ServiceEnvironmentStatusDeleted {
				a.envs[aws.ToString(e.ServiceEnvironmentName)] = e
			}
		}
	})
	if err != nil {
		return err
	}
	var arns []string
	err = eachPage(ctx, batch.NewListSchedulingPoliciesPaginator(a.api, &batch.ListSchedulingPoliciesInput{}), func(out *batch.ListSchedulingPoliciesOutput) {
		for _, p := range out.SchedulingPolicies {
			arns = append(arns, aws.ToString(p.Arn))
		}
	})
	if err != nil {
		return err
	}
	for len(arns) > 0 {
		n := min(len(arns), 100)
		out, err := a.api.DescribeSchedulingPolicies(ctx, &batch.DescribeSchedulingPoliciesInput{Arns: arns[:n]})
		if err != nil {
			return err
		}
		for _, p := range out.SchedulingPolicies {
			a.policies[aws.ToString(p.Name)] = p
		}
		arns = arns[n:]
	}
	err = eachPage(ctx, batch.NewDescribeJobQueuesPaginator(a.api, &batch.DescribeJobQueuesInput{}), func(out *batch.DescribeJobQueuesOutput) {
		for _, q := range out.JobQueues {
			if q.Status != types.JQStatusDeleted {
				a.queues[aws.ToString(q.JobQueueName)] = q
			}
		}
	})
	if err != nil {
		return err
	}
	for name, q := range a.queues {
		m := map[string]types.QuotaShareDetail{}
		err := eachPage(ctx, batch.NewListQuotaSharesPaginator(a.api, &batch.ListQuotaSharesInput{JobQueue: q.JobQueueArn}), func(out *batch.ListQuotaSharesOutput) {
			for _, s := range out.QuotaShares {
				m[aws.ToString(s.QuotaShareName)] = s
			}
		})
		if err != nil {
			return err
		}
		a.shares[name] = m
	}
	return nil
}

// pager is what the SDK's paginators have in common.
type pager[O any] interface {
	HasMorePages() bool
	NextPage(ctx context.Context, optFns ...func(*batch.Options)) (O, error)
}

// eachPage hands every page of p to f in turn, and stops at the first
// error.
func eachPage[O any](ctx context.Context, p pager[O], f func(O)) error {
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		f(out)
	}
	return nil
}

// checkReferences reports references to resources that neither the file
// nor the server has, all at once.
func (a *Applier) checkReferences(name string, f *config.File) error {
	var probs []config.Problem
	for i, q := range f.JobQueues {
		if p := q.PolicyName(); p != "" && f.Policy(p) == nil {
			if _, ok := a.policies[p]; !ok {
				probs = append(probs, config.Problem{Path: fmt.Sprintf("jobQueues[%d].schedulingPolicy", i),
					Message: fmt.Sprintf("jobQueues[%d].schedulingPolicy: no scheduling policy %q in the file or on the server: declare it under schedulingPolicies", i, p)})
			}
		}
		if e := q.EnvironmentName(); e != "" && f.Environment(e) == nil {
			if _, ok := a.envs[e]; !ok {
				probs = append(probs, config.Problem{Path: fmt.Sprintf("jobQueues[%d].serviceEnvironment", i),
					Message: fmt.Sprintf("jobQueues[%d].serviceEnvironment: no service environment %q in the file or on the server: declare it under serviceEnvironments", i, e)})
			}
		}
	}
	if len(probs) > 0 {
		return &config.Errors{Name: name, Problems: probs}
	}
	return nil
}
