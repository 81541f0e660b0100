package plan

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/config"
)

// checkUnfinished refuses a prune that would delete a quota share or a job
// queue whose jobs have not finished: deleting it would end them, and that
// is for the user to decide (with qshare terminate), not for a file.
func (a *Applier) checkUnfinished(ctx context.Context, prune []Action) error {
	var probs []string
	for _, act := range prune {
		var queue string
		var filter []types.KeyValuesPair
		switch act.Kind {
		case "quotaShare":
			q, s, _ := strings.Cut(act.Name, "/")
			queue = q
			filter = []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{s}}}
		case "jobQueue":
			queue = act.Name
			filter = []types.KeyValuesPair{{Name: aws.String("AFTER_CREATED_AT"), Values: []string{"0"}}}
		default:
			continue
		}
		var names []string
		err := eachPage(ctx, batch.NewListServiceJobsPaginator(a.api, &batch.ListServiceJobsInput{JobQueue: aws.String(queue), Filters: filter}), func(out *batch.ListServiceJobsOutput) {
			for _, j := range out.JobSummaryList {
				if !qshare.JobStatus(j.Status).Terminal() {
					names = append(names, aws.ToString(j.JobName))
				}
			}
		})
		if err != nil {
			return err
		}
		if len(names) > 0 {
			sort.Strings(names)
			kind := "quota share"
			if act.Kind == "jobQueue" {
				kind = "job queue"
			}
			noun := "job"
			if len(names) > 1 {
				noun = "jobs"
			}
			shown := names
			if len(shown) > 5 {
				shown = append(shown[:5:5], "…")
			}
			probs = append(probs, fmt.Sprintf("%s %s has %d unfinished %s (%s)", kind, act.Name, len(names), noun, strings.Join(shown, ", ")))
		}
	}
	if len(probs) > 0 {
		return qshare.Errorf(qshare.ECONFLICT, "--prune would end running and waiting jobs, so nothing was changed: %s. Terminate them with `qshare terminate`, or let them finish, then apply again", strings.Join(probs, "; "))
	}
	return nil
}

// planPrune lists the deletions of what the file does not name: quota
// shares, then job queues, then scheduling policies, then environments,
// each in name order.
func (a *Applier) planPrune(f *config.File) []Action {
	var plan []Action
	for _, qn := range sortedKeys(a.shares) {
		fq := f.Queue(qn)
		for _, sn := range sortedKeys(a.shares[qn]) {
			if fq != nil && fq.Share(sn) != nil {
				continue
			}
			cur := a.shares[qn][sn]
			plan = append(plan, Action{Kind: "quotaShare", Name: qn + "/" + sn, Action: "deleted", do: func(ctx context.Context) error {
				return disableAndDelete(ctx, cur.State == types.QuotaShareStateDisabled, func(ctx context.Context) error {
					_, err := a.api.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: cur.QuotaShareArn, State: types.QuotaShareStateDisabled})
					return err
				}, func(ctx context.Context) error {
					_, err := a.api.DeleteQuotaShare(ctx, &batch.DeleteQuotaShareInput{QuotaShareArn: cur.QuotaShareArn})
					return err
				}, func(ctx context.Context, gone bool) error { return a.waitShare(ctx, qn, sn, gone) })
			}})
		}
	}
	for _, qn := range sortedKeys(a.queues) {
		if f.Queue(qn) != nil {
			continue
		}
		cur := a.queues[qn]
		plan = append(plan, Action{Kind: "jobQueue", Name: qn, Action: "deleted", do: func(ctx context.Context) error {
			return disableAndDelete(ctx, cur.State == types.JQStateDisabled, func(ctx context.Context) error {
				_, err := a.api.UpdateJobQueue(ctx, &batch.UpdateJobQueueInput{JobQueue: cur.JobQueueArn, State: types.JQStateDisabled})
				return err
			}, func(ctx context.Context) error {
				_, err := a.api.DeleteJobQueue(ctx, &batch.DeleteJobQueueInput{JobQueue: cur.JobQueueArn})
				return err
			}, func(ctx context.Context, gone bool) error { return a.waitQueue(ctx, qn, gone) })
		}})
	}
	for _, pn := range sortedKeys(a.policies) {
		if f.Policy(pn) != nil {
			continue
		}
		cur := a.policies[pn]
		plan = append(plan, Action{Kind: "schedulingPolicy", Name: pn, Action: "deleted", do: func(ctx context.Context) error {
			_, err := a.api.DeleteSchedulingPolicy(ctx, &batch.DeleteSchedulingPolicyInput{Arn: cur.Arn})
			return err
		}})
	}
	for _, en := range sortedKeys(a.envs) {
		if f.Environment(en) != nil {
			continue
		}
		cur := a.envs[en]
		plan = append(plan, Action{Kind: "serviceEnvironment", Name: en, Action: "deleted", do: func(ctx context.Context) error {
			return disableAndDelete(ctx, cur.State == types.ServiceEnvironmentStateDisabled, func(ctx context.Context) error {
				_, err := a.api.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: cur.ServiceEnvironmentArn, State: types.ServiceEnvironmentStateDisabled})
				return err
			}, func(ctx context.Context) error {
				_, err := a.api.DeleteServiceEnvironment(ctx, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: cur.ServiceEnvironmentArn})
				return err
			}, func(ctx context.Context, gone bool) error { return a.waitEnv(ctx, en, gone) })
		}})
	}
	return plan
}

// disableAndDelete deletes a resource the API deletes only when DISABLED:
// unless it already is, disable it and wait for that to settle; then delete
// it and wait for it to be gone.
func disableAndDelete(ctx context.Context, disabled bool, disable, del func(context.Context) error, wait func(ctx context.Context, gone bool) error) error {
	if !disabled {
		if err := disable(ctx); err != nil {
			return err
		}
		if err := wait(ctx, false); err != nil {
			return err
		}
	}
	if err := del(ctx); err != nil {
		return err
	}
	return wait(ctx, true)
}
