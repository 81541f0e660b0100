package plan

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/config"
)

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
				Tags:                   nonEmpty(envTags(nil, e)),
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
	return a.planExisting(ctx, act, changes, aws.ToString(cur.ServiceEnvironmentArn), cur.Tags, envTags(cur.Tags, e), func(ctx context.Context) error {
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

// sortedKeys returns m's keys in order.
func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}

// envTags is the tags an environment of the file should have, given those
// the server has (have): its tags, with its `executor:` as the tag
// qshare.TagExecutor. Without `executor:` the server's executor tag is
// kept; with `executor:` but no tags key the other tags are left as they
// are. nil (no tags key and no executor) leaves every tag as it is.
func envTags(have map[string]string, e config.Environment) map[string]string {
	if e.Tags == nil && e.Executor == "" {
		return nil
	}
	want := maps.Clone(e.Tags)
	if e.Tags == nil {
		want = maps.Clone(have)
	}
	if want == nil {
		want = map[string]string{}
	}
	if e.Executor != "" {
		want[qshare.TagExecutor] = e.Executor
	} else if v, ok := have[qshare.TagExecutor]; ok {
		want[qshare.TagExecutor] = v
	}
	return want
}
