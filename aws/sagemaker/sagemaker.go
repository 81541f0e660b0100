// Package sagemaker is the SageMaker endpoint of qshare, for the training
// jobs that qshare's attempts are: the SageMaker Python SDK asks about the
// training job that AWS Batch made of a service job (TrainingQueuedJob's
// get_model_trainer calls DescribeTrainingJob on the latest attempt's
// serviceResourceId), and so do people with the AWS CLI.
//
// It keeps no state: a training job is a view of one attempt of a job in
// the daemon (viewOf), DescribeTrainingJob and ListTrainingJobs read it,
// StopTrainingJob is the same terminate command that Batch's
// TerminateServiceJob is. CreateTrainingJob is refused: a training job of
// qshare starts only from a job queue. The protocol is awsJson1_1, served by
// package awsjson.
package sagemaker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"time"

	"qshare"
	"qshare/auth"
	"qshare/aws/awsjson"
	"qshare/trainingjob"
)

// TargetPrefix is what X-Amz-Target holds before a SageMaker operation's
// name, and SigningName the service of a SageMaker request's SigV4
// credential scope: how the server's router knows a request is for this
// endpoint.
const (
	TargetPrefix = "SageMaker"
	SigningName  = "sagemaker"
)

// ActionPrefix is the service prefix of the IAM actions this endpoint
// authorizes (sagemaker:DescribeTrainingJob…).
const ActionPrefix = "sagemaker:"

// Jobs is what the endpoint asks of the daemon (*daemon.Daemon).
type Jobs interface {
	// Region and AccountID are those of the server's ARNs.
	Region() string
	AccountID() string
	// TrainingJob finds the job and attempt of a training job name; ENOTFOUND when none.
	TrainingJob(name string) (*qshare.Job, qshare.Attempt, error)
	// EachJob calls f with each job until it returns false.
	EachJob(f func(*qshare.Job) bool)
	// Terminate ends a job as Batch's TerminateServiceJob does.
	Terminate(ctx context.Context, ref, reason string) error
	// JobShareARN is the ARN of the quota share (or queue) of j.
	JobShareARN(j *qshare.Job) string
}

// errorTable is SageMaker's error table: a training job that does not exist is
// ResourceNotFound, as the service's model says; every refusal of the
// input a ValidationException.
var errorTable = awsjson.WithCommonErrors(map[qshare.ErrorCode]awsjson.ErrorType{
	qshare.EINVALID:  {Code: "ValidationException", Status: http.StatusBadRequest},
	qshare.ECONFLICT: {Code: "ValidationException", Status: http.StatusBadRequest},
	qshare.ENOTFOUND: {Code: "ResourceNotFound", Status: http.StatusBadRequest},
})

// New returns the SageMaker endpoint over jobs. logs is the executor's
// Logs, from which FinalMetricDataList is read; nil: none is.
func New(jobs Jobs, logs LogsFunc, log *slog.Logger) *awsjson.Service {
	h := &handler{jobs: jobs, logs: logs}
	return &awsjson.Service{
		Name:         "SageMaker",
		TargetPrefix: TargetPrefix,
		Errors:       errorTable,
		Log:          log,
		Ops: map[string]awsjson.Op{
			"DescribeTrainingJob": awsjson.Handle(h.describe),
			"ListTrainingJobs":    awsjson.Handle(h.list),
			"StopTrainingJob":     awsjson.Handle(h.stop),
			"ListTags":            awsjson.Handle(h.listTags),
			"CreateTrainingJob":   awsjson.Handle(h.create),
		},
	}
}

// Actions returns the IAM actions this endpoint authorizes, sorted.
func Actions() []string {
	return []string{ActionPrefix + "DescribeTrainingJob", ActionPrefix + "ListTags", ActionPrefix + "ListTrainingJobs", ActionPrefix + "StopTrainingJob"}
}

type handler struct {
	jobs Jobs
	logs LogsFunc
}

type nameIn struct {
	TrainingJobName string `json:"TrainingJobName"`
}

// find authorizes action on the training job named in.TrainingJobName
// (on the ARN it would have, when it does not exist, so that a caller
// learns nothing of jobs it may not see) and finds it.
func (h *handler) find(ctx context.Context, action string, in *nameIn) (view, error) {
	if in.TrainingJobName == "" {
		return view{}, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value null at 'trainingJobName' failed to satisfy constraint: Member must not be null")
	}
	arn := trainingjob.AttemptARN(h.jobs.Region(), h.jobs.AccountID(), in.TrainingJobName)
	if err := auth.Authorize(ctx, ActionPrefix+action, arn); err != nil {
		return view{}, err
	}
	j, a, err := h.jobs.TrainingJob(in.TrainingJobName)
	if err != nil {
		return view{}, err
	}
	return viewOf(j, a), nil
}

func (h *handler) describe(ctx context.Context, in *nameIn) (any, error) {
	v, err := h.find(ctx, "DescribeTrainingJob", in)
	if err != nil {
		return nil, err
	}
	out, payload := v.describe()
	if m := finalMetrics(ctx, h.logs, v.att, payload, time.Now()); len(m) > 0 {
		out["FinalMetricDataList"] = m
	}
	return out, nil
}

// stop stops the attempt's training job the way Batch's terminate does:
// the job is terminated, its attempt stopped, and the job FAILED with the
// reason. It needs sagemaker:StopTrainingJob on the training job and
// batch:TerminateServiceJob on the job, since it is that terminate.
func (h *handler) stop(ctx context.Context, in *nameIn) (any, error) {
	v, err := h.find(ctx, "StopTrainingJob", in)
	if err != nil {
		return nil, err
	}
	if err := auth.Authorize(ctx, "batch:TerminateServiceJob", h.jobs.JobShareARN(v.job), v.job.ARN); err != nil {
		return nil, err
	}
	if v.status != statusInProgress && v.status != statusStopping {
		return nil, qshare.Errorf(qshare.EINVALID, "The request was rejected because the training job %s is in status %s: only an InProgress training job can be stopped", v.name, v.status)
	}
	reason := "Stopped by SageMaker StopTrainingJob of training job " + v.name
	if err := h.jobs.Terminate(ctx, v.job.ID, reason); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// create refuses CreateTrainingJob: qshare has no training jobs of their
// own, only the attempts of the jobs of its queues.
func (h *handler) create(ctx context.Context, in *nameIn) (any, error) {
	return nil, qshare.Errorf(qshare.EINVALID, "qshare does not create training jobs directly: submit the CreateTrainingJob request as the serviceRequestPayload of an AWS Batch SubmitServiceJob to one of its job queues (with the SageMaker Python SDK, TrainingQueue(queue).submit(model_trainer, inputs)); its attempts are then the training jobs DescribeTrainingJob shows")
}

type listTagsIn struct {
	ResourceArn string `json:"ResourceArn"`
	NextToken   string `json:"NextToken"`
	MaxResults  *int   `json:"MaxResults"`
}

type tag struct {
	Key   string `json:"Key"`
	Value string `json:"Value"`
}

// listTags returns the tags of a training job: its job's tags (the Batch
// tags, into which the SageMaker SDK merged the payload's own).
func (h *handler) listTags(ctx context.Context, in *listTagsIn) (any, error) {
	if in.ResourceArn == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value null at 'resourceArn' failed to satisfy constraint: Member must not be null")
	}
	if err := auth.Authorize(ctx, ActionPrefix+"ListTags", in.ResourceArn); err != nil {
		return nil, err
	}
	name := trainingjob.NameOfARN(in.ResourceArn)
	if name == "" || in.ResourceArn != trainingjob.AttemptARN(h.jobs.Region(), h.jobs.AccountID(), name) {
		return nil, qshare.Errorf(qshare.EINVALID, "ResourceArn %q is not the ARN of a training job of this server: qshare's SageMaker endpoint has tags only on training jobs (%s)", awsjson.Short(in.ResourceArn), trainingjob.AttemptARN(h.jobs.Region(), h.jobs.AccountID(), "NAME"))
	}
	j, _, err := h.jobs.TrainingJob(name)
	if err != nil {
		return nil, err
	}
	tags := make([]tag, 0, len(j.Tags))
	for k, v := range j.Tags {
		tags = append(tags, tag{k, v})
	}
	sort.Slice(tags, func(a, b int) bool { return tags[a].Key < tags[b].Key })
	return map[string]any{"Tags": tags}, nil
}

// listIn is a ListTrainingJobs request. Times are seconds since the epoch.
type listIn struct {
	NextToken              string   `json:"NextToken"`
	MaxResults             *int     `json:"MaxResults"`
	CreationTimeAfter      *float64 `json:"CreationTimeAfter"`
	CreationTimeBefore     *float64 `json:"CreationTimeBefore"`
	LastModifiedTimeAfter  *float64 `json:"LastModifiedTimeAfter"`
	LastModifiedTimeBefore *float64 `json:"LastModifiedTimeBefore"`
	NameContains           string   `json:"NameContains"`
	StatusEquals           string   `json:"StatusEquals"`
	SortBy                 string   `json:"SortBy"`
	SortOrder              string   `json:"SortOrder"`
	WarmPoolStatusEquals   string   `json:"WarmPoolStatusEquals"`
	TrainingPlanArnEquals  string   `json:"TrainingPlanArnEquals"`
}

// pageKey is where a page of ListTrainingJobs ends: the sort key and the
// name of its last entry. The next page starts after it, so a job that
// starts between two pages neither repeats an entry nor hides one.
type pageKey struct {
	K string `json:"k"`
	N string `json:"n"`
}

func (h *handler) list(ctx context.Context, in *listIn) (any, error) {
	if err := auth.Authorize(ctx, ActionPrefix+"ListTrainingJobs", "*"); err != nil {
		return nil, err
	}
	max := 10
	if in.MaxResults != nil {
		max = *in.MaxResults
		if max < 1 || max > 100 {
			return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value %d at 'maxResults' failed to satisfy constraint: Member must have value between 1 and 100", max)
		}
	}
	if in.StatusEquals != "" && !slices.Contains([]string{statusInProgress, statusCompleted, statusFailed, statusStopping, statusStopped}, in.StatusEquals) {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value %q at 'statusEquals' failed to satisfy constraint: Member must satisfy enum value set: [InProgress, Completed, Failed, Stopping, Stopped]", awsjson.Short(in.StatusEquals))
	}
	sortBy, order := in.SortBy, in.SortOrder
	if sortBy == "" {
		sortBy = "CreationTime"
	}
	if order == "" {
		order = "Descending"
	}
	if !slices.Contains([]string{"Name", "CreationTime", "Status"}, sortBy) {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value %q at 'sortBy' failed to satisfy constraint: Member must satisfy enum value set: [Name, CreationTime, Status]", awsjson.Short(sortBy))
	}
	if order != "Ascending" && order != "Descending" {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value %q at 'sortOrder' failed to satisfy constraint: Member must satisfy enum value set: [Ascending, Descending]", awsjson.Short(order))
	}
	if len(in.NameContains) > trainingjob.MaxTrainingJobName {
		return nil, qshare.Errorf(qshare.EINVALID, "1 validation error detected: Value at 'nameContains' failed to satisfy constraint: Member must have length less than or equal to %d", trainingjob.MaxTrainingJobName)
	}
	var after *pageKey
	if in.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		var k pageKey
		if err != nil || json.Unmarshal(b, &k) != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "NextToken is not valid: pass the NextToken of the previous ListTrainingJobs answer unchanged")
		}
		after = &k
	}
	keyOf := func(v view) string {
		switch sortBy {
		case "Name":
			return strings.ToLower(v.name)
		case "Status":
			return v.status
		}
		var b [20]byte // the creation time in fixed-width decimal nanoseconds
		n := v.att.ScheduledAt.UnixNano()
		for i := len(b) - 1; i >= 0; i-- {
			b[i] = byte('0' + n%10)
			n /= 10
		}
		return string(b[:])
	}
	less := func(a, b pageKey) bool {
		if a.K != b.K {
			return (a.K < b.K) == (order == "Ascending")
		}
		return (a.N < b.N) == (order == "Ascending")
	}
	match := filter(in)
	// best holds the page and one more entry (which says there is a next
	// page), in order: a call looks at every attempt, but keeps and sorts
	// only these.
	type entry struct {
		k pageKey
		j *qshare.Job
		a int // index in j.Attempts
	}
	best := make([]entry, 0, max+1)
	h.jobs.EachJob(func(j *qshare.Job) bool {
		if in.TrainingPlanArnEquals != "" && !onPlan(j, in.TrainingPlanArnEquals) {
			return true
		}
		for i := range j.Attempts {
			if j.Attempts[i].ResourceARN == "" {
				continue
			}
			v := viewOf(j, j.Attempts[i])
			if !match(v) {
				continue
			}
			k := pageKey{keyOf(v), strings.ToLower(v.name)}
			if (after != nil && !less(*after, k)) || (len(best) == max+1 && !less(k, best[max].k)) {
				continue
			}
			at := sort.Search(len(best), func(x int) bool { return less(k, best[x].k) })
			if len(best) < max+1 {
				best = append(best, entry{})
			}
			copy(best[at+1:], best[at:len(best)-1])
			best[at] = entry{k, j, i}
		}
		return true
	})
	out := map[string]any{}
	sums := make([]summary, 0, min(max, len(best)))
	for i, e := range best {
		if i == max {
			b, _ := json.Marshal(best[i-1].k)
			out["NextToken"] = base64.RawURLEncoding.EncodeToString(b)
			break
		}
		sums = append(sums, viewOf(e.j, e.j.Attempts[e.a]).summary())
	}
	out["TrainingJobSummaries"] = sums
	return out, nil
}

// filter is ListTrainingJobs' filters of one training job. A warm pool
// status never matches: qshare keeps no warm pools.
func filter(in *listIn) func(view) bool {
	at := func(p *float64) time.Time { return time.UnixMilli(int64(*p * 1000)) }
	return func(v view) bool {
		created := v.att.ScheduledAt
		switch {
		case in.WarmPoolStatusEquals != "":
			return false
		case in.StatusEquals != "" && v.status != in.StatusEquals:
			return false
		case in.NameContains != "" && !strings.Contains(strings.ToLower(v.name), strings.ToLower(in.NameContains)):
			return false
		case in.CreationTimeAfter != nil && !created.After(at(in.CreationTimeAfter)):
			return false
		case in.CreationTimeBefore != nil && !created.Before(at(in.CreationTimeBefore)):
			return false
		case in.LastModifiedTimeAfter != nil && !v.lastChange.After(at(in.LastModifiedTimeAfter)):
			return false
		case in.LastModifiedTimeBefore != nil && !v.lastChange.Before(at(in.LastModifiedTimeBefore)):
			return false
		}
		return true
	}
}

// onPlan reports whether j's payload names the training plan arn.
func onPlan(j *qshare.Job, arn string) bool {
	var p struct {
		ResourceConfig struct {
			TrainingPlanArn string `json:"TrainingPlanArn"`
		} `json:"ResourceConfig"`
	}
	return json.Unmarshal([]byte(j.Payload), &p) == nil && p.ResourceConfig.TrainingPlanArn == arn
}
