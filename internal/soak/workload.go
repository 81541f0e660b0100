package soak

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// Workload is the mixed workload of the soak and of faulttest's kill -9
// tests, against queue q of FleetConfig: concurrent submits of
// checkpointing shell jobs (JobScript), priority updates, terminations and
// changes of share A's limit. It records what the server acknowledged, and
// checks that record against what the server and the jobs' traces say in
// the end. Its methods are safe for concurrent use.
type Workload struct {
	traceDir string
	mu       sync.Mutex
	jobs     map[string]*jobRec
	order    []string
	seq      int
	stats    Stats

	// Share A's limit: known since knownFrom (when known), with the closed
	// windows.
	knownLimit int
	knownFrom  time.Time
	known      bool
	windows    []LimitWindow
}

// Stats count what a Workload sent and what was acknowledged.
type Stats struct {
	Submits      int // submits sent
	Rejected     int // submits that failed (the server was killed, or refused)
	Acknowledged int // jobs whose submit was acknowledged
	PriorityOps  int // priority updates sent
	TermOps      int // terminations sent
	LimitOps     int // changes of share A's limit sent
}

// jobRec is what the workload knows of one acknowledged job.
type jobRec struct {
	id, name, share string
	steps           int
	trace           string
	// prio is the last acknowledged priority; prioUnsure is set when a
	// later update was sent but not acknowledged.
	prio       int
	prioUnsure bool
	// terminated: a termination was acknowledged (at termAt); termTried: one was sent.
	terminated, termTried bool
	termAt                time.Time
}

// LimitWindow is a span of time during which share A's limit was known.
type LimitWindow struct {
	From, To time.Time
	Limit    int
}

// limitMargin is how long after a change of limit the log is not checked
// against the new limit: preemptions it causes take the stop grace.
const limitMargin = 3 * time.Second

// terminateReason is the reason the workload gives its terminations.
const terminateReason = "the workload terminates it"

// NewWorkload returns a workload whose jobs write their traces in
// traceDir, for a fleet whose share A has limitA instances now.
func NewWorkload(traceDir string, limitA int) *Workload {
	return &Workload{traceDir: traceDir, jobs: map[string]*jobRec{}, knownLimit: limitA, known: true, knownFrom: time.Now()}
}

// Stats returns the counts so far.
func (w *Workload) Stats() Stats {
	w.mu.Lock()
	defer w.mu.Unlock()
	st := w.stats
	st.Acknowledged = len(w.jobs)
	return st
}

// ShellJob is the payload of a job that runs sh -c script with env.
func ShellJob(script string, instances int, env map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"AlgorithmSpecification":{"TrainingImage":"local","ContainerEntrypoint":["sh","-c",%q]},"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":%d,"VolumeSizeInGB":1}`, script, instances)
	if len(env) > 0 {
		b.WriteString(`,"Environment":{`)
		first := true
		for k, v := range env {
			if !first {
				b.WriteString(",")
			}
			first = false
			fmt.Fprintf(&b, "%q:%q", k, v)
		}
		b.WriteString("}")
	}
	b.WriteString("}")
	return b.String()
}

// Submit submits one random job.
func (w *Workload) Submit(ctx context.Context, c *batch.Client, r *rand.Rand) {
	w.mu.Lock()
	w.seq++
	name := fmt.Sprintf("j%04d", w.seq)
	w.stats.Submits++
	w.mu.Unlock()
	share := []string{"A", "B", "C"}[r.IntN(3)]
	steps := 4 + r.IntN(14)
	trace := filepath.Join(w.traceDir, name)
	prio := r.IntN(4)
	out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String(name), JobQueue: aws.String("q"), QuotaShareName: aws.String(share),
		SchedulingPriority: aws.Int32(int32(prio)), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(ShellJob(JobScript, 1+r.IntN(2), map[string]string{"STEPS": strconv.Itoa(steps), "TRACE": trace})),
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.stats.Rejected++
		return
	}
	w.jobs[*out.JobId] = &jobRec{id: *out.JobId, name: name, share: share, steps: steps, trace: trace, prio: prio}
	w.order = append(w.order, *out.JobId)
}

func (w *Workload) pick(r *rand.Rand) *jobRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.order) == 0 {
		return nil
	}
	// Favour recent jobs: they are the ones still waiting or running.
	n := min(len(w.order), 30)
	return w.jobs[w.order[len(w.order)-1-r.IntN(n)]]
}

// Mutate does one random change: mostly priority updates, some
// terminations, and, with changeLimits, now and then a change of share A's
// limit between 1 and 2. Only one goroutine may change limits.
func (w *Workload) Mutate(ctx context.Context, c *batch.Client, r *rand.Rand, changeLimits bool) {
	x := r.IntN(100)
	switch {
	case x < 8 && changeLimits:
		w.changeLimit(ctx, c)
	case x >= 8 && x < 25:
		j := w.pick(r)
		if j == nil {
			return
		}
		w.mu.Lock()
		j.termTried = true
		w.stats.TermOps++
		w.mu.Unlock()
		_, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(j.id), Reason: aws.String(terminateReason)})
		if err == nil {
			w.mu.Lock()
			if !j.terminated {
				j.terminated, j.termAt = true, time.Now()
			}
			w.mu.Unlock()
		}
	default:
		j := w.pick(r)
		if j == nil {
			return
		}
		p := r.IntN(10)
		w.mu.Lock()
		j.prioUnsure = true
		w.stats.PriorityOps++
		w.mu.Unlock()
		_, err := c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(j.id), SchedulingPriority: aws.Int32(int32(p))})
		if err == nil {
			w.mu.Lock()
			j.prio, j.prioUnsure = p, false
			w.mu.Unlock()
		}
	}
}

// changeLimit flips share A's limit between 1 and 2.
func (w *Workload) changeLimit(ctx context.Context, c *batch.Client) {
	w.mu.Lock()
	if !w.known {
		w.mu.Unlock()
		return
	}
	to := 3 - w.knownLimit
	sent := time.Now()
	if sent.After(w.knownFrom) {
		w.windows = append(w.windows, LimitWindow{From: w.knownFrom, To: sent, Limit: w.knownLimit})
	}
	w.known = false
	w.stats.LimitOps++
	w.mu.Unlock()
	_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(quotaShareARN("A")),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(int32(to))}}})
	if err == nil {
		w.mu.Lock()
		w.known, w.knownLimit, w.knownFrom = true, to, time.Now().Add(limitMargin)
		w.mu.Unlock()
	}
}

func quotaShareARN(name string) string {
	return "arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/" + name
}

// LearnLimit reads share A's limit after a restart, when a change was cut
// short.
func (w *Workload) LearnLimit(ctx context.Context, c *batch.Client) error {
	w.mu.Lock()
	known := w.known
	w.mu.Unlock()
	if known {
		return nil
	}
	out, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(quotaShareARN("A"))})
	if err != nil {
		return fmt.Errorf("describe share A after a restart: %w", err)
	}
	n := int(aws.ToInt32(out.CapacityLimits[0].MaxCapacity))
	w.mu.Lock()
	w.known, w.knownLimit, w.knownFrom = true, n, time.Now().Add(limitMargin)
	w.mu.Unlock()
	return nil
}

// CloseWindows ends the last known window of share A's limit now.
func (w *Workload) CloseWindows() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known && time.Now().After(w.knownFrom) {
		w.windows = append(w.windows, LimitWindow{From: w.knownFrom, To: time.Now(), Limit: w.knownLimit})
		w.knownFrom = time.Now()
	}
}

// Windows returns the closed windows of share A's limit, away from the
// moments it changed: an event log is to be checked against a limit only
// inside that limit's windows.
func (w *Workload) Windows() []LimitWindow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]LimitWindow(nil), w.windows...)
}

// ListAll lists every job of queue q, trying again after a transport error.
func ListAll(ctx context.Context, c *batch.Client) (map[string]types.ServiceJobSummary, error) {
	var err error
	for try := 0; try < 3; try++ {
		var out map[string]types.ServiceJobSummary
		if out, err = listOnce(ctx, c); err == nil {
			return out, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return nil, fmt.Errorf("%w (the same request over plain HTTP: %s)", err, rawList(c))
}

// rawList posts a ListServiceJobs request without the SDK, to show what
// the server answered when the SDK could not read it.
func rawList(c *batch.Client) string {
	url := aws.ToString(c.Options().BaseEndpoint) + "/v1/listservicejobs"
	resp, err := http.Post(url, "application/json", strings.NewReader(`{"jobQueue":"q","maxResults":100,"filters":[{"name":"JOB_NAME","values":["*"]}]}`))
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if len(b) > 600 {
		b = append(b[:300:300], append([]byte(" … "), b[len(b)-300:]...)...)
	}
	return fmt.Sprintf("status %d, %d bytes, read error %v: %s", resp.StatusCode, len(b), err, b)
}

func listOnce(ctx context.Context, c *batch.Client) (map[string]types.ServiceJobSummary, error) {
	out := map[string]types.ServiceJobSummary{}
	pg := batch.NewListServiceJobsPaginator(c, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), MaxResults: aws.Int32(100),
		Filters: []types.KeyValuesPair{{Name: aws.String("JOB_NAME"), Values: []string{"*"}}}})
	for pg.HasMorePages() {
		p, err := pg.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, j := range p.JobSummaryList {
			if _, dup := out[*j.JobId]; dup {
				return nil, fmt.Errorf("job %s listed twice", *j.JobId)
			}
			out[*j.JobId] = j
		}
	}
	return out, nil
}

// CheckAcked checks that every acknowledged submit and termination is in
// the server's state.
func (w *Workload) CheckAcked(ctx context.Context, c *batch.Client) error {
	all, err := ListAll(ctx, c)
	if err != nil {
		return err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for id, j := range w.jobs {
		s, ok := all[id]
		if !ok {
			return fmt.Errorf("acknowledged job %s (%s) is missing", id, j.name)
		}
		if j.terminated && s.Status != types.ServiceJobStatusFailed && s.Status != types.ServiceJobStatusSucceeded {
			// Terminated but still stopping: it must say so.
			if !strings.Contains(aws.ToString(s.StatusReason), terminateReason) && s.Status != types.ServiceJobStatusRunning &&
				s.Status != types.ServiceJobStatusStarting && s.Status != types.ServiceJobStatusScheduled {
				return fmt.Errorf("acknowledged termination of job %s is lost: it is %s (%s)", j.name, s.Status, aws.ToString(s.StatusReason))
			}
		}
	}
	return nil
}

// WaitAllDone waits until every job of queue q is SUCCEEDED or FAILED, and
// returns them. After limit it returns the jobs as they are and an error
// that names some of the unfinished ones.
func WaitAllDone(ctx context.Context, c *batch.Client, limit time.Duration) (map[string]types.ServiceJobSummary, error) {
	deadline := time.Now().Add(limit)
	for {
		all, err := ListAll(ctx, c)
		if err != nil {
			return nil, err
		}
		left := 0
		var some []string
		for _, j := range all {
			if j.Status != types.ServiceJobStatusSucceeded && j.Status != types.ServiceJobStatusFailed {
				left++
				if len(some) < 5 {
					some = append(some, fmt.Sprintf("%s %s (%s)", *j.JobName, j.Status, aws.ToString(j.StatusReason)))
				}
			}
		}
		if left == 0 {
			return all, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return all, fmt.Errorf("%d of %d jobs unfinished after %s, e.g. %s", left, len(all), limit, strings.Join(some, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Outcome sums up the final check.
type Outcome struct {
	Jobs       int // jobs the server listed
	Succeeded  int
	Failed     int
	Terminated int // failed jobs that were terminated
	// Resumes counts attempts that began from a checkpoint; Reruns, jobs
	// that ran their last step twice (the server was killed before it saw
	// the end of an attempt).
	Resumes, Reruns int
}

// CheckFinal checks the final state of every job (all, from WaitAllDone)
// against what was acknowledged, and each job's trace, and returns the
// problems it found.
func (w *Workload) CheckFinal(ctx context.Context, c *batch.Client, all map[string]types.ServiceJobSummary) (Outcome, []string) {
	var o Outcome
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	w.mu.Lock()
	defer w.mu.Unlock()
	o.Jobs = len(all)
	for id, j := range w.jobs {
		if _, ok := all[id]; !ok {
			bad("acknowledged job %s (%s) is missing at the end", id, j.name)
		}
	}
	for id, s := range all {
		j := w.jobs[id]
		if j == nil {
			// Submitted while the server was killed: stored but never acknowledged. Fine.
			continue
		}
		switch s.Status {
		case types.ServiceJobStatusSucceeded:
			o.Succeeded++
			if j.terminated && s.StoppedAt != nil && time.UnixMilli(*s.StoppedAt).After(j.termAt.Add(time.Second)) {
				bad("job %s succeeded at %s although its termination was acknowledged at %s", j.name, time.UnixMilli(*s.StoppedAt), j.termAt)
			}
		case types.ServiceJobStatusFailed:
			o.Failed++
			if j.terminated || j.termTried {
				o.Terminated++
			} else {
				bad("job %s FAILED but was never terminated: %s", j.name, aws.ToString(s.StatusReason))
			}
		default:
			bad("job %s ended %s", j.name, s.Status)
		}
		if !j.prioUnsure && !j.termTried {
			d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
			if err != nil {
				bad("describe %s: %v", j.name, err)
			} else if int(aws.ToInt32(d.SchedulingPriority)) != j.prio {
				bad("job %s has priority %d, but %d was the last acknowledged", j.name, aws.ToInt32(d.SchedulingPriority), j.prio)
			}
		}
		t, err := readTrace(j.trace)
		if err != nil {
			bad("trace of %s: %v", j.name, err)
			continue
		}
		resumes, rerun, ps := t.check(j.name, j.steps, s.Status == types.ServiceJobStatusSucceeded)
		o.Resumes += resumes
		if rerun {
			o.Reruns++
		}
		problems = append(problems, ps...)
	}
	return o, problems
}

// trace is what a job wrote: JobScript appends "attempt pid step unixnano"
// before each step and "attempt pid done unixnano" at the end.
type trace []traceLine

type traceLine struct {
	attempt int
	pid     int
	step    int // -1 for done
	at      int64
}

// readTrace reads a job's trace; a job that never ran has none.
func readTrace(path string) (trace, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out trace
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 4 {
			continue // a line cut by a kill
		}
		var l traceLine
		l.attempt, _ = strconv.Atoi(fs[0])
		l.pid, _ = strconv.Atoi(fs[1])
		if fs[2] == "done" {
			l.step = -1
		} else {
			l.step, _ = strconv.Atoi(fs[2])
		}
		l.at, _ = strconv.ParseInt(fs[3], 10, 64)
		out = append(out, l)
	}
	return out, sc.Err()
}

// check checks the trace of the job name, of steps steps: no two attempts
// ran at once, a later attempt resumed from the checkpoint, and, when the
// job SUCCEEDED, it ran every step and its end. It returns how many
// attempts resumed from a checkpoint and whether a SUCCEEDED job ran its
// end twice.
func (t trace) check(name string, steps int, succeeded bool) (resumes int, rerun bool, problems []string) {
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	// Attempts, in the order they first wrote.
	type span struct {
		attempt, pid        int
		first, last         int64
		firstStep, lastStep int
	}
	var spans []*span
	byKey := map[[2]int]*span{}
	done := 0
	seen := map[int]bool{}
	for _, l := range t {
		if l.step == -1 {
			done++
		}
		seen[l.step] = true
		k := [2]int{l.attempt, l.pid}
		sp := byKey[k]
		if sp == nil {
			sp = &span{attempt: l.attempt, pid: l.pid, first: l.at, firstStep: l.step, lastStep: l.step}
			byKey[k] = sp
			spans = append(spans, sp)
		}
		sp.last = l.at
		if l.step >= 0 {
			sp.lastStep = l.step
		}
	}
	sort.Slice(spans, func(a, b int) bool { return spans[a].first < spans[b].first })
	for i := 1; i < len(spans); i++ {
		p, q := spans[i-1], spans[i]
		if q.first <= p.last {
			bad("job %s ran two attempts at once: attempt %d (pid %d) wrote until %d, attempt %d (pid %d) from %d", name, p.attempt, p.pid, p.last, q.attempt, q.pid, q.first)
		}
		if q.firstStep >= 0 && q.firstStep < p.lastStep {
			bad("job %s attempt %d started at step %d although attempt %d reached step %d: the checkpoint was lost", name, q.attempt, q.firstStep, p.attempt, p.lastStep)
		}
		if q.firstStep > 0 {
			resumes++
		}
	}
	if succeeded {
		if done == 0 {
			bad("job %s SUCCEEDED but its trace has no done line", name)
		}
		for st := 0; st < steps; st++ {
			if !seen[st] {
				bad("job %s SUCCEEDED without running step %d", name, st)
				break
			}
		}
	}
	return resumes, succeeded && done > 1, problems
}
