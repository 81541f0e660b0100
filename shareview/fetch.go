package shareview

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
)

// API is the part of the AWS SDK's batch client that Fetch calls;
// *batch.Client implements it.
type API interface {
	DescribeJobQueues(context.Context, *batch.DescribeJobQueuesInput, ...func(*batch.Options)) (*batch.DescribeJobQueuesOutput, error)
	DescribeServiceEnvironments(context.Context, *batch.DescribeServiceEnvironmentsInput, ...func(*batch.Options)) (*batch.DescribeServiceEnvironmentsOutput, error)
	ListQuotaShares(context.Context, *batch.ListQuotaSharesInput, ...func(*batch.Options)) (*batch.ListQuotaSharesOutput, error)
	GetJobQueueSnapshot(context.Context, *batch.GetJobQueueSnapshotInput, ...func(*batch.Options)) (*batch.GetJobQueueSnapshotOutput, error)
	ListServiceJobs(context.Context, *batch.ListServiceJobsInput, ...func(*batch.Options)) (*batch.ListServiceJobsOutput, error)
	DescribeServiceJob(context.Context, *batch.DescribeServiceJobInput, ...func(*batch.Options)) (*batch.DescribeServiceJobOutput, error)
}

var _ API = (*batch.Client)(nil)

// Fetch gathers the input of the view of each job queue that has quota
// shares, or of the one named queue (a name or an ARN), in name order: the
// settings and jobs from the AWS API, who lends to whom from lending.
func Fetch(ctx context.Context, api API, lending LendingSource, queue string) ([]Input, error) {
	in := &batch.DescribeJobQueuesInput{}
	if queue != "" {
		in.JobQueues = []string{queue}
	}
	var queues []types.JobQueueDetail
	p := batch.NewDescribeJobQueuesPaginator(api, in)
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		queues = append(queues, out.JobQueues...)
	}
	if queue != "" && len(queues) == 0 {
		return nil, qshare.Errorf(qshare.ENOTFOUND, "job queue %s does not exist: list the queues with `qshare shares`", queue)
	}
	sort.Slice(queues, func(i, j int) bool {
		return aws.ToString(queues[i].JobQueueName) < aws.ToString(queues[j].JobQueueName)
	})

	var envs []types.ServiceEnvironmentDetail
	ep := batch.NewDescribeServiceEnvironmentsPaginator(api, &batch.DescribeServiceEnvironmentsInput{})
	for ep.HasMorePages() {
		out, err := ep.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		envs = append(envs, out.ServiceEnvironments...)
	}

	ls, err := lending.Lending(ctx, queue)
	if err != nil {
		return nil, err
	}
	byQueue := map[string]qshare.Lending{}
	for _, l := range ls {
		byQueue[l.JobQueue] = l
	}

	var inputs []Input
	for _, q := range queues {
		if q.Status == types.JQStatusDeleted || q.Status == types.JQStatusDeleting {
			continue
		}
		input, ok, err := fetchQueue(ctx, api, q, envs, byQueue[aws.ToString(q.JobQueueName)])
		if err != nil {
			return nil, err
		}
		if ok || queue != "" {
			inputs = append(inputs, input)
		}
	}
	return inputs, nil
}

// fetchQueue gathers one queue's input; ok is false when it has no shares.
func fetchQueue(ctx context.Context, api API, q types.JobQueueDetail, envs []types.ServiceEnvironmentDetail, lending qshare.Lending) (Input, bool, error) {
	in := Input{
		Queue:      aws.ToString(q.JobQueueName),
		QueueState: string(q.State),
		Lending:    lending,
		Active:     map[string][]Job{},
		Waiting:    map[string]int{},
		Heads:      map[string]Job{},
	}
	if len(q.ServiceEnvironmentOrder) > 0 {
		ref := aws.ToString(q.ServiceEnvironmentOrder[0].ServiceEnvironment)
		for _, e := range envs {
			if aws.ToString(e.ServiceEnvironmentArn) == ref || aws.ToString(e.ServiceEnvironmentName) == ref {
				in.Environment = aws.ToString(e.ServiceEnvironmentName)
				in.EnvironmentState = string(e.State)
			}
		}
		if in.Environment == "" {
			in.Environment = nameOf(ref)
		}
	}

	sp := batch.NewListQuotaSharesPaginator(api, &batch.ListQuotaSharesInput{JobQueue: q.JobQueueArn})
	for sp.HasMorePages() {
		out, err := sp.NextPage(ctx)
		if err != nil {
			return in, false, err
		}
		for _, s := range out.QuotaShares {
			sh := Share{
				Name:   aws.ToString(s.QuotaShareName),
				State:  string(s.State),
				Status: string(s.Status),
				Limits: qshare.Capacity{},
			}
			if rc := s.ResourceSharingConfiguration; rc != nil {
				sh.Strategy = qshare.Strategy(rc.Strategy)
				sh.BorrowLimit = qshare.BorrowUnlimited
				if rc.BorrowLimit != nil {
					sh.BorrowLimit = int64(*rc.BorrowLimit)
				}
			}
			if pc := s.PreemptionConfiguration; pc != nil {
				sh.InSharePreemption = qshare.State(pc.InSharePreemption)
			}
			for _, l := range s.CapacityLimits {
				sh.Limits[aws.ToString(l.CapacityUnit)] += int64(aws.ToInt32(l.MaxCapacity))
			}
			in.Shares = append(in.Shares, sh)
		}
	}
	snap, err := api.GetJobQueueSnapshot(ctx, &batch.GetJobQueueSnapshotInput{JobQueue: q.JobQueueArn})
	if len(in.Shares) == 0 {
		if err != nil || snap.QueueUtilization == nil || snap.QueueUtilization.FairshareUtilization == nil {
			return in, false, nil // no quota shares, and not a fair-share queue
		}
		return fetchFair(ctx, api, q, envs, snap, in)
	}
	if err != nil {
		return in, false, err
	}
	// The jobs of each share: who runs, how many wait, and the head.
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
	)
	heads := map[string]string{}
	if f := snap.FrontOfQuotaShares; f != nil {
		for name, js := range f.QuotaShares {
			if len(js) > 0 {
				heads[name] = aws.ToString(js[0].JobArn)
			}
		}
	}
	sem := make(chan struct{}, 8)
	for _, s := range in.Shares {
		wg.Add(1)
		go func(share string) {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			active, waiting, err := shareJobs(ctx, api, aws.ToString(q.JobQueueArn), share)
			var head *Job
			if err == nil && heads[share] != "" {
				var j Job
				j, err = describeJob(ctx, api, heads[share])
				head = &j
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			in.Active[share] = active
			in.Waiting[share] = waiting
			if head != nil {
				in.Heads[share] = *head
			}
		}(s.Name)
	}
	wg.Wait()
	if firstErr != nil {
		return in, false, firstErr
	}
	return in, true, nil
}

// fetchFair gathers the input of a fair-share queue: its jobs by share
// identifier (who runs, how many wait, and each identifier's head in the
// order of the snapshot's front of queue), and its environment's capacity.
func fetchFair(ctx context.Context, api API, q types.JobQueueDetail, envs []types.ServiceEnvironmentDetail, snap *batch.GetJobQueueSnapshotOutput, in Input) (Input, bool, error) {
	in.FairShare = true
	identOf := map[string]string{} // RUNNABLE job ARN -> identifier
	seen := map[string]bool{}
	use := qshare.Capacity{}
	for _, st := range []types.ServiceJobStatus{types.ServiceJobStatusScheduled, types.ServiceJobStatusStarting, types.ServiceJobStatusRunning, types.ServiceJobStatusRunnable} {
		p := batch.NewListServiceJobsPaginator(api, &batch.ListServiceJobsInput{JobQueue: q.JobQueueArn, JobStatus: st})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				return in, false, err
			}
			for _, j := range out.JobSummaryList {
				ident := aws.ToString(j.ShareIdentifier)
				if j.Status != st || ident == "" {
					continue
				}
				if !seen[ident] {
					seen[ident] = true
					in.Shares = append(in.Shares, Share{Name: ident, Strategy: FairShareStrategy})
				}
				if st == types.ServiceJobStatusRunnable {
					in.Waiting[ident]++
					identOf[aws.ToString(j.JobArn)] = ident
					continue
				}
				full, err := describeJob(ctx, api, aws.ToString(j.JobId))
				if err != nil {
					return in, false, err
				}
				in.Active[ident] = append(in.Active[ident], full)
				use.Add(full.Demand)
			}
		}
	}
	if f := snap.FrontOfQueue; f != nil {
		for _, fj := range f.Jobs {
			ident, ok := identOf[aws.ToString(fj.JobArn)]
			if !ok {
				continue
			}
			if _, done := in.Heads[ident]; done {
				continue
			}
			h, err := describeJob(ctx, api, aws.ToString(fj.JobArn))
			if err != nil {
				return in, false, err
			}
			in.Heads[ident] = h
		}
	}
	for _, e := range envs {
		if aws.ToString(e.ServiceEnvironmentName) != in.Environment {
			continue
		}
		for _, l := range e.CapacityLimits {
			t := aws.ToString(l.CapacityUnit)
			in.Capacity = append(in.Capacity, qshare.EnvironmentLending{CapacityUnit: t, MaxCapacity: int64(aws.ToInt32(l.MaxCapacity)), InUse: use[t]})
		}
	}
	sort.Slice(in.Capacity, func(i, j int) bool { return in.Capacity[i].CapacityUnit < in.Capacity[j].CapacityUnit })
	return in, true, nil
}

// shareJobs lists a share's active jobs (with their priorities) and counts
// its RUNNABLE ones.
func shareJobs(ctx context.Context, api API, queueARN, share string) ([]Job, int, error) {
	filter := []types.KeyValuesPair{{Name: aws.String("QUOTA_SHARE_NAME"), Values: []string{share}}}
	var active []Job
	waiting := 0
	for _, st := range []types.ServiceJobStatus{types.ServiceJobStatusScheduled, types.ServiceJobStatusStarting, types.ServiceJobStatusRunning, types.ServiceJobStatusRunnable} {
		p := batch.NewListServiceJobsPaginator(api, &batch.ListServiceJobsInput{JobQueue: aws.String(queueARN), JobStatus: st, Filters: filter})
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				return nil, 0, err
			}
			for _, j := range out.JobSummaryList {
				if j.Status != st {
					continue // a server that ignores jobStatus with a filter
				}
				if st == types.ServiceJobStatusRunnable {
					waiting++
					continue
				}
				full, err := describeJob(ctx, api, aws.ToString(j.JobId))
				if err != nil {
					return nil, 0, err
				}
				active = append(active, full)
			}
		}
	}
	return active, waiting, nil
}

// describeJob reads one job's name, priority, status, reason and demand.
func describeJob(ctx context.Context, api API, id string) (Job, error) {
	out, err := api.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
	if err != nil {
		return Job{}, fmt.Errorf("describe job %s: %w", id, err)
	}
	j := Job{
		Name:         aws.ToString(out.JobName),
		ID:           aws.ToString(out.JobId),
		Priority:     int(aws.ToInt32(out.SchedulingPriority)),
		Status:       string(out.Status),
		StatusReason: aws.ToString(out.StatusReason),
		Demand:       qshare.Capacity{},
	}
	for _, c := range out.CapacityUsage {
		j.Demand[aws.ToString(c.CapacityUnit)] += int64(aws.ToFloat64(c.Quantity))
	}
	if ps := out.PreemptionSummary; ps != nil {
		j.Preemptions = int(aws.ToInt32(ps.PreemptedAttemptCount))
	}
	return j, nil
}

// nameOf returns the last path element of an ARN, or the reference itself.
func nameOf(ref string) string {
	if i := strings.LastIndexByte(ref, '/'); i >= 0 && strings.HasPrefix(ref, "arn:") {
		return ref[i+1:]
	}
	return ref
}
