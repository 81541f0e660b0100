// Package plan is the planner of `qshare apply`: it compares an apply file
// (config.File) with what a server has, read through the AWS Batch API,
// and plans the creations, updates and (with --prune) deletions that make
// the server match the file, in an order the API accepts; then it carries
// the plan out through the same API, waiting where the API needs a
// resource to settle before the next step.
//
// It sits between config (which parses and checks the file) and the
// server: cmd/qshare's apply command wires its flags to Options and prints
// the Actions. It speaks only the API, so it works against any server
// that speaks AWS Batch, and its tests run it against a real qshare
// server.
package plan

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/config"
)

// API is the part of the AWS Batch client a plan reads and changes the
// server through; *batch.Client implements it.
type API interface {
	batch.DescribeServiceEnvironmentsAPIClient
	batch.ListSchedulingPoliciesAPIClient
	batch.DescribeJobQueuesAPIClient
	batch.ListQuotaSharesAPIClient
	batch.ListServiceJobsAPIClient
	DescribeSchedulingPolicies(context.Context, *batch.DescribeSchedulingPoliciesInput, ...func(*batch.Options)) (*batch.DescribeSchedulingPoliciesOutput, error)
	CreateServiceEnvironment(context.Context, *batch.CreateServiceEnvironmentInput, ...func(*batch.Options)) (*batch.CreateServiceEnvironmentOutput, error)
	UpdateServiceEnvironment(context.Context, *batch.UpdateServiceEnvironmentInput, ...func(*batch.Options)) (*batch.UpdateServiceEnvironmentOutput, error)
	DeleteServiceEnvironment(context.Context, *batch.DeleteServiceEnvironmentInput, ...func(*batch.Options)) (*batch.DeleteServiceEnvironmentOutput, error)
	CreateSchedulingPolicy(context.Context, *batch.CreateSchedulingPolicyInput, ...func(*batch.Options)) (*batch.CreateSchedulingPolicyOutput, error)
	UpdateSchedulingPolicy(context.Context, *batch.UpdateSchedulingPolicyInput, ...func(*batch.Options)) (*batch.UpdateSchedulingPolicyOutput, error)
	DeleteSchedulingPolicy(context.Context, *batch.DeleteSchedulingPolicyInput, ...func(*batch.Options)) (*batch.DeleteSchedulingPolicyOutput, error)
	CreateJobQueue(context.Context, *batch.CreateJobQueueInput, ...func(*batch.Options)) (*batch.CreateJobQueueOutput, error)
	UpdateJobQueue(context.Context, *batch.UpdateJobQueueInput, ...func(*batch.Options)) (*batch.UpdateJobQueueOutput, error)
	DeleteJobQueue(context.Context, *batch.DeleteJobQueueInput, ...func(*batch.Options)) (*batch.DeleteJobQueueOutput, error)
	CreateQuotaShare(context.Context, *batch.CreateQuotaShareInput, ...func(*batch.Options)) (*batch.CreateQuotaShareOutput, error)
	UpdateQuotaShare(context.Context, *batch.UpdateQuotaShareInput, ...func(*batch.Options)) (*batch.UpdateQuotaShareOutput, error)
	DeleteQuotaShare(context.Context, *batch.DeleteQuotaShareInput, ...func(*batch.Options)) (*batch.DeleteQuotaShareOutput, error)
	ListTagsForResource(context.Context, *batch.ListTagsForResourceInput, ...func(*batch.Options)) (*batch.ListTagsForResourceOutput, error)
	TagResource(context.Context, *batch.TagResourceInput, ...func(*batch.Options)) (*batch.TagResourceOutput, error)
	UntagResource(context.Context, *batch.UntagResourceInput, ...func(*batch.Options)) (*batch.UntagResourceOutput, error)
}

var _ API = (*batch.Client)(nil)

// Options are the choices of one apply.
type Options struct {
	// DryRun plans and reports, and changes nothing.
	DryRun bool
	// Prune also deletes every resource the file does not name.
	Prune bool
	// Wait is how long to wait for a resource to reach the state the next
	// step needs.
	Wait time.Duration
	// Progress, when not nil, receives each action's line (Action.String)
	// as it is done.
	Progress io.Writer
	// Plans reads and changes the server's capacity plans (a qshare
	// extension); nil for a server without them, to which a file with
	// capacityPlans cannot be applied.
	Plans PlanAPI
}

// Action is one thing apply did, or would do with --dry-run.
type Action struct {
	// Kind is serviceEnvironment, schedulingPolicy, jobQueue, quotaShare or
	// capacityPlan.
	Kind string `json:"kind"`
	// Name is the resource's name; a quota share's is QUEUE/SHARE.
	Name string `json:"name"`
	// Action is created, configured, unchanged or deleted.
	Action string `json:"action"`
	// Changes lists what an update changes, one field a line.
	Changes []string `json:"changes,omitempty"`
	// DryRun says the action was planned and reported but not done.
	DryRun bool `json:"dryRun,omitempty"`

	// do carries the action out through the API; it is bound to the
	// Applier that planned it.
	do func(context.Context) error
}

// String renders the action as apply prints it.
func (a Action) String() string {
	s := fmt.Sprintf("%s %s %s", a.Kind, a.Name, a.Action)
	if len(a.Changes) > 0 {
		s += ": " + strings.Join(a.Changes, "; ")
	}
	if a.DryRun {
		s += " (dry run)"
	}
	return s
}

// Applier plans an apply and carries the plan out. Make one with New; it
// is for one apply and is not safe for concurrent use.
type Applier struct {
	api  API
	opts Options

	// What the server has, by name.
	envs     map[string]types.ServiceEnvironmentDetail
	policies map[string]types.SchedulingPolicyDetail
	queues   map[string]types.JobQueueDetail
	shares   map[string]map[string]types.QuotaShareDetail
	plans    map[string]qshare.CapacityPlan

	// ARNs of resources created during this apply, by name.
	envARN, policyARN, queueARN map[string]string
}

// New returns an Applier that reads and changes the server through api.
func New(api API, opts Options) *Applier {
	return &Applier{api: api, opts: opts}
}

// Apply parses and checks the file (name is how errors name it), reads
// the server, plans, and carries out the plan in order (see Plan and Run).
// A file with problems returns *config.Errors and changes nothing.
func (a *Applier) Apply(ctx context.Context, name string, data []byte, opts config.Options) ([]Action, error) {
	f, err := config.Parse(name, data, opts)
	if err != nil {
		return nil, err
	}
	plan, err := a.Plan(ctx, name, f)
	if err != nil {
		return nil, err
	}
	return a.Run(ctx, plan)
}

// Plan reads what the server has and returns the actions that make it
// match f, in the order they must happen: creations and updates from the
// bottom of the hierarchy up (environments, policies, queues and each
// queue's shares, in the file's order), then, with Options.Prune, the
// deletions of what f does not name from the top down (shares, queues,
// policies, environments, each in name order). It changes nothing. A
// reference to a resource neither f nor the server has is a
// *config.Errors naming every such field (name is how it names the file);
// a prune that would delete a share or queue with unfinished jobs is an
// ECONFLICT *qshare.Error; an environment whose type would change is an
// EINVALID one.
func (a *Applier) Plan(ctx context.Context, name string, f *config.File) ([]Action, error) {
	if err := a.read(ctx, f); err != nil {
		return nil, err
	}
	if err := a.readPlans(ctx, f); err != nil {
		return nil, err
	}
	if err := a.checkReferences(name, f); err != nil {
		return nil, err
	}
	return a.plan(ctx, f)
}

// Run carries out the plan of Plan on this Applier, in order, and prints
// each action to Options.Progress as it is done. With Options.DryRun it
// marks every action DryRun and changes nothing. It stops at the first
// action that fails and returns the actions done before it and an
// *ActionError.
func (a *Applier) Run(ctx context.Context, plan []Action) ([]Action, error) {
	for i := range plan {
		act := &plan[i]
		act.DryRun = a.opts.DryRun
		if !a.opts.DryRun && act.do != nil {
			if err := act.do(ctx); err != nil {
				return plan[:i], &ActionError{Kind: act.Kind, Name: act.Name, Err: err}
			}
		}
		if a.opts.Progress != nil {
			fmt.Fprintln(a.opts.Progress, act.String())
		}
	}
	return plan, nil
}

// ActionError is the failure of one action of a plan: the error of the API
// call (or of the wait after it) that failed.
type ActionError struct {
	Kind, Name string
	Err        error
}

// Error names the action and its error.
func (e *ActionError) Error() string { return e.Kind + " " + e.Name + ": " + e.Err.Error() }

// Unwrap returns the API's error.
func (e *ActionError) Unwrap() error { return e.Err }

// plan lists the actions in the order they must happen: creations and
// updates from the bottom of the hierarchy up (environments, policies,
// queues, shares), then deletions from the top down.
func (a *Applier) plan(ctx context.Context, f *config.File) ([]Action, error) {
	var plan []Action
	for _, e := range f.ServiceEnvironments {
		act, err := a.planEnvironment(ctx, e)
		if err != nil {
			return nil, err
		}
		plan = append(plan, act)
	}
	for _, p := range f.SchedulingPolicies {
		act, err := a.planPolicy(ctx, p)
		if err != nil {
			return nil, err
		}
		plan = append(plan, act)
	}
	for _, q := range f.JobQueues {
		act, err := a.planQueue(ctx, f, q)
		if err != nil {
			return nil, err
		}
		plan = append(plan, act)
		for _, s := range q.QuotaShares {
			act, err := a.planShare(ctx, q.Name, s)
			if err != nil {
				return nil, err
			}
			plan = append(plan, act)
		}
	}
	plan = append(plan, a.planPlans(f)...)
	if a.opts.Prune {
		prune := append(a.prunePlans(f), a.planPrune(f)...)
		if err := a.checkUnfinished(ctx, prune); err != nil {
			return nil, err
		}
		plan = append(plan, prune...)
	}
	return plan, nil
}
