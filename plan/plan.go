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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
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
}

// Action is one thing apply did, or would do with --dry-run.
type Action struct {
	// Kind is serviceEnvironment, schedulingPolicy, jobQueue or quotaShare.
	Kind string `json:"kind"`
	// Name is the resource's name; a quota share's is QUEUE/SHARE.
	Name string `json:"name"`
	// Action is created, configured, unchanged or deleted.
	Action string `json:"action"`
	// Changes lists what an update changes, one field a line.
	Changes []string `json:"changes,omitempty"`
	DryRun  bool     `json:"dryRun,omitempty"`

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
	if a.opts.Prune {
		prune := a.planPrune(f)
		if err := a.checkUnfinished(ctx, prune); err != nil {
			return nil, err
		}
		plan = append(plan, prune...)
	}
	return plan, nil
}

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

// typeOr is a file's environment or queue type, SAGEMAKER_TRAINING when
// it names none.
func typeOr(t string) string {
	if t == "" {
		return config.SageMakerTraining
	}
	return t
}

func stateOr(s qshare.State) string {
	if s == "" {
		return string(qshare.Enabled)
	}
	return string(s)
}

func diff(changes *[]string, field string, from, to any) {
	if !reflect.DeepEqual(from, to) {
		*changes = append(*changes, fmt.Sprintf("%s %v -> %v", field, from, to))
	}
}

func envLimits(ls []types.CapacityLimit) qshare.Capacity {
	c := qshare.Capacity{}
	for _, l := range ls {
		c[aws.ToString(l.CapacityUnit)] += int64(aws.ToInt32(l.MaxCapacity))
	}
	return c
}

func shareLimits(ls []types.QuotaShareCapacityLimit) qshare.Capacity {
	c := qshare.Capacity{}
	for _, l := range ls {
		c[aws.ToString(l.CapacityUnit)] += int64(aws.ToInt32(l.MaxCapacity))
	}
	return c
}

// capString renders limits for a change line; equal limits give equal text.
func capString(c qshare.Capacity) string { return c.String() }

func (a *Applier) planEnvironment(ctx context.Context, e config.Environment) (Action, error) {
	act := Action{Kind: "serviceEnvironment", Name: e.Name}
	limits := make([]types.CapacityLimit, 0, len(e.CapacityLimits))
	for _, l := range e.CapacityLimits {
		limits = append(limits, types.CapacityLimit{CapacityUnit: aws.String(l.CapacityUnit), MaxCapacity: aws.Int32(int32(l.MaxCapacity))})
	}
	cur, ok := a.envs[e.Name]
	if !ok {
		act.Action = "created"
		act.do = func(ctx context.Context) error {
			out, err := a.api.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{
				ServiceEnvironmentName: aws.String(e.Name),
				ServiceEnvironmentType: types.ServiceEnvironmentType(typeOr(e.Type)),
				State:                  types.ServiceEnvironmentState(stateOr(e.State)),
				CapacityLimits:         limits,
				Tags:                   nonEmpty(e.Tags),
			})
			if err != nil {
				return err
			}
			a.envARN[e.Name] = aws.ToString(out.ServiceEnvironmentArn)
			return a.waitEnv(ctx, e.Name, false)
		}
		return act, nil
	}
	var changes []string
	diff(&changes, "capacityLimits", capString(envLimits(cur.CapacityLimits)), capString(qshare.Limits(e.CapacityLimits)))
	diff(&changes, "state", string(cur.State), stateOr(e.State))
	if e.Type != "" && e.Type != string(cur.ServiceEnvironmentType) {
		return act, qshare.Errorf(qshare.EINVALID, "serviceEnvironment %s: serviceEnvironmentType cannot change (%s on the server, %s in the file): delete the environment, or use a new name", e.Name, cur.ServiceEnvironmentType, e.Type)
	}
	return a.planExisting(ctx, act, changes, aws.ToString(cur.ServiceEnvironmentArn), cur.Tags, e.Tags, func(ctx context.Context) error {
		_, err := a.api.UpdateServiceEnvironment(ctx, &batch.UpdateServiceEnvironmentInput{
			ServiceEnvironment: cur.ServiceEnvironmentArn,
			State:              types.ServiceEnvironmentState(stateOr(e.State)),
			CapacityLimits:     limits,
		})
		if err != nil {
			return err
		}
		return a.waitEnv(ctx, e.Name, false)
	})
}

// planExisting finishes the plan of a resource the server has: changes are
// the differences in its settings, which update makes; the differences in
// its tags (from have to want, read from arn when have is nil) are added to
// them and made after update. update runs only when changes is not empty.
func (a *Applier) planExisting(ctx context.Context, act Action, changes []string, arn string, have, want map[string]string, update func(context.Context) error) (Action, error) {
	changed := len(changes) > 0
	tagDo, tagChanges, err := a.planTags(ctx, arn, have, want)
	if err != nil {
		return act, err
	}
	changes = append(changes, tagChanges...)
	act.Changes = changes
	act.Action = actionWord(changes)
	act.do = func(ctx context.Context) error {
		if changed {
			if err := update(ctx); err != nil {
				return err
			}
		}
		return tagDo(ctx)
	}
	return act, nil
}

func actionWord(changes []string) string {
	if len(changes) == 0 {
		return "unchanged"
	}
	return "configured"
}

func nonEmpty(m map[string]string) map[string]string {
	if len(m) == 0 {
		return nil
	}
	return m
}

// planTags plans making a resource's tags equal the file's; a nil want
// (no tags key in the file) leaves them as they are.
func (a *Applier) planTags(ctx context.Context, arn string, have, want map[string]string) (func(context.Context) error, []string, error) {
	noop := func(context.Context) error { return nil }
	if want == nil {
		return noop, nil, nil
	}
	if have == nil && arn != "" {
		out, err := a.api.ListTagsForResource(ctx, &batch.ListTagsForResourceInput{ResourceArn: aws.String(arn)})
		if err != nil {
			return nil, nil, err
		}
		have = out.Tags
	}
	add := map[string]string{}
	var remove []string
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			add[k] = v
		}
	}
	for k := range have {
		if _, ok := want[k]; !ok {
			remove = append(remove, k)
		}
	}
	sort.Strings(remove)
	var changes []string
	for _, k := range sortedKeys(add) {
		changes = append(changes, fmt.Sprintf("tag %s=%s", k, add[k]))
	}
	for _, k := range remove {
		changes = append(changes, "untag "+k)
	}
	return func(ctx context.Context) error {
		if len(add) > 0 {
			if _, err := a.api.TagResource(ctx, &batch.TagResourceInput{ResourceArn: aws.String(arn), Tags: add}); err != nil {
				return err
			}
		}
		if len(remove) > 0 {
			if _, err := a.api.UntagResource(ctx, &batch.UntagResourceInput{ResourceArn: aws.String(arn), TagKeys: remove}); err != nil {
				return err
			}
		}
		return nil
	}, changes, nil
}

func policyBody(p config.Policy) (*types.QuotaSharePolicy, *types.FairsharePolicy) {
	var qsp *types.QuotaSharePolicy
	var fsp *types.FairsharePolicy
	if p.QuotaSharePolicy != nil {
		qsp = &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategy(p.QuotaSharePolicy.IdleResourceAssignmentStrategy)}
	}
	if p.FairsharePolicy != nil {
		fsp = &types.FairsharePolicy{}
		if v := p.FairsharePolicy.ShareDecaySeconds; v != nil {
			fsp.ShareDecaySeconds = aws.Int32(int32(*v))
		}
		if v := p.FairsharePolicy.ComputeReservation; v != nil {
			fsp.ComputeReservation = aws.Int32(int32(*v))
		}
		for _, w := range p.FairsharePolicy.ShareDistribution {
			sa := types.ShareAttributes{ShareIdentifier: aws.String(w.ShareIdentifier)}
			if w.WeightFactor != 0 {
				sa.WeightFactor = aws.Float32(float32(w.WeightFactor))
			}
			fsp.ShareDistribution = append(fsp.ShareDistribution, sa)
		}
	}
	return qsp, fsp
}

// policyText renders a policy body for comparison and change lines: the
// JSON of its members with the API's names, nil ones left out (as qshare's
// -o json prints SDK values; TestPolicyTextIsWire in cmd/qshare holds the
// two together).
func policyText(qsp *types.QuotaSharePolicy, fsp *types.FairsharePolicy) string {
	m := map[string]any{}
	if qsp != nil {
		q := map[string]any{}
		if s := qsp.IdleResourceAssignmentStrategy; s != "" {
			q["idleResourceAssignmentStrategy"] = string(s)
		}
		m["quotaSharePolicy"] = q
	}
	if fsp != nil {
		p := map[string]any{}
		if v := fsp.ComputeReservation; v != nil {
			p["computeReservation"] = int64(*v)
		}
		if v := fsp.ShareDecaySeconds; v != nil {
			p["shareDecaySeconds"] = int64(*v)
		}
		if fsp.ShareDistribution != nil {
			ds := make([]any, 0, len(fsp.ShareDistribution))
			for _, w := range fsp.ShareDistribution {
				d := map[string]any{}
				if w.ShareIdentifier != nil {
					d["shareIdentifier"] = *w.ShareIdentifier
				}
				if w.WeightFactor != nil {
					f := float64(*w.WeightFactor)
					if f == float64(int64(f)) {
						d["weightFactor"] = int64(f)
					} else {
						d["weightFactor"] = f
					}
				}
				ds = append(ds, d)
			}
			p["shareDistribution"] = ds
		}
		m["fairsharePolicy"] = p
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func (a *Applier) planPolicy(ctx context.Context, p config.Policy) (Action, error) {
	act := Action{Kind: "schedulingPolicy", Name: p.Name}
	qsp, fsp := policyBody(p)
	cur, ok := a.policies[p.Name]
	if !ok {
		act.Action = "created"
		act.do = func(ctx context.Context) error {
			out, err := a.api.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{
				Name: aws.String(p.Name), QuotaSharePolicy: qsp, FairsharePolicy: fsp, Tags: nonEmpty(p.Tags),
			})
			if err != nil {
				return err
			}
			a.policyARN[p.Name] = aws.ToString(out.Arn)
			return nil
		}
		return act, nil
	}
	var changes []string
	if have, want := policyText(cur.QuotaSharePolicy, cur.FairsharePolicy), policyText(qsp, fsp); have != want {
		changes = append(changes, fmt.Sprintf("policy %s -> %s", have, want))
	}
	return a.planExisting(ctx, act, changes, aws.ToString(cur.Arn), cur.Tags, p.Tags, func(ctx context.Context) error {
		_, err := a.api.UpdateSchedulingPolicy(ctx, &batch.UpdateSchedulingPolicyInput{Arn: cur.Arn, QuotaSharePolicy: qsp, FairsharePolicy: fsp})
		return err
	})
}

// policyARNOf resolves a queue's policy reference to an ARN, at the time
// the queue is created or updated (the policy may be created just before).
func (a *Applier) policyARNOf(q config.Queue) string {
	if strings.HasPrefix(q.SchedulingPolicy, "arn:") {
		return q.SchedulingPolicy
	}
	if q.SchedulingPolicy == "" {
		return ""
	}
	if arn := a.policyARN[q.PolicyName()]; arn != "" {
		return arn
	}
	return aws.ToString(a.policies[q.PolicyName()].Arn)
}

func (a *Applier) envARNOf(q config.Queue) string {
	if strings.HasPrefix(q.ServiceEnvironment, "arn:") {
		return q.ServiceEnvironment
	}
	if arn := a.envARN[q.EnvironmentName()]; arn != "" {
		return arn
	}
	if e, ok := a.envs[q.EnvironmentName()]; ok {
		return aws.ToString(e.ServiceEnvironmentArn)
	}
	return q.ServiceEnvironment
}

func timeLimitActions(ls []qshare.JobStateTimeLimitAction) []types.JobStateTimeLimitAction {
	out := make([]types.JobStateTimeLimitAction, 0, len(ls))
	for _, l := range ls {
		out = append(out, types.JobStateTimeLimitAction{
			Reason: aws.String(l.Reason), State: types.JobStateTimeLimitActionsState(l.State),
			MaxTimeSeconds: aws.Int32(int32(l.MaxTimeSeconds)), Action: types.JobStateTimeLimitActionsAction(l.Action),
		})
	}
	return out
}

func timeLimitText(ls []types.JobStateTimeLimitAction) string {
	var out []string
	for _, l := range ls {
		out = append(out, fmt.Sprintf("%s %s after %ds when %s", l.Action, l.State, aws.ToInt32(l.MaxTimeSeconds), aws.ToString(l.Reason)))
	}
	if len(out) == 0 {
		return "none"
	}
	return "[" + strings.Join(out, ", ") + "]"
}

func (a *Applier) planQueue(ctx context.Context, f *config.File, q config.Queue) (Action, error) {
	act := Action{Kind: "jobQueue", Name: q.Name}
	cur, ok := a.queues[q.Name]
	priority := int32(0)
	if q.Priority != nil {
		priority = int32(*q.Priority)
	}
	order := func() []types.ServiceEnvironmentOrder {
		if q.ServiceEnvironment == "" {
			return nil
		}
		return []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(a.envARNOf(q))}}
	}
	if !ok {
		act.Action = "created"
		act.do = func(ctx context.Context) error {
			in := &batch.CreateJobQueueInput{
				JobQueueName:             aws.String(q.Name),
				Priority:                 aws.Int32(priority),
				State:                    types.JQState(stateOr(q.State)),
				JobQueueType:             types.JobQueueType(typeOr(q.Type)),
				ServiceEnvironmentOrder:  order(),
				JobStateTimeLimitActions: timeLimitActions(q.JobStateTimeLimitActions),
				Tags:                     nonEmpty(q.Tags),
			}
			if arn := a.policyARNOf(q); arn != "" {
				in.SchedulingPolicyArn = aws.String(arn)
			}
			out, err := a.api.CreateJobQueue(ctx, in)
			if err != nil {
				return err
			}
			a.queueARN[q.Name] = aws.ToString(out.JobQueueArn)
			return a.waitQueue(ctx, q.Name, false)
		}
		return act, nil
	}
	var changes []string
	diff(&changes, "priority", aws.ToInt32(cur.Priority), priority)
	diff(&changes, "state", string(cur.State), stateOr(q.State))
	diff(&changes, "schedulingPolicy", orNone(lastSegment(aws.ToString(cur.SchedulingPolicyArn))), orNone(q.PolicyName()))
	haveEnv := ""
	if len(cur.ServiceEnvironmentOrder) > 0 {
		haveEnv = lastSegment(aws.ToString(cur.ServiceEnvironmentOrder[0].ServiceEnvironment))
	}
	diff(&changes, "serviceEnvironment", orNone(haveEnv), orNone(q.EnvironmentName()))
	haveTL, wantTL := timeLimitText(cur.JobStateTimeLimitActions), timeLimitText(timeLimitActions(q.JobStateTimeLimitActions))
	diff(&changes, "jobStateTimeLimitActions", haveTL, wantTL)
	return a.planExisting(ctx, act, changes, aws.ToString(cur.JobQueueArn), cur.Tags, q.Tags, func(ctx context.Context) error {
		in := &batch.UpdateJobQueueInput{
			JobQueue:                 cur.JobQueueArn,
			Priority:                 aws.Int32(priority),
			State:                    types.JQState(stateOr(q.State)),
			ServiceEnvironmentOrder:  order(),
			JobStateTimeLimitActions: timeLimitActions(q.JobStateTimeLimitActions),
		}
		if arn := a.policyARNOf(q); arn != "" {
			in.SchedulingPolicyArn = aws.String(arn)
		}
		if _, err := a.api.UpdateJobQueue(ctx, in); err != nil {
			return err
		}
		return a.waitQueue(ctx, q.Name, false)
	})
}

// lastSegment returns what follows the last / of an ARN: a resource's name.
func lastSegment(s string) string { return s[strings.LastIndexByte(s, '/')+1:] }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func shareSharing(s config.Share) *types.QuotaShareResourceSharingConfiguration {
	rc := &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategy(s.Strategy)}
	if s.BorrowLimit != nil {
		rc.BorrowLimit = aws.Int32(int32(*s.BorrowLimit))
	}
	return rc
}

func (a *Applier) planShare(ctx context.Context, queue string, s config.Share) (Action, error) {
	act := Action{Kind: "quotaShare", Name: queue + "/" + s.Name}
	limits := make([]types.QuotaShareCapacityLimit, 0, len(s.CapacityLimits))
	for _, l := range s.CapacityLimits {
		limits = append(limits, types.QuotaShareCapacityLimit{CapacityUnit: aws.String(l.CapacityUnit), MaxCapacity: aws.Int32(int32(l.MaxCapacity))})
	}
	preempt := &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionState(s.InSharePreemption)}
	cur, ok := a.shares[queue][s.Name]
	if !ok {
		act.Action = "created"
		act.do = func(ctx context.Context) error {
			qref := a.queueARN[queue]
			if qref == "" {
				qref = queue
			}
			if _, err := a.api.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{
				QuotaShareName:               aws.String(s.Name),
				JobQueue:                     aws.String(qref),
				CapacityLimits:               limits,
				ResourceSharingConfiguration: shareSharing(s),
				PreemptionConfiguration:      preempt,
				State:                        types.QuotaShareState(stateOr(s.State)),
				Tags:                         nonEmpty(s.Tags),
			}); err != nil {
				return err
			}
			return a.waitShare(ctx, queue, s.Name, false)
		}
		return act, nil
	}
	var changes []string
	diff(&changes, "capacityLimits", capString(shareLimits(cur.CapacityLimits)), capString(qshare.Limits(s.CapacityLimits)))
	haveStrategy, haveBorrow := "", int64(qshare.BorrowUnlimited)
	if rc := cur.ResourceSharingConfiguration; rc != nil {
		haveStrategy = string(rc.Strategy)
		if rc.BorrowLimit != nil {
			haveBorrow = int64(*rc.BorrowLimit)
		}
	}
	diff(&changes, "strategy", haveStrategy, string(s.Strategy))
	if s.Strategy == qshare.StrategyLendAndBorrow {
		diff(&changes, "borrowLimit", haveBorrow, s.EffectiveBorrowLimit())
	}
	haveISP := ""
	if cur.PreemptionConfiguration != nil {
		haveISP = string(cur.PreemptionConfiguration.InSharePreemption)
	}
	diff(&changes, "inSharePreemption", haveISP, string(s.InSharePreemption))
	diff(&changes, "state", string(cur.State), stateOr(s.State))
	// A quota share's detail carries no tags: nil has them read from its ARN.
	return a.planExisting(ctx, act, changes, aws.ToString(cur.QuotaShareArn), nil, s.Tags, func(ctx context.Context) error {
		if _, err := a.api.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{
			QuotaShareArn:                cur.QuotaShareArn,
			CapacityLimits:               limits,
			ResourceSharingConfiguration: shareSharing(s),
			PreemptionConfiguration:      preempt,
			State:                        types.QuotaShareState(stateOr(s.State)),
		}); err != nil {
			return err
		}
		return a.waitShare(ctx, queue, s.Name, false)
	})
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

// errGone is what a wait's probe returns for a resource that no longer exists.
var errGone = errors.New("gone")

// waitFor polls probe until it reports a settled resource (or, with gone,
// no resource), for at most Options.Wait.
func (a *Applier) waitFor(ctx context.Context, what string, gone bool, probe func(context.Context) (status string, err error)) error {
	deadline := time.Now().Add(a.opts.Wait)
	delay := 50 * time.Millisecond
	for {
		status, err := probe(ctx)
		switch {
		case errors.Is(err, errGone):
			if gone {
				return nil
			}
		case err != nil:
			return err
		case status == "INVALID":
			return fmt.Errorf("%s became INVALID", what)
		case !gone && status == "VALID":
			return nil
		case gone && status == "DELETED":
			return nil
		}
		if time.Now().After(deadline) {
			want := "VALID"
			if gone {
				want = "deleted"
			}
			return fmt.Errorf("%s is %s after %s, not %s: raise --wait, or look at the server's log", what, orNone(status), a.opts.Wait, want)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(delay):
		}
		delay = min(2*delay, time.Second)
	}
}

func (a *Applier) waitEnv(ctx context.Context, name string, gone bool) error {
	return a.waitFor(ctx, "service environment "+name, gone, func(ctx context.Context) (string, error) {
		out, err := a.api.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{name}})
		if err != nil {
			return "", err
		}
		for _, e := range out.ServiceEnvironments {
			return string(e.Status), nil
		}
		return "", errGone
	})
}

func (a *Applier) waitQueue(ctx context.Context, name string, gone bool) error {
	return a.waitFor(ctx, "job queue "+name, gone, func(ctx context.Context) (string, error) {
		out, err := a.api.DescribeJobQueues(ctx, &batch.DescribeJobQueuesInput{JobQueues: []string{name}})
		if err != nil {
			return "", err
		}
		for _, q := range out.JobQueues {
			return string(q.Status), nil
		}
		return "", errGone
	})
}

func (a *Applier) waitShare(ctx context.Context, queue, name string, gone bool) error {
	return a.waitFor(ctx, "quota share "+queue+"/"+name, gone, func(ctx context.Context) (string, error) {
		p := batch.NewListQuotaSharesPaginator(a.api, &batch.ListQuotaSharesInput{JobQueue: aws.String(queue)})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				var ce *types.ClientException
				if gone && errors.As(err, &ce) {
					return "", errGone // the queue itself is gone
				}
				return "", err
			}
			for _, s := range out.QuotaShares {
				if aws.ToString(s.QuotaShareName) == name {
					return string(s.Status), nil
				}
			}
		}
		return "", errGone
	})
}

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
