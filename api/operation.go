package api

import (
	"context"
	"encoding/json"

	"qshare"
	"qshare/auth"
	"qshare/daemon"
)

// op wraps a typed operation: decode the body into In, authorize the
// caller for batch:action on the resources res names (authorizeAll), then
// run f. res nil means the operation concerns no one resource ("*"), as
// AWS checks its Describe* and List* operations.
func op[In any](limit int64, action string, res func(in *In) [][]string, f func(ctx context.Context, in *In) (any, error)) operation {
	return operation{limit: limit, action: actionPrefix + action, run: func(ctx context.Context, body []byte) (any, error) {
		var in In
		if err := decode(body, &in); err != nil {
			return nil, err
		}
		var groups [][]string
		if res != nil {
			groups = res(&in)
		}
		if c, ok := any(&in).(conditioned); ok {
			ctx = auth.WithConditionKeys(ctx, c.conditionKeys())
		}
		if err := authorizeAll(ctx, actionPrefix+action, groups); err != nil {
			return nil, err
		}
		return f(ctx, &in)
	}}
}

type empty struct{}

// reply is an operation's answer: out, or only err when the daemon refused.
// out is built before err is looked at, so it must be safe to build from
// the zero record a refusing daemon call returns (a struct of its fields,
// not a conversion that follows a pointer).
func reply(out any, err error) (any, error) {
	if err != nil {
		return nil, err
	}
	return out, nil
}

// describePage answers a Describe* or List* call over a resource kind: it checks
// that refs has at most 100 entries (field names it), asks list for the
// records (nil refs: all of them) and returns the page that in asks for,
// each record converted by conv and keyed by name.
func describePage[T, D any](field string, refs []string, list func([]string) ([]T, error), name func(T) string, conv func(T) D, in pageIn) ([]D, *string, error) {
	if err := checkRefs(field, refs); err != nil {
		return nil, nil, err
	}
	items, err := list(refs)
	if err != nil {
		return nil, nil, err
	}
	return page(items, name, conv, in)
}

// policyBodyIn decodes the two bodies a scheduling policy may have; the
// daemon decides which of them it takes. With an error, the bodies are not
// to be used.
func policyBodyIn(qspIn *quotaSharePolicyWire, fspIn json.RawMessage) (*qshare.QuotaSharePolicy, []byte, error) {
	qsp, err := quotaSharePolicyIn(qspIn)
	if err != nil {
		return nil, nil, err
	}
	fsp, err := fairshareIn(fspIn)
	return qsp, fsp, err
}

// queueOrderIn decodes the serviceEnvironmentOrder and
// jobStateTimeLimitActions of a job queue create or update. With an error,
// the lists are not to be used.
func queueOrderIn(os []envOrderWire, as []timeLimitWire) ([]qshare.ServiceEnvironmentOrder, []qshare.JobStateTimeLimitAction, error) {
	order, err := envOrderIn(os)
	if err != nil {
		return nil, nil, err
	}
	actions, err := timeLimitsIn(as)
	return order, actions, err
}

func statePtr(s *string) *qshare.State {
	if s == nil {
		return nil
	}
	st := qshare.State(*s)
	return &st
}

// operations lists every operation by its lowercased name.
func (h *Handler) operations() map[string]operation {
	d := h.d
	// submit is SubmitServiceJob once its body is decoded.
	submit := func(ctx context.Context, in *submitIn) (any, error) {
		if err := required("jobQueue", in.JobQueue); err != nil {
			return nil, err
		}
		rs, err := retryIn(in.RetryStrategy)
		if err != nil {
			return nil, err
		}
		s := daemon.SubmitInput{Name: in.JobName, Queue: in.JobQueue, QuotaShare: in.QuotaShareName, ShareIdentifier: in.ShareIdentifier,
			ServiceJobType: in.ServiceJobType, Payload: in.ServiceRequestPayload, Priority: i64(in.SchedulingPriority), RetryStrategy: rs,
			Tags: in.Tags, ClientToken: in.ClientToken}
		if p := auth.PrincipalFrom(ctx); p != nil {
			s.SubmittedBy, s.RunAs, s.MaxUnfinished = p.ARN, p.UnixUser, p.Limits.UnfinishedJobs
		}
		if in.ClientToken != "" { // the hash only tells replays of a token apart
			s.RequestHash = requestHash(*in)
		}
		if in.PreemptionConfiguration != nil {
			s.PreemptionRetries = i64(in.PreemptionConfiguration.PreemptionRetriesBeforeTermination)
		}
		if in.TimeoutConfig != nil {
			s.AttemptDurationSeconds = i64(in.TimeoutConfig.AttemptDurationSeconds)
		}
		j, err := d.Submit(ctx, s)
		if err != nil {
			return nil, err
		}
		return jobRef{j.ARN, j.Name, j.ID}, nil
	}
	return map[string]operation{
		// ---- service environments ----
		"createserviceenvironment": op(maxBody, "CreateServiceEnvironment", func(in *createEnvironmentIn) [][]string { return one(d.EnvironmentARN(in.ServiceEnvironmentName)) }, func(ctx context.Context, in *createEnvironmentIn) (any, error) {
			limits, err := limitsIn("capacityLimits", in.CapacityLimits)
			if err != nil {
				return nil, err
			}
			e, err := d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: in.ServiceEnvironmentName, Type: in.ServiceEnvironmentType,
				State: qshare.State(in.State), CapacityLimits: limits, Tags: in.Tags})
			return reply(environmentRef{e.Name, e.ARN}, err)
		}),
		"updateserviceenvironment": op(maxBody, "UpdateServiceEnvironment", func(in *updateEnvironmentIn) [][]string { return one(refARN(in.ServiceEnvironment, d.EnvironmentARN)) }, func(ctx context.Context, in *updateEnvironmentIn) (any, error) {
			limits, err := limitsIn("capacityLimits", in.CapacityLimits)
			if err != nil {
				return nil, err
			}
			e, err := d.UpdateEnvironment(ctx, daemon.EnvironmentUpdate{Ref: in.ServiceEnvironment, State: statePtr(in.State), CapacityLimits: limits})
			return reply(environmentRef{e.Name, e.ARN}, err)
		}),
		"deleteserviceenvironment": op(maxBody, "DeleteServiceEnvironment", func(in *deleteEnvironmentIn) [][]string { return one(refARN(in.ServiceEnvironment, d.EnvironmentARN)) }, func(ctx context.Context, in *deleteEnvironmentIn) (any, error) {
			return empty{}, d.DeleteEnvironment(ctx, in.ServiceEnvironment)
		}),
		"describeserviceenvironments": op(maxBody, "DescribeServiceEnvironments", nil, func(ctx context.Context, in *describeEnvironmentsIn) (any, error) {
			p, next, err := describePage("serviceEnvironments", in.ServiceEnvironments, d.Environments,
				func(e qshare.ServiceEnvironment) string { return e.Name }, environmentOut, in.pageIn)
			return reply(describeEnvironmentsOut{ServiceEnvironments: p, NextToken: next}, err)
		}),

		// ---- scheduling policies ----
		"createschedulingpolicy": op(maxBody, "CreateSchedulingPolicy", func(in *createPolicyIn) [][]string { return one(d.PolicyARN(in.Name)) }, func(ctx context.Context, in *createPolicyIn) (any, error) {
			qsp, fsp, err := policyBodyIn(in.QuotaSharePolicy, in.FairsharePolicy)
			if err != nil {
				return nil, err
			}
			p, err := d.CreatePolicy(ctx, daemon.PolicyInput{Name: in.Name, QuotaSharePolicy: qsp, FairsharePolicy: fsp, Tags: in.Tags})
			return reply(policyRef{p.Name, p.ARN}, err)
		}),
		"updateschedulingpolicy": op(maxBody, "UpdateSchedulingPolicy", func(in *updatePolicyIn) [][]string { return one(refARN(in.Arn, d.PolicyARN)) }, func(ctx context.Context, in *updatePolicyIn) (any, error) {
			qsp, fsp, err := policyBodyIn(in.QuotaSharePolicy, in.FairsharePolicy)
			if err != nil {
				return nil, err
			}
			return empty{}, d.UpdatePolicy(ctx, in.Arn, qsp, fsp)
		}),
		"deleteschedulingpolicy": op(maxBody, "DeleteSchedulingPolicy", func(in *arnIn) [][]string { return one(refARN(in.Arn, d.PolicyARN)) }, func(ctx context.Context, in *arnIn) (any, error) {
			return empty{}, d.DeletePolicy(ctx, in.Arn)
		}),
		"describeschedulingpolicies": op(maxBody, "DescribeSchedulingPolicies", nil, func(ctx context.Context, in *describePoliciesIn) (any, error) {
			if len(in.Arns) == 0 {
				return nil, qshare.Errorf(qshare.EINVALID, "arns is required: give 1 to 100 scheduling policy ARNs")
			}
			if len(in.Arns) > 100 {
				return nil, qshare.Errorf(qshare.EINVALID, "arns has %d entries: at most 100 are allowed", len(in.Arns))
			}
			ps, err := d.Policies(in.Arns)
			if err != nil {
				return nil, err
			}
			out := describePoliciesOut{SchedulingPolicies: []policyDetail{}}
			for _, p := range ps {
				out.SchedulingPolicies = append(out.SchedulingPolicies, policyOut(p))
			}
			return out, nil
		}),
		"listschedulingpolicies": op(maxBody, "ListSchedulingPolicies", nil, func(ctx context.Context, in *pageIn) (any, error) {
			p, next, err := describePage("arns", nil, d.Policies, func(p qshare.SchedulingPolicy) string { return p.Name },
				func(p qshare.SchedulingPolicy) arnIn { return arnIn{p.ARN} }, *in)
			return reply(listPoliciesOut{SchedulingPolicies: p, NextToken: next}, err)
		}),

		// ---- job queues ----
		"createjobqueue": op(maxBody, "CreateJobQueue", func(in *createQueueIn) [][]string { return one(d.QueueARN(in.JobQueueName)) }, func(ctx context.Context, in *createQueueIn) (any, error) {
			if in.Priority == nil {
				return nil, qshare.Errorf(qshare.EINVALID, "priority is required: use an integer from 0 to 1000")
			}
			order, actions, err := queueOrderIn(in.ServiceEnvironmentOrder, in.JobStateTimeLimitActions)
			if err != nil {
				return nil, err
			}
			q, err := d.CreateQueue(ctx, daemon.QueueInput{Name: in.JobQueueName, Type: in.JobQueueType, State: qshare.State(in.State),
				SchedulingPolicyARN: in.SchedulingPolicyArn, Priority: int64(*in.Priority), HasComputeEnvironments: len(in.ComputeEnvironmentOrder) > 0,
				ServiceEnvironmentOrder: order, JobStateTimeLimitActions: actions, Tags: in.Tags})
			return reply(queueRef{q.Name, q.ARN}, err)
		}),
		"updatejobqueue": op(maxBody, "UpdateJobQueue", func(in *updateQueueIn) [][]string { return one(refARN(in.JobQueue, d.QueueARN)) }, func(ctx context.Context, in *updateQueueIn) (any, error) {
			order, actions, err := queueOrderIn(in.ServiceEnvironmentOrder, in.JobStateTimeLimitActions)
			if err != nil {
				return nil, err
			}
			q, err := d.UpdateQueue(ctx, daemon.QueueUpdate{Ref: in.JobQueue, State: statePtr(in.State), SchedulingPolicyARN: in.SchedulingPolicyArn,
				Priority: i64(in.Priority), HasComputeEnvironments: len(in.ComputeEnvironmentOrder) > 0, ServiceEnvironmentOrder: order,
				JobStateTimeLimitActions: actions})
			return reply(queueRef{q.Name, q.ARN}, err)
		}),
		"deletejobqueue": op(maxBody, "DeleteJobQueue", func(in *jobQueueIn) [][]string { return one(refARN(in.JobQueue, d.QueueARN)) }, func(ctx context.Context, in *jobQueueIn) (any, error) {
			return empty{}, d.DeleteQueue(ctx, in.JobQueue)
		}),
		"describejobqueues": op(maxBody, "DescribeJobQueues", nil, func(ctx context.Context, in *describeQueuesIn) (any, error) {
			p, next, err := describePage("jobQueues", in.JobQueues, d.Queues, func(q qshare.JobQueue) string { return q.Name }, queueOut, in.pageIn)
			return reply(describeQueuesOut{JobQueues: p, NextToken: next}, err)
		}),

		// ---- quota shares ----
		"createquotashare": op(maxBody, "CreateQuotaShare", func(in *createShareIn) [][]string { return one(shareARN(d, in.JobQueue, in.QuotaShareName)) }, func(ctx context.Context, in *createShareIn) (any, error) {
			limits, err := limitsIn("capacityLimits", in.CapacityLimits)
			if err != nil {
				return nil, err
			}
			if err := required("jobQueue", in.JobQueue); err != nil {
				return nil, err
			}
			if in.ResourceSharingConfiguration == nil {
				return nil, qshare.Errorf(qshare.EINVALID, "resourceSharingConfiguration is required: give {strategy: RESERVE|LEND|LEND_AND_BORROW, borrowLimit}")
			}
			if in.PreemptionConfiguration == nil || in.PreemptionConfiguration.InSharePreemption == nil {
				return nil, qshare.Errorf(qshare.EINVALID, "preemptionConfiguration.inSharePreemption is required: use ENABLED or DISABLED")
			}
			var strategy string
			if in.ResourceSharingConfiguration.Strategy != nil {
				strategy = *in.ResourceSharingConfiguration.Strategy
			}
			s, err := d.CreateShare(ctx, daemon.ShareInput{Name: in.QuotaShareName, Queue: in.JobQueue, CapacityLimits: limits,
				Strategy: qshare.Strategy(strategy), BorrowLimit: i64(in.ResourceSharingConfiguration.BorrowLimit),
				InSharePreemption: qshare.State(*in.PreemptionConfiguration.InSharePreemption), State: qshare.State(in.State), Tags: in.Tags})
			return reply(shareRef{s.Name, s.ARN}, err)
		}),
		"updatequotashare": op(maxBody, "UpdateQuotaShare", func(in *updateShareIn) [][]string { return one(in.QuotaShareArn) }, func(ctx context.Context, in *updateShareIn) (any, error) {
			limits, err := limitsIn("capacityLimits", in.CapacityLimits)
			if err != nil {
				return nil, err
			}
			u := daemon.ShareUpdate{ARN: in.QuotaShareArn, CapacityLimits: limits, State: statePtr(in.State)}
			if rs := in.ResourceSharingConfiguration; rs != nil {
				u.Sharing = true
				if rs.Strategy != nil {
					u.Strategy = qshare.Strategy(*rs.Strategy)
				}
				u.BorrowLimit = i64(rs.BorrowLimit)
			}
			if pc := in.PreemptionConfiguration; pc != nil {
				if pc.InSharePreemption == nil {
					return nil, qshare.Errorf(qshare.EINVALID, "preemptionConfiguration.inSharePreemption is required: use ENABLED or DISABLED")
				}
				u.InSharePreemption = statePtr(pc.InSharePreemption)
			}
			s, err := d.UpdateShare(ctx, u)
			return reply(shareRef{s.Name, s.ARN}, err)
		}),
		"deletequotashare": op(maxBody, "DeleteQuotaShare", func(in *shareArnIn) [][]string { return one(in.QuotaShareArn) }, func(ctx context.Context, in *shareArnIn) (any, error) {
			return empty{}, d.DeleteShare(ctx, in.QuotaShareArn)
		}),
		"describequotashare": op(maxBody, "DescribeQuotaShare", func(in *shareArnIn) [][]string { return one(in.QuotaShareArn) }, func(ctx context.Context, in *shareArnIn) (any, error) {
			s, err := d.Share(in.QuotaShareArn)
			if err != nil {
				return nil, err
			}
			return shareOut(s, d.QueueARN(s.JobQueue), true), nil
		}),
		"listquotashares": op(maxBody, "ListQuotaShares", nil, func(ctx context.Context, in *listSharesIn) (any, error) {
			if err := required("jobQueue", in.JobQueue); err != nil {
				return nil, err
			}
			ss, err := d.Shares(in.JobQueue)
			if err != nil {
				return nil, err
			}
			p, next, err := page(ss, func(s qshare.QuotaShare) string { return s.Name },
				func(s qshare.QuotaShare) shareDetail { return shareOut(s, d.QueueARN(s.JobQueue), false) }, in.pageIn)
			return reply(listSharesOut{QuotaShares: p, NextToken: next}, err)
		}),

		// ---- service jobs ----
		"submitservicejob": op(maxSubmitBody, "SubmitServiceJob", func(in *submitIn) [][]string { return one(shareARN(d, in.JobQueue, in.QuotaShareName)) }, submit),
		"updateservicejob": op(maxBody, "UpdateServiceJob", func(in *updateJobIn) [][]string { return [][]string{jobResources(d, in.JobId)} }, func(ctx context.Context, in *updateJobIn) (any, error) {
			if in.SchedulingPriority == nil {
				return nil, qshare.Errorf(qshare.EINVALID, "schedulingPriority is required: use an integer from 0 to 9999")
			}
			j, err := d.UpdatePriority(ctx, in.JobId, int64(*in.SchedulingPriority))
			if err != nil {
				return nil, err
			}
			return jobRef{j.ARN, j.Name, j.ID}, nil
		}),
		"describeservicejob": op(maxBody, "DescribeServiceJob", func(in *jobIdIn) [][]string { return [][]string{jobResources(d, in.JobId)} }, func(ctx context.Context, in *jobIdIn) (any, error) {
			j, err := d.Job(in.JobId)
			if err != nil {
				return nil, err
			}
			return jobOut(j, d.QueueARN(j.JobQueue)), nil
		}),
		"listservicejobs": op(maxBody, "ListServiceJobs", nil, func(ctx context.Context, in *listJobsIn) (any, error) {
			l := daemon.ListJobsInput{Queue: in.JobQueue, Status: qshare.JobStatus(in.JobStatus), NextToken: in.NextToken}
			if in.MaxResults != nil {
				if *in.MaxResults < 1 || *in.MaxResults > 100 {
					return nil, qshare.Errorf(qshare.EINVALID, "maxResults %d is out of range: use 1 to 100", *in.MaxResults)
				}
				l.MaxResults = int(*in.MaxResults)
			}
			switch len(in.Filters) {
			case 0:
			case 1:
				if in.Filters[0].Name == nil {
					return nil, qshare.Errorf(qshare.EINVALID, "filters[0].name is required: use JOB_NAME, BEFORE_CREATED_AT, AFTER_CREATED_AT, SHARE_IDENTIFIER or QUOTA_SHARE_NAME")
				}
				l.HasFilter, l.FilterName, l.FilterValues = true, *in.Filters[0].Name, in.Filters[0].Values
			default:
				return nil, qshare.Errorf(qshare.EINVALID, "filters has %d entries: ListServiceJobs takes one filter at a time", len(in.Filters))
			}
			jobs, next, err := d.ListJobs(l)
			if err != nil {
				return nil, err
			}
			out := listJobsOut{JobSummaryList: []jobSummary{}, NextToken: str(next)}
			for _, j := range jobs {
				out.JobSummaryList = append(out.JobSummaryList, summaryOut(j))
			}
			return out, nil
		}),
		"terminateservicejob": op(maxBody, "TerminateServiceJob", func(in *terminateIn) [][]string { return [][]string{jobResources(d, in.JobId)} }, func(ctx context.Context, in *terminateIn) (any, error) {
			return empty{}, d.Terminate(ctx, in.JobId, in.Reason)
		}),
		"terminateservicejobs": op(maxBody, "TerminateServiceJobs", func(in *terminateManyIn) [][]string { return eachJob(d, in.Jobs) }, func(ctx context.Context, in *terminateManyIn) (any, error) {
			ok, failed, err := d.TerminateMany(ctx, in.Jobs, in.Reason)
			if err != nil {
				return nil, err
			}
			out := terminateManyOut{Successful: ok, Errors: []terminateError{}}
			if out.Successful == nil {
				out.Successful = []string{}
			}
			for _, f := range failed {
				e := errorTable.Resolve(f.Err)
				out.Errors = append(out.Errors, terminateError{Job: f.Ref, Code: e.Code, Message: e.Message})
			}
			return out, nil
		}),
		"getjobqueuesnapshot": op(maxBody, "GetJobQueueSnapshot", func(in *jobQueueIn) [][]string { return one(refARN(in.JobQueue, d.QueueARN)) }, func(ctx context.Context, in *jobQueueIn) (any, error) {
			s, err := d.Snapshot(in.JobQueue)
			if err != nil {
				return nil, err
			}
			return snapshotWire(s), nil
		}),
	}
}

// fairshareIn checks a fair-share policy's shape and returns it as JSON, or
// nil when absent.
func fairshareIn(raw json.RawMessage) ([]byte, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var f fairsharePolicyWire
	if err := decode(raw, &f); err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "fairsharePolicy is not valid: %s", qshare.ErrorMessageOf(err))
	}
	return append([]byte(nil), raw...), nil
}

// conditioned is the input of an operation whose request carries IAM
// condition keys (auth.WithConditionKeys), for the policies' Conditions.
type conditioned interface{ conditionKeys() map[string]string }

// conditionKeys gives a submit's shareIdentifier to the policies, as
// batch:ShareIdentifier (a fair-share queue's share).
func (in *submitIn) conditionKeys() map[string]string {
	return map[string]string{auth.KeyShareIdentifier: in.ShareIdentifier}
}
