package daemon

import (
	"context"
	"encoding/base64"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"qshare"
	"qshare/store"
	"qshare/trainingjob"
)

// SubmitInput is a SubmitServiceJob request.
type SubmitInput struct {
	Name            string
	Queue           string // name or ARN
	QuotaShare      string
	ShareIdentifier string
	ServiceJobType  string
	Payload         string
	Priority        *int64
	RetryStrategy   *qshare.RetryStrategy
	// PreemptionRetries is preemptionRetriesBeforeTermination; nil means unlimited.
	PreemptionRetries      *int64
	AttemptDurationSeconds *int64
	Tags                   map[string]string
	ClientToken            string
	// SubmittedBy is the ARN of the authenticated principal that submits
	// the job, or empty without authentication. The job keeps it as the
	// system tag qshare.TagSubmittedBy, which no user can set or remove.
	SubmittedBy string
	// RunAs is the Unix user the job's processes are to run as (the
	// submitter's unixUser), or empty for the executor's default. The job
	// keeps it as the system tag qshare.TagRunAs, and every attempt's
	// executor.Spec carries it. With Config.RequireRunAs, it is required.
	RunAs string
	// MaxUnfinished is the most unfinished jobs (not SUCCEEDED or FAILED)
	// SubmittedBy may have, this one included: the principal's
	// limits.unfinishedJobs in the auth file. A submit beyond it is refused
	// with a ClientException that names the limit, and records nothing. 0,
	// or no SubmittedBy: no limit.
	MaxUnfinished int
	// RequestHash identifies the request for clientToken replay: the same
	// token with another hash is refused. The API sets it from the body.
	RequestHash string
}

// tokenEntry tracks a clientToken: pending until done is closed; then job
// is set, or err when the submit failed (and the token is free again).
type tokenEntry struct {
	done chan struct{}
	hash string
	job  string
	err  error
	at   time.Time // when the submit was made
}

// tokenLifetime is how long a clientToken identifies its submit, as in AWS.
const tokenLifetime = 24 * time.Hour

func validateRetryStrategy(rs *qshare.RetryStrategy) error {
	if rs == nil {
		return nil
	}
	if rs.Attempts < 1 || rs.Attempts > qshare.MaxRetryAttempts {
		return qshare.Errorf(qshare.EINVALID, "retryStrategy.attempts %d is out of range: use 1 to %d (the first attempt included)", rs.Attempts, qshare.MaxRetryAttempts)
	}
	if len(rs.EvaluateOnExit) > qshare.MaxEvaluateOnExitRules {
		return qshare.Errorf(qshare.EINVALID, "retryStrategy.evaluateOnExit has %d rules: at most %d are allowed", len(rs.EvaluateOnExit), qshare.MaxEvaluateOnExitRules)
	}
	for i, r := range rs.EvaluateOnExit {
		if !strings.EqualFold(r.Action, "RETRY") && !strings.EqualFold(r.Action, "EXIT") {
			return qshare.Errorf(qshare.EINVALID, "retryStrategy.evaluateOnExit[%d].action %q is not valid: use RETRY or EXIT", i, r.Action)
		}
		if len(r.OnStatusReason) > 512 {
			return qshare.Errorf(qshare.EINVALID, "retryStrategy.evaluateOnExit[%d].onStatusReason is %d characters long: at most 512 are allowed", i, len(r.OnStatusReason))
		}
	}
	return nil
}

// Submit validates and durably records a new service job, hands it to the
// scheduler, and returns it (RUNNABLE). A submit with a clientToken that was
// used before returns the job of that submit when the request is the same,
// and fails when it is not.
func (d *Daemon) Submit(ctx context.Context, in SubmitInput) (*qshare.Job, error) {
	if err := qshare.ValidateName("jobName", in.Name); err != nil {
		return nil, err
	}
	if in.ServiceJobType != serviceTypeSageMaker {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceJobType %q is not supported: use SAGEMAKER_TRAINING", in.ServiceJobType)
	}
	var prio int64
	if in.Priority != nil {
		prio = *in.Priority
		if err := qshare.ValidatePriority("schedulingPriority", prio); err != nil {
			return nil, err
		}
	}
	if err := validateRetryStrategy(in.RetryStrategy); err != nil {
		return nil, err
	}
	var preemptRetries *int
	if in.PreemptionRetries != nil {
		if *in.PreemptionRetries < 0 || *in.PreemptionRetries > 1<<20 {
			return nil, qshare.Errorf(qshare.EINVALID, "preemptionConfiguration.preemptionRetriesBeforeTermination %d is not valid: use 0 or more (0 fails the job at its first preemption; leave it out for no limit)", *in.PreemptionRetries)
		}
		n := int(*in.PreemptionRetries)
		preemptRetries = &n
	}
	var timeout int64
	if in.AttemptDurationSeconds != nil {
		timeout = *in.AttemptDurationSeconds
		if timeout < 1 {
			return nil, qshare.Errorf(qshare.EINVALID, "timeoutConfig.attemptDurationSeconds %d is not valid: use 1 or more seconds, or leave timeoutConfig out", timeout)
		}
	}
	if err := checkTagsOf(kindJob, in.Tags); err != nil {
		return nil, err
	}
	if d.cfg.RequireRunAs && in.RunAs == "" {
		who := "the submitter"
		if in.SubmittedBy != "" {
			who = in.SubmittedBy
		}
		return nil, qshare.Errorf(qshare.EINVALID, "%s has no Unix user to run jobs as: this server runs every job as its submitter's unixUser, so give the principal a unixUser in the server's auth file", who)
	}
	if n := len(in.ClientToken); n > 64 {
		return nil, qshare.Errorf(qshare.EINVALID, "clientToken is %d characters long: use 1 to 64", n)
	}
	if len(in.Payload) > qshare.MaxPayloadBytes {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload is %d bytes: at most %d bytes (10 KiB) are allowed", len(in.Payload), qshare.MaxPayloadBytes)
	}
	queue, err := d.refName("jobQueue", kindQueue, in.Queue)
	if err != nil {
		return nil, err
	}
	req, err := trainingjob.Parse(in.Payload)
	if err != nil {
		return nil, err
	}
	demand, err := req.Demand()
	if err != nil {
		return nil, err
	}
	// The payload is parsed once: ValidateRequest spares every submit a
	// second parse (about a tenth of the server's CPU per submit).
	if err := d.execs.Get(d.queueExecutor(queue)).ValidateRequest(req, demand); err != nil {
		return nil, err
	}

	// The queue and share must stay as validated until the job is installed.
	d.resMu.RLock()
	defer d.resMu.RUnlock()
	share, err := d.checkSubmitTarget(queue, in.QuotaShare, in.ShareIdentifier)
	if err != nil {
		return nil, err
	}
	planARN := req.ResourceConfig.TrainingPlanArn
	if planARN != "" {
		d.mu.RLock()
		err := d.checkPlan(planARN, queue, share, demand)
		d.mu.RUnlock()
		if err != nil {
			return nil, err
		}
	}

	var tok *tokenEntry
	if in.ClientToken != "" {
		var j *qshare.Job
		tok, j, err = d.claimToken(ctx, in.ClientToken, in.RequestHash)
		if err != nil || j != nil {
			return j, err
		}
	}
	admitted := in.MaxUnfinished > 0 && in.SubmittedBy != ""
	release := func(err error) {
		d.mu.Lock()
		if admitted {
			d.unadmit(in.SubmittedBy)
		}
		if tok != nil {
			delete(d.tokens, in.ClientToken)
			tok.err = err
			close(tok.done)
		}
		d.mu.Unlock()
	}
	if admitted {
		if err := d.admit(in.SubmittedBy, in.MaxUnfinished); err != nil {
			admitted = false
			release(err)
			return nil, err
		}
	}

	now := d.now()
	id := newJobID()
	j := &qshare.Job{
		ID: id, ARN: d.JobARN(id), Name: in.Name, JobQueue: queue, QuotaShare: share,
		ShareIdentifier: in.ShareIdentifier, CapacityPlan: planARN, ServiceJobType: in.ServiceJobType, Priority: int(prio),
		Status: qshare.JobRunnable, StatusReason: submitReason(queue, share), Payload: in.Payload, Demand: demand, RetryStrategy: in.RetryStrategy,
		PreemptionRetries: preemptRetries, AttemptDurationSeconds: timeout, Tags: withSubmitter(in.Tags, in.SubmittedBy, in.RunAs),
		ClientToken: in.ClientToken, RequestHash: in.RequestHash,
		CreatedAt: now, RunnableSince: now, Version: 1,
	}
	if err := d.commit(ctx, &store.Change{PutJobs: []qshare.Job{*j}}); err != nil {
		release(err)
		return nil, err
	}
	if d.evlog != nil { // build the lines only when there is an event log
		d.emitEvents(submitEvents(j)) // before the loop can see the job, so its submit line comes first
	}
	d.setMeta(id, metaOf(req))
	d.mu.Lock()
	d.installJob(j)
	if admitted {
		d.unadmit(in.SubmittedBy) // counted in d.unfinished now
	}
	d.inbox = append(d.inbox, op{kind: opSubmit, id: id})
	if tok != nil {
		tok.job = id
		close(tok.done)
	}
	d.mu.Unlock()
	d.kickLoop()
	if d.infoLog() { // spare the arguments' cost at --log-level warn
		d.log.Info("job submitted", "job", id, "name", j.Name, "queue", queue, "share", share, "priority", j.Priority, "demand", demand.String(), "status", "SUBMITTED→RUNNABLE")
	}
	return j, nil
}

// admit counts one more submit of the principal by, unless its unfinished
// jobs and the submits already admitted reach max; then it returns the
// ClientException that names the limit.
func (d *Daemon) admit(by string, max int) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n := d.unfinished[by] + d.admitting[by]; n >= max {
		return qshare.Errorf(qshare.EINVALID, "%s has %d unfinished jobs (SUBMITTED to RUNNING), and its limit is %d (limits.unfinishedJobs in the server's auth file): wait for some to finish, or terminate some, then submit again", by, n, max)
	}
	d.admitting[by]++
	return nil
}

// unadmit takes back one submit that admit counted. Callers hold d.mu.
func (d *Daemon) unadmit(by string) {
	if d.admitting[by] <= 1 {
		delete(d.admitting, by)
	} else {
		d.admitting[by]--
	}
}

// newJobID returns a new job ID: a UUID of version 7, whose first 48 bits
// are the time in milliseconds and whose other 74 are random (or a sequence
// within one millisecond). IDs that grow with time keep the store's index of
// job IDs append-only: with random (version 4) IDs every insert landed on a
// random page of that index, which cost about one more 4 KB WAL frame per
// job in every transaction, and in a large database a page read as well.
func newJobID() string {
	u, err := uuid.NewV7()
	if err != nil {
		return uuid.NewString() // panics, as before, if there is no randomness at all
	}
	return u.String()
}

func submitReason(queue, share string) string {
	if share == "" {
		return "Submitted to job queue " + queue + "; waiting for capacity"
	}
	return "Submitted to quota share " + share + " of job queue " + queue + "; waiting for capacity"
}

// checkSubmitTarget checks that a job may be submitted to the queue and
// share, and returns the share's name ("" for a queue without a quota-share
// policy).
func (d *Daemon) checkSubmitTarget(queue, share, shareID string) (string, error) {
	d.mu.RLock()
	defer d.mu.RUnlock()
	q := d.queues[queue]
	if q == nil {
		return "", errNoQueue(queue)
	}
	if q.State != qshare.Enabled {
		return "", qshare.Errorf(qshare.ECONFLICT, "Job queue %s is DISABLED and accepts no new jobs: enable it with UpdateJobQueue, or submit to another queue", queue)
	}
	if e := d.envs[d.envName(q)]; e == nil || e.State != qshare.Enabled {
		return "", qshare.Errorf(qshare.ECONFLICT, "The service environment of job queue %s is DISABLED: new jobs are not placed into it; enable it with UpdateServiceEnvironment", queue)
	}
	var policy *qshare.SchedulingPolicy
	if q.SchedulingPolicyARN != "" {
		n, _ := d.refName("", kindPolicy, q.SchedulingPolicyARN)
		policy = d.policies[n]
	}
	switch {
	case policy != nil && policy.QuotaSharePolicy == nil:
		if share != "" {
			return "", qshare.Errorf(qshare.EINVALID, "quotaShareName is for quota-share queues: job queue %s has a fair-share scheduling policy, so give shareIdentifier instead", queue)
		}
		if shareID == "" {
			return "", qshare.Errorf(qshare.EINVALID, "shareIdentifier must be specified.")
		}
		if err := validateShareIdentifier(shareID); err != nil {
			return "", err
		}
		return "", nil
	case policy != nil:
		if shareID != "" {
			return "", qshare.Errorf(qshare.EINVALID, "shareIdentifier is for fair-share queues: job queue %s uses quota shares, so give quotaShareName instead", queue)
		}
		if share == "" {
			return "", qshare.Errorf(qshare.EINVALID, "quotaShareName must be specified. Job queue %s has a quota-share policy: name one of its quota shares", queue)
		}
		s := d.shares[store.ShareKey{Queue: queue, Name: share}]
		if s == nil {
			return "", qshare.Errorf(qshare.ENOTFOUND, "Quota share %s does not exist in job queue %s: check the name, or create it with CreateQuotaShare", share, queue)
		}
		if s.State != qshare.Enabled {
			return "", qshare.Errorf(qshare.ECONFLICT, "Quota share %s is DISABLED and accepts no new jobs: enable it with UpdateQuotaShare, or submit to another share", share)
		}
		return share, nil
	default:
		if share != "" {
			return "", qshare.Errorf(qshare.EINVALID, "quotaShareName is only allowed on job queues with a quota-share policy, and job queue %s has none: leave quotaShareName out", queue)
		}
		if shareID != "" {
			return "", qshare.Errorf(qshare.EINVALID, "shareIdentifier is only allowed on job queues with a fair-share policy, and job queue %s has none: leave it out", queue)
		}
		return "", nil
	}
}

// claimToken reserves a clientToken, or returns the job of an earlier
// submit with the same token and request.
func (d *Daemon) claimToken(ctx context.Context, token, hash string) (*tokenEntry, *qshare.Job, error) {
	for {
		d.mu.Lock()
		e := d.tokens[token]
		if e != nil && e.job != "" && d.now().Sub(e.at) > tokenLifetime {
			e = nil // expired: the token starts a new job
		}
		if e == nil {
			e = &tokenEntry{done: make(chan struct{}), hash: hash, at: d.now()}
			d.tokens[token] = e
			d.mu.Unlock()
			return e, nil, nil
		}
		d.mu.Unlock()
		select {
		case <-e.done:
		case <-ctx.Done():
			return nil, nil, ctx.Err()
		}
		if e.err != nil {
			continue // that submit failed; the token is free again
		}
		if e.hash != hash {
			return nil, nil, qshare.Errorf(qshare.EINVALID, "clientToken %q was already used by a different request (job %s): use a new clientToken for a new job", token, e.job)
		}
		d.mu.RLock()
		j := d.jobs[e.job]
		d.mu.RUnlock()
		if j == nil {
			return nil, nil, qshare.Errorf(qshare.EINTERNAL, "job %s of clientToken %q is missing", e.job, token)
		}
		return nil, j, nil
	}
}

func errNoJob(ref string) error {
	return qshare.Errorf(qshare.ENOTFOUND, "Service job %s does not exist: check the job ID or ARN", ref)
}

// Job returns the job with the given ID or ARN.
func (d *Daemon) Job(ref string) (*qshare.Job, error) {
	id, err := d.jobRef("jobId", ref)
	if err != nil {
		return nil, err
	}
	d.mu.RLock()
	j := d.jobs[id]
	d.mu.RUnlock()
	if j == nil {
		return nil, errNoJob(ref)
	}
	return j, nil
}

// UpdatePriority changes a job's schedulingPriority. It may lead the
// scheduler to start or preempt jobs.
func (d *Daemon) UpdatePriority(ctx context.Context, ref string, priority int64) (*qshare.Job, error) {
	id, err := d.jobRef("jobId", ref)
	if err != nil {
		return nil, err
	}
	if err := qshare.ValidatePriority("schedulingPriority", priority); err != nil {
		return nil, err
	}
	var out *qshare.Job
	err = d.command(ctx, func(c *cycle) error {
		j := c.job(id)
		if j == nil {
			return errNoJob(ref)
		}
		if j.Status.Terminal() {
			return qshare.Errorf(qshare.ECONFLICT, "Service job %s is %s: the priority of a finished job cannot change", id, j.Status)
		}
		// The engine first: if it refused, the job must not be edited, or
		// the edit would be committed with the cycle while the client got
		// the error.
		if _, ok := c.d.eng.Job(id); ok {
			if err := c.d.eng.SetPriority(id, int(priority)); err != nil {
				return err
			}
		}
		j = c.edit(id)
		old := j.Priority
		j.Priority = int(priority)
		c.d.log.Info("job priority changed", "job", id, "from", old, "to", priority)
		out = j
		return nil
	})
	return out, err
}

// Terminate ends a job: a RUNNABLE job fails at once, a running attempt is
// stopped and the job fails when it has stopped. The reason becomes the
// job's statusReason. Terminating a finished job does nothing.
func (d *Daemon) Terminate(ctx context.Context, ref, reason string) error {
	id, err := d.jobRef("jobId", ref)
	if err != nil {
		return err
	}
	if reason == "" {
		return qshare.Errorf(qshare.EINVALID, "reason is required: say why the job is terminated; it becomes the job's statusReason")
	}
	return d.command(ctx, func(c *cycle) error {
		if c.job(id) == nil {
			return errNoJob(ref)
		}
		c.terminate(id, reason)
		return nil
	})
}

// TerminateResult is the outcome of one job of TerminateMany.
type TerminateResult struct {
	Ref string
	Err error
}

// TerminateMany terminates up to 50 jobs in one cycle. Unknown jobs count as
// terminated. It returns the IDs terminated and the per-job failures.
func (d *Daemon) TerminateMany(ctx context.Context, refs []string, reason string) ([]string, []TerminateResult, error) {
	if len(refs) == 0 || len(refs) > 50 {
		return nil, nil, qshare.Errorf(qshare.EINVALID, "jobs has %d entries: give 1 to 50 job IDs or ARNs", len(refs))
	}
	if reason == "" {
		return nil, nil, qshare.Errorf(qshare.EINVALID, "reason is required: say why the jobs are terminated; it becomes their statusReason")
	}
	var ok []string
	var failed []TerminateResult
	err := d.command(ctx, func(c *cycle) error {
		for _, r := range refs {
			id, err := d.jobRef("jobs", r)
			if err != nil {
				failed = append(failed, TerminateResult{Ref: r, Err: err})
				continue
			}
			if c.job(id) != nil {
				c.terminate(id, reason)
			}
			ok = append(ok, r)
		}
		return nil
	})
	return ok, failed, err
}

// ListJobsInput is a ListServiceJobs request.
type ListJobsInput struct {
	Queue        string
	Status       qshare.JobStatus
	FilterName   string
	FilterValues []string
	HasFilter    bool
	MaxResults   int
	NextToken    string
}

// ListJobs returns a page of the queue's jobs, newest first, with the token
// of the next page ("" on the last). Filters follow ListServiceJobs: at most
// one; JOB_NAME, BEFORE_CREATED_AT and AFTER_CREATED_AT ignore the status;
// SHARE_IDENTIFIER and QUOTA_SHARE_NAME combine with it; with neither a
// filter nor a status, only RUNNING jobs are listed.
func (d *Daemon) ListJobs(in ListJobsInput) ([]*qshare.Job, string, error) {
	if in.Queue == "" {
		return nil, "", qshare.Errorf(qshare.EINVALID, "jobQueue must be specified: give the job queue's name or ARN")
	}
	queue, err := d.refName("jobQueue", kindQueue, in.Queue)
	if err != nil {
		return nil, "", err
	}
	if in.Status != "" && !in.Status.Valid() {
		return nil, "", qshare.Errorf(qshare.EINVALID, "jobStatus %q is not valid: use one of SUBMITTED, PENDING, RUNNABLE, SCHEDULED, STARTING, RUNNING, SUCCEEDED, FAILED", in.Status)
	}
	max := in.MaxResults
	if max == 0 {
		max = 100
	}
	if max < 1 || max > 100 {
		return nil, "", qshare.Errorf(qshare.EINVALID, "maxResults %d is out of range: use 1 to 100", in.MaxResults)
	}
	match, status, err := listFilter(in)
	if err != nil {
		return nil, "", err
	}
	var after *jobKey
	if in.NextToken != "" {
		k, err := decodeJobToken(in.NextToken)
		if err != nil {
			return nil, "", err
		}
		after = &k
	}

	d.mu.RLock()
	defer d.mu.RUnlock()
	x := d.byQueue[queue]
	if x == nil {
		if d.queues[queue] == nil {
			return nil, "", errNoQueue(queue)
		}
		return nil, "", nil
	}
	i := len(x.ids) - 1
	if after != nil {
		// Continue strictly below the last key of the previous page.
		lo, hi := 0, len(x.ids)
		for lo < hi {
			m := (lo + hi) / 2
			if x.ids[m].less(*after) {
				lo = m + 1
			} else {
				hi = m
			}
		}
		i = lo - 1
	}
	var out []*qshare.Job
	for ; i >= 0; i-- {
		j := d.jobs[x.ids[i].id]
		if j == nil || (status != "" && j.Status != status) || (match != nil && !match(j)) {
			continue
		}
		if len(out) == max {
			last := out[len(out)-1]
			return out, encodeJobToken(jobKey{last.CreatedAt.UnixNano(), last.ID}), nil
		}
		out = append(out, j)
	}
	return out, "", nil
}

func listFilter(in ListJobsInput) (func(*qshare.Job) bool, qshare.JobStatus, error) {
	if !in.HasFilter {
		if in.Status == "" {
			return nil, qshare.JobRunning, nil
		}
		return nil, in.Status, nil
	}
	if len(in.FilterValues) != 1 {
		return nil, "", qshare.Errorf(qshare.EINVALID, "filter %s needs exactly one value, not %d", in.FilterName, len(in.FilterValues))
	}
	v := in.FilterValues[0]
	epoch := func() (time.Time, error) {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return time.Time{}, qshare.Errorf(qshare.EINVALID, "filter %s value %q is not valid: give a time in milliseconds since the Unix epoch", in.FilterName, v)
		}
		return time.UnixMilli(ms), nil
	}
	switch in.FilterName {
	case "JOB_NAME":
		prefix, isPrefix := strings.CutSuffix(v, "*")
		return func(j *qshare.Job) bool {
			if isPrefix {
				return len(j.Name) >= len(prefix) && strings.EqualFold(j.Name[:len(prefix)], prefix)
			}
			return strings.EqualFold(j.Name, v)
		}, "", nil
	case "BEFORE_CREATED_AT":
		t, err := epoch()
		if err != nil {
			return nil, "", err
		}
		return func(j *qshare.Job) bool { return j.CreatedAt.Before(t) }, "", nil
	case "AFTER_CREATED_AT":
		t, err := epoch()
		if err != nil {
			return nil, "", err
		}
		return func(j *qshare.Job) bool { return j.CreatedAt.After(t) }, "", nil
	case "SHARE_IDENTIFIER":
		return func(j *qshare.Job) bool { return j.ShareIdentifier == v }, in.Status, nil
	case "QUOTA_SHARE_NAME":
		return func(j *qshare.Job) bool { return j.QuotaShare == v }, in.Status, nil
	}
	return nil, "", qshare.Errorf(qshare.EINVALID, "filter name %q is not valid: use JOB_NAME, BEFORE_CREATED_AT, AFTER_CREATED_AT, SHARE_IDENTIFIER or QUOTA_SHARE_NAME", in.FilterName)
}

func encodeJobToken(k jobKey) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(k.created, 10) + ":" + k.id))
}

func decodeJobToken(s string) (jobKey, error) {
	bad := qshare.Errorf(qshare.EINVALID, "nextToken is not valid: pass the nextToken of the previous ListServiceJobs response unchanged")
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return jobKey{}, bad
	}
	ts, id, ok := strings.Cut(string(b), ":")
	n, err := strconv.ParseInt(ts, 10, 64)
	if !ok || err != nil {
		return jobKey{}, bad
	}
	return jobKey{n, id}, nil
}

// PreemptedAttempts returns the job's preempted attempts, newest first, at
// most n.
func PreemptedAttempts(j *qshare.Job, n int) []qshare.Attempt {
	var out []qshare.Attempt
	for i := len(j.Attempts) - 1; i >= 0 && len(out) < n; i-- {
		if j.Attempts[i].Preempted {
			out = append(out, j.Attempts[i])
		}
	}
	return out
}

// withSubmitter returns tags with the system tags qshare.TagSubmittedBy
// and qshare.TagRunAs set to by and runAs, in a copy; tags unchanged when
// both are empty.
func withSubmitter(tags map[string]string, by, runAs string) map[string]string {
	if by == "" && runAs == "" {
		return tags
	}
	n := cloneTags(tags)
	if n == nil {
		n = map[string]string{}
	}
	if by != "" {
		n[qshare.TagSubmittedBy] = by
	}
	if runAs != "" {
		n[qshare.TagRunAs] = runAs
	}
	return n
}

// validateShareIdentifier checks a job's shareIdentifier as AWS does: 1 to
// 255 letters, digits and underscores.
func validateShareIdentifier(id string) error {
	ok := len(id) > 0 && len(id) <= 255
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c == '_' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
	}
	if !ok {
		return qshare.Errorf(qshare.EINVALID, "shareIdentifier %q is not valid: use 1 to 255 letters, digits and underscores", truncateID(id))
	}
	return nil
}

func truncateID(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}
