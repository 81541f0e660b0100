package config

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"qshare"
)

// Validate checks f against the rules the API enforces, and the references
// between its parts, and returns an *Errors listing every problem, or nil.
// Parse calls it; call it yourself on a File built or changed in Go.
func (f *File) Validate(opts Options) error {
	if probs := f.check(opts); len(probs) > 0 {
		sortProblems(probs)
		return &Errors{Problems: probs}
	}
	return nil
}

type checker struct {
	pos      map[string]Pos
	problems []Problem
}

// where returns the position of the longest recorded path that prefixes
// path (so a missing key is reported at the mapping that lacks it).
func (c *checker) where(path string) Pos {
	for p := path; ; {
		if pos, ok := c.pos[p]; ok {
			return pos
		}
		i := strings.LastIndexAny(p, ".[")
		if i <= 0 {
			return Pos{}
		}
		p = p[:i]
	}
}

func (c *checker) fail(path, format string, args ...any) {
	c.problems = append(c.problems, Problem{Pos: c.where(path), Path: path, Message: fmt.Sprintf(format, args...)})
}

var subpathRE = regexp.MustCompile(`^(\[\d+\])?(\.[A-Za-z]+)?`)

// add records err from a shared validation helper that was given field as
// its field name. The helper's message names the exact sub-field
// (field[2].maxCapacity); that is the path the problem is placed at.
func (c *checker) add(field string, err error) {
	if err == nil {
		return
	}
	msg := qshare.ErrorMessageOf(err)
	path := field
	if i := strings.Index(msg, field); i >= 0 {
		path = field + subpathRE.FindString(msg[i+len(field):])
	}
	c.problems = append(c.problems, Problem{Pos: c.where(path), Path: path, Message: msg})
}

func (f *File) check(opts Options) []Problem {
	c := &checker{pos: f.pos}
	envs := map[string]int{}
	for i, e := range f.ServiceEnvironments {
		p := fmt.Sprintf("serviceEnvironments[%d]", i)
		c.uniqueName(envs, p+".serviceEnvironmentName", "serviceEnvironments", i, e.Name, "")
		c.supportedType(p+".serviceEnvironmentType", e.Type)
		c.add(p+".state", qshare.ValidateState(p+".state", e.State, true))
		c.add(p+".capacityLimits", qshare.ValidateCapacityLimits(p+".capacityLimits", e.CapacityLimits))
		c.add(p+".tags", qshare.ValidateTags(p+".tags", e.Tags))
	}
	pols := map[string]int{}
	for i, pol := range f.SchedulingPolicies {
		p := fmt.Sprintf("schedulingPolicies[%d]", i)
		c.uniqueName(pols, p+".name", "schedulingPolicies", i, pol.Name, "")
		switch {
		case pol.QuotaSharePolicy != nil && pol.FairsharePolicy != nil:
			c.fail(p, "%s sets both quotaSharePolicy and fairsharePolicy: a policy is one or the other", p)
		case pol.QuotaSharePolicy == nil && pol.FairsharePolicy == nil:
			c.fail(p, "%s needs quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO} (or a fairsharePolicy)", p)
		case pol.QuotaSharePolicy != nil:
			s := pol.QuotaSharePolicy.IdleResourceAssignmentStrategy
			fp := p + ".quotaSharePolicy.idleResourceAssignmentStrategy"
			if s == "" {
				c.fail(fp, "%s is required: use FIFO", fp)
			} else if s != "FIFO" {
				c.fail(fp, "%s %q is not valid: use FIFO", fp, s)
			}
		default:
			fs := pol.FairsharePolicy
			fp := p + ".fairsharePolicy"
			if fs.ShareDecaySeconds != nil && (*fs.ShareDecaySeconds < 0 || *fs.ShareDecaySeconds > 604800) {
				c.fail(fp+".shareDecaySeconds", "%s.shareDecaySeconds %d is out of range: use 0 to 604800", fp, *fs.ShareDecaySeconds)
			}
			if fs.ComputeReservation != nil && (*fs.ComputeReservation < 0 || *fs.ComputeReservation > 99) {
				c.fail(fp+".computeReservation", "%s.computeReservation %d is out of range: use 0 to 99", fp, *fs.ComputeReservation)
			}
			for k, w := range fs.ShareDistribution {
				wp := fmt.Sprintf("%s.shareDistribution[%d]", fp, k)
				if w.ShareIdentifier == "" {
					c.fail(wp+".shareIdentifier", "%s.shareIdentifier is required", wp)
				}
				if w.WeightFactor != 0 && (w.WeightFactor < 0.0001 || w.WeightFactor > 999.9999) {
					c.fail(wp+".weightFactor", "%s.weightFactor %g is out of range: use 0.0001 to 999.9999", wp, w.WeightFactor)
				}
			}
		}
		c.add(p+".tags", qshare.ValidateTags(p+".tags", pol.Tags))
	}
	queues := map[string]int{}
	envQueue := map[string]int{}
	for i := range f.JobQueues {
		q := &f.JobQueues[i]
		p := fmt.Sprintf("jobQueues[%d]", i)
		c.uniqueName(queues, p+".jobQueueName", "jobQueues", i, q.Name, "")
		c.supportedType(p+".jobQueueType", q.Type)
		if q.Priority == nil {
			c.fail(p+".priority", "%s.priority is required: an integer from 0 to 1000 (higher is evaluated first)", p)
		} else if *q.Priority < 0 || *q.Priority > 1000 {
			c.fail(p+".priority", "%s.priority %d is out of range: use 0 to 1000", p, *q.Priority)
		}
		c.add(p+".state", qshare.ValidateState(p+".state", q.State, true))
		c.add(p+".tags", qshare.ValidateTags(p+".tags", q.Tags))

		quota := false
		if q.SchedulingPolicy != "" {
			name, ok := refName(q.SchedulingPolicy, "scheduling-policy")
			pp := p + ".schedulingPolicy"
			switch pol := f.Policy(name); {
			case !ok:
				c.fail(pp, "%s %q is not a scheduling-policy ARN: give the policy's name or arn:aws:batch:REGION:ACCOUNT:scheduling-policy/NAME", pp, q.SchedulingPolicy)
			case pol != nil:
				quota = pol.QuotaSharePolicy != nil
			case opts.AllowExternalReferences:
				quota = true // the server checks it
			default:
				c.fail(pp, "%s %q names no scheduling policy of this file: declare it under schedulingPolicies (known: %s)", pp, q.SchedulingPolicy, names(f.SchedulingPolicies, func(p Policy) string { return p.Name }))
			}
		}
		ep := p + ".serviceEnvironment"
		if q.ServiceEnvironment == "" {
			c.fail(ep, "%s is required: name the service environment the queue draws on", ep)
		} else if name, ok := refName(q.ServiceEnvironment, "service-environment"); !ok {
			c.fail(ep, "%s %q is not a service-environment ARN: give the environment's name or arn:aws:batch:REGION:ACCOUNT:service-environment/NAME", ep, q.ServiceEnvironment)
		} else if f.Environment(name) == nil && !opts.AllowExternalReferences {
			c.fail(ep, "%s %q names no service environment of this file: declare it under serviceEnvironments (known: %s)", ep, q.ServiceEnvironment, names(f.ServiceEnvironments, func(e Environment) string { return e.Name }))
		} else if j, taken := envQueue[name]; taken && quota {
			c.fail(ep, "%s: service environment %q already serves jobQueues[%d]; a quota-management environment serves one job queue", ep, name, j)
		} else if quota {
			envQueue[name] = i
		}

		for k, a := range q.JobStateTimeLimitActions {
			ap := fmt.Sprintf("%s.jobStateTimeLimitActions[%d]", p, k)
			if a.Reason == "" {
				c.fail(ap+".reason", "%s.reason is required: the status reason code to act on, e.g. MISCONFIGURATION:QUOTA_MANAGEMENT_LIMIT_EXCEEDED", ap)
			}
			if a.State != "RUNNABLE" {
				c.fail(ap+".state", "%s.state %q is not valid: use RUNNABLE", ap, a.State)
			}
			if a.Action != "TERMINATE" {
				c.fail(ap+".action", "%s.action %q is not valid: SAGEMAKER_TRAINING queues allow TERMINATE", ap, a.Action)
			}
			if a.MaxTimeSeconds < 600 || a.MaxTimeSeconds > 86400 {
				c.fail(ap+".maxTimeSeconds", "%s.maxTimeSeconds %d is out of range: use 600 to 86400", ap, a.MaxTimeSeconds)
			}
		}

		if len(q.QuotaShares) > 0 && !quota {
			c.fail(p+".quotaShares", "%s has quotaShares but no quota-share scheduling policy: set schedulingPolicy to a policy with quotaSharePolicy", p)
		}
		if n, limit := len(q.QuotaShares), opts.maxShares(); n > limit {
			c.fail(p+".quotaShares", "%s has %d quota shares: at most %d are allowed per job queue", p+".quotaShares", n, limit)
		}
		shares := map[string]int{}
		for k, s := range q.QuotaShares {
			sp := fmt.Sprintf("%s.quotaShares[%d]", p, k)
			c.uniqueName(shares, sp+".quotaShareName", p+".quotaShares", k, s.Name, " within a queue")
			c.add(sp+".capacityLimits", qshare.ValidateCapacityLimits(sp+".capacityLimits", s.CapacityLimits))
			rp := sp + ".resourceSharingConfiguration"
			if _, ok := f.pos[rp]; !ok && s.Strategy == "" && f.pos != nil {
				c.fail(rp, "%s is required: e.g. {strategy: LEND_AND_BORROW, borrowLimit: 100}", rp)
			} else {
				_, err := qshare.ValidateSharing(rp, s.Strategy, s.BorrowLimit)
				c.add(rp, err)
			}
			pp := sp + ".preemptionConfiguration.inSharePreemption"
			if s.InSharePreemption == "" {
				c.fail(pp, "%s is required: use ENABLED or DISABLED", pp)
			} else {
				c.add(pp, qshare.ValidateState(pp, s.InSharePreemption, false))
			}
			c.add(sp+".state", qshare.ValidateState(sp+".state", s.State, true))
			c.add(sp+".tags", qshare.ValidateShareTags(sp+".tags", s.Tags))
		}
	}
	plans := map[string]int{}
	for i := range f.CapacityPlans {
		pl := &f.CapacityPlans[i]
		p := fmt.Sprintf("capacityPlans[%d]", i)
		c.uniqueName(plans, p+".capacityPlanName", "capacityPlans", i, pl.Name, "")
		if qshare.ValidateName("", pl.Name) != nil {
			continue // uniqueName said so
		}
		if err := qshare.ValidateCapacityPlan(p, pl); err != nil {
			c.add(p, err)
			continue
		}
		q := f.Queue(pl.JobQueue)
		switch {
		case q == nil:
			c.fail(p+".jobQueue", "%s.jobQueue %q names no job queue of this file (known: %s)", p, pl.JobQueue, names(f.JobQueues, func(q Queue) string { return q.Name }))
		case q.Share(pl.QuotaShare) == nil:
			c.fail(p+".quotaShareName", "%s.quotaShareName %q names no quota share of job queue %s (known: %s)", p, pl.QuotaShare, q.Name, names(q.QuotaShares, func(s Share) string { return s.Name }))
		}
	}
	return c.problems
}

// uniqueName checks the name at path: a valid name, and not one that an
// earlier item of the same list already declares. seen maps the names met
// so far to their index in list (e.g. "jobQueues"), and records this one,
// item i; within says where names must be unique, for the message.
func (c *checker) uniqueName(seen map[string]int, path, list string, i int, name, within string) {
	c.add(path, qshare.ValidateName(path, name))
	if j, dup := seen[name]; dup && name != "" {
		c.fail(path, "%s %q is already declared by %s[%d]: names must be unique%s", path, name, list, j, within)
	} else {
		seen[name] = i
	}
}

// supportedType checks a resource type at path: empty (the default) or
// SAGEMAKER_TRAINING.
func (c *checker) supportedType(path, typ string) {
	if typ != "" && typ != SageMakerTraining {
		c.fail(path, "%s %q is not supported: use %s", path, typ, SageMakerTraining)
	}
}

func names[T any](xs []T, name func(T) string) string {
	if len(xs) == 0 {
		return "none"
	}
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = name(x)
	}
	return strings.Join(out, ", ")
}

// IsInvalid reports whether err is a configuration problem (as opposed to,
// say, a file that cannot be read).
func IsInvalid(err error) bool {
	var e *Errors
	return errors.As(err, &e)
}
