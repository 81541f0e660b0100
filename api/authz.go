package api

import (
	"context"
	"net/http"
	"sort"
	"strings"

	"qshare/auth"
	"qshare/daemon"
)

// actionPrefix is the service prefix of every action qshare authorizes,
// its extensions' included, so that a policy's batch:* covers them all.
const actionPrefix = "batch:"

// The actions of qshare's extension endpoints (docs/security.md).
const (
	// ActionGetServiceJobLogs reads a job's log (the log endpoint), on the
	// job's ARN and its quota share's.
	ActionGetServiceJobLogs = actionPrefix + "GetServiceJobLogs"
	// ActionGetLending reads who lends to whom (LendingPath), on the job
	// queue's ARN, or on "*" for every queue.
	ActionGetLending = actionPrefix + "GetJobQueueLending"
	// ActionGetMetrics reads the Prometheus metrics (/metrics, mounted by
	// qshare serve behind auth.Require), on "*".
	ActionGetMetrics = actionPrefix + "GetMetrics"
	// ActionGetEvents reads the event log's last hour (the dashboard's
	// timeline, /qshare/v1/events, mounted by qshare serve behind
	// auth.Require), on "*"; each caller then sees the events of the jobs
	// it may describe.
	ActionGetEvents = actionPrefix + "GetEvents"
	// ActionDescribeServiceJob is DescribeServiceJob's action, which also
	// decides which jobs the dashboard's queue view and timeline show a
	// caller.
	ActionDescribeServiceJob = actionPrefix + "DescribeServiceJob"
)

// one is the resources of an operation on one resource.
func one(arn string) [][]string { return [][]string{{arn}} }

// authorizeAll authorizes the caller for action on each group of
// resources in turn (one group per job of a bulk operation; nil: "*"); it
// returns the first refusal. Without authentication it refuses nothing,
// but still names the action in the request's audit line (auth.Authorize).
func authorizeAll(ctx context.Context, action string, groups [][]string) error {
	if len(groups) == 0 {
		return auth.Authorize(ctx, action, "*")
	}
	for _, g := range groups {
		if err := auth.Authorize(ctx, action, g...); err != nil {
			return err
		}
	}
	return nil
}

// refARN is the ARN of a name-or-ARN reference: an ARN as given (the
// daemon refuses one of another kind, region or account afterwards), a name
// made into an ARN by mk.
func refARN(ref string, mk func(string) string) string {
	if strings.HasPrefix(ref, "arn:") {
		return ref
	}
	return mk(ref)
}

// shareARN is the ARN a submit or a quota share's creation is checked
// against: the quota share's, or the job queue's when no share is named.
func shareARN(d *daemon.Daemon, queue, share string) string {
	q := refARN(queue, d.QueueARN)
	if share == "" {
		return q
	}
	return q + "/quota-share/" + share
}

// JobResources is what an operation on the job ref (an ID or ARN) is
// checked against: the job's quota share's ARN (or its queue's, when it has
// no share) and the job's own. A job that does not exist is checked against
// the ARN it would have, so that the caller learns nothing of it unless
// allowed. The log endpoint (logstream.Handler.Resources) checks with it
// too.
func JobResources(d *daemon.Daemon, ref string) []string { return jobResources(d, ref) }

func jobResources(d *daemon.Daemon, ref string) []string {
	if j, err := d.Job(ref); err == nil {
		return []string{d.JobShareARN(j), j.ARN}
	}
	return []string{refARN(ref, d.JobARN)}
}

// eachJob is jobResources for each job of a bulk operation.
func eachJob(d *daemon.Daemon, refs []string) [][]string {
	out := make([][]string, 0, len(refs))
	for _, r := range refs {
		out = append(out, jobResources(d, r))
	}
	if len(out) == 0 {
		return one(d.JobARN(""))
	}
	return out
}

// tagResources is what a tag operation on arn is checked against: a
// job's resources for a job, the ARN itself for anything else.
func tagResources(d *daemon.Daemon, arn string) []string {
	if strings.Contains(arn, ":service-job/") {
		return jobResources(d, arn)
	}
	return []string{arn}
}

// authorizeSetting checks a tag operation that sets or removes a quota
// share's setting given as a tag (qshare.TagMinRunTime) also as the
// update of the share it is: batch:UpdateQuotaShare on the ARN. A
// principal allowed to tag a share may not thereby change how its jobs
// are preempted. On another kind of resource the daemon refuses the tag.
func authorizeSetting(ctx context.Context, arn string) error {
	if !strings.Contains(arn, "/quota-share/") {
		return nil
	}
	return authorizeShareUpdate(ctx, arn)
}

// authorizeShareUpdate checks that the caller may update the quota share
// of shareARN (batch:UpdateQuotaShare): asked of a change made through
// another route that changes the share all the same (a setting given as a
// tag, a capacity plan).
func authorizeShareUpdate(ctx context.Context, shareARN string) error {
	return auth.Authorize(ctx, actionPrefix+"UpdateQuotaShare", shareARN)
}

// BodyLimit returns the most bytes the API reads of r's body: the request
// limit of a submit, and 1 MiB for anything else. Authentication reads the
// body with it, to hash it, before the route does.
func BodyLimit(r *http.Request) int64 {
	if strings.EqualFold(r.URL.Path, "/v1/submitservicejob") {
		return maxSubmitBody
	}
	return maxBody
}

// Actions returns every IAM action the server's routes authorize, sorted:
// one per AWS Batch operation (batch:SubmitServiceJob…), the tag routes'
// (batch:TagResource, batch:UntagResource, batch:ListTagsForResource) and
// the extensions' (ActionGetServiceJobLogs, ActionGetLending and the
// capacity plans' ActionPutCapacityPlan, ActionDeleteCapacityPlan and
// ActionDescribeCapacityPlans). docs/security.md
// lists them, and a test keeps the two the same.
func Actions() []string {
	var out []string
	for _, o := range (&Handler{}).operations() {
		out = append(out, o.action)
	}
	for _, a := range tagActions {
		out = append(out, a)
	}
	out = append(out, ActionGetServiceJobLogs, ActionGetLending, ActionPutCapacityPlan, ActionDeleteCapacityPlan, ActionDescribeCapacityPlans)
	sort.Strings(out)
	return out
}
