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
		plan = prune(plan, "quotaShare", qn+"/", a.shares[qn], func(sn string) bool { return fq != nil && fq.Share(sn) != nil },
			func(ctx context.Context, sn string, cur types.QuotaShareDetail) error {
				return disableAndDelete(ctx, cur.State == types.QuotaShareStateDisabled,
					call(a.api.UpdateQuotaShare, &batch.UpdateQuotaShareInput{QuotaShareArn: cur.QuotaShareArn, State: types.QuotaShareStateDisabled}),
					call(a.api.DeleteQuotaShare, &batch.DeleteQuotaShareInput{QuotaShareArn: cur.QuotaShareArn}),
					func(ctx context.Context, gone bool) error { return a.waitShare(ctx, qn, sn, gone) })
			})
	}
	plan = prune(plan, "jobQueue", "", a.queues, func(qn string) bool { return f.Queue(qn) != nil },
		func(ctx context.Context, qn string, cur types.JobQueueDetail) error {
			return disableAndDelete(ctx, cur.State == types.JQStateDisabled,
				call(a.api.UpdateJobQueue, &batch.UpdateJobQueueInput{JobQueue: cur.JobQueueArn, State: types.JQStateDisabled}),
				call(a.api.DeleteJobQueue, &batch.DeleteJobQueueInput{JobQueue: cur.JobQueueArn}),
				func(ctx context.Context, gone bool) error { return a.waitQueue(ctx, qn, gone) })
		})
	plan = prune(plan, "schedulingPolicy", "", a.policies, func(pn string) bool { return f.Policy(pn) != nil },
		func(ctx context.Context, _ string, cur types.SchedulingPolicyDetail) error {
			return call(a.api.DeleteSchedulingPolicy, &batch.DeleteSchedulingPolicyInput{Arn: cur.Arn})(ctx)
		})
	return prune(plan, "serviceEnvironment", "", a.envs, func(en string) bool { return f.Environment(en) != nil },
		func(ctx context.Context, en string, cur types.ServiceEnvironmentDetail) error {
			return disableAndDelete(ctx, cur.State == types.ServiceEnvironmentStateDisabled,
				call(a.api.UpdateServiceEnvironment, &batch.UpdateServiceEnvironmentInput{ServiceEnvironment: cur.ServiceEnvironmentArn, State: types.ServiceEnvironmentStateDisabled}),
				call(a.api.DeleteServiceEnvironment, &batch.DeleteServiceEnvironmentInput{ServiceEnvironment: cur.ServiceEnvironmentArn}),
				func(ctx context.Context, gone bool) error { return a.waitEnv(ctx, en, gone) })
		})
}

// prune appends to plan, in name order, the deletion (by del) of each
// resource of have that the file does not name; kind and prefix+name
// label the Action.
func prune[T any](plan []Action, kind, prefix string, have map[string]T, named func(name string) bool, del func(ctx context.Context, name string, cur T) error) []Action {
	for _, name := range sortedKeys(have) {
		if named(name) {
			continue
		}
		cur := have[name]
		plan = append(plan, Action{Kind: kind, Name: prefix + name, Action: "deleted", do: func(ctx context.Context) error {
			return del(ctx, name, cur)
		}})
	}
	return plan
}

// call is the API call op(in), its answer dropped, for disableAndDelete.
func call[I, O any](op func(context.Context, *I, ...func(*batch.Options)) (*O, error), in *I) func(context.Context) error {
	return func(ctx context.Context) error {
		_, err := op(ctx, in)
		return err
	}
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
