package bench

import (
	"context"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/config"
)

// applyConfig creates the resources of cfg through the AWS API, each name
// prefixed with prefix (so that runs against a shared --endpoint do not
// collide). It returns the created queue names by the config's names.
func applyConfig(ctx context.Context, c *batch.Client, cfg *config.File, prefix string) (map[string]string, error) {
	envARN := map[string]string{}
	for _, e := range cfg.ServiceEnvironments {
		var limits []types.CapacityLimit
		for _, l := range e.CapacityLimits {
			limits = append(limits, types.CapacityLimit{CapacityUnit: aws.String(l.CapacityUnit), MaxCapacity: aws.Int32(int32(l.MaxCapacity))})
		}
		out, err := c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{
			ServiceEnvironmentName: aws.String(prefix + e.Name),
			ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
			CapacityLimits:         limits,
			Tags:                   e.Tags, // qshare:executor names the environment's executor
		})
		if err != nil {
			return nil, fmt.Errorf("bench: creating service environment %s: %w", prefix+e.Name, err)
		}
		envARN[e.Name] = aws.ToString(out.ServiceEnvironmentArn)
	}
	policyARN := map[string]string{}
	for _, p := range cfg.SchedulingPolicies {
		if p.QuotaSharePolicy == nil {
			return nil, fmt.Errorf("bench: scheduling policy %s has no quota-share policy; the benchmarks use quota shares only", p.Name)
		}
		out, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{
			Name: aws.String(prefix + p.Name),
			QuotaSharePolicy: &types.QuotaSharePolicy{
				IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategy(orDefault(p.QuotaSharePolicy.IdleResourceAssignmentStrategy, "FIFO")),
			},
		})
		if err != nil {
			return nil, fmt.Errorf("bench: creating scheduling policy %s: %w", prefix+p.Name, err)
		}
		policyARN[p.Name] = aws.ToString(out.Arn)
	}
	queues := map[string]string{}
	for _, q := range cfg.JobQueues {
		prio := int32(1)
		if q.Priority != nil {
			prio = int32(*q.Priority)
		}
		in := &batch.CreateJobQueueInput{
			JobQueueName: aws.String(prefix + q.Name),
			JobQueueType: types.JobQueueTypeSagemakerTraining,
			Priority:     aws.Int32(prio),
			ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{
				{Order: aws.Int32(1), ServiceEnvironment: aws.String(envARN[q.EnvironmentName()])},
			},
		}
		if pn := q.PolicyName(); pn != "" {
			in.SchedulingPolicyArn = aws.String(policyARN[pn])
		}
		if _, err := c.CreateJobQueue(ctx, in); err != nil {
			return nil, fmt.Errorf("bench: creating job queue %s: %w", prefix+q.Name, err)
		}
		queues[q.Name] = prefix + q.Name
		for _, s := range q.QuotaShares {
			var limits []types.QuotaShareCapacityLimit
			for _, l := range s.CapacityLimits {
				limits = append(limits, types.QuotaShareCapacityLimit{CapacityUnit: aws.String(l.CapacityUnit), MaxCapacity: aws.Int32(int32(l.MaxCapacity))})
			}
			rs := &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategy(s.Strategy)}
			if s.Strategy == qshare.StrategyLendAndBorrow {
				rs.BorrowLimit = aws.Int32(int32(s.EffectiveBorrowLimit()))
			}
			in := &batch.CreateQuotaShareInput{
				JobQueue:                     aws.String(prefix + q.Name),
				QuotaShareName:               aws.String(s.Name),
				CapacityLimits:               limits,
				ResourceSharingConfiguration: rs,
			}
			// The API requires the preemption configuration; the config
			// file's default is DISABLED.
			in.PreemptionConfiguration = &types.QuotaSharePreemptionConfiguration{
				InSharePreemption: types.QuotaShareInSharePreemptionState(orDefault(string(s.InSharePreemption), string(qshare.Disabled))),
			}
			if _, err := c.CreateQuotaShare(ctx, in); err != nil {
				return nil, fmt.Errorf("bench: creating quota share %s of %s: %w", s.Name, prefix+q.Name, err)
			}
		}
	}
	return queues, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}
