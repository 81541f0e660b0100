package faulttest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/config"
	"qshare/event"
	"qshare/soak"
)

// The mixed workload of the kill -9 test and the soak: concurrent submits of
// checkpointing shell jobs, priority updates, terminations and changes of a
// share's limit, with a record of what the server acknowledged. The fleet
// (soak.FleetConfig) and the job (soak.JobScript) are the soak's.

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

// limitWindow is a span of time during which share A's limit was known.
type limitWindow struct {
	from, to time.Time
	limit    int
}

// workload drives the server and records what it acknowledged. Its methods
// are safe for concurrent use.
type workload struct {
	traceDir string
	mu       sync.Mutex
	jobs     map[string]*jobRec
	order    []string
	seq      int
	submits  int
	rejected int // submits that failed (the server was killed, or refused)

	// share A's limit: known since knownFrom (when known), with the closed windows.
	knownLimit int
	knownFrom  time.Time
	known      bool
	windows    []limitWindow
	limitOps   int
	prioOps    int
	termOps    int
}

// margin is how long after a change of limit the log is not checked
// against the new limit: preemptions it causes take the stop grace.
const margin = 3 * time.Second

func newWorkload(traceDir string, limitA int) *workload {
	return &workload{traceDir: traceDir, jobs: map[string]*jobRec{}, knownLimit: limitA, known: true, knownFrom: time.Now()}
}

// submit submits one random job.
func (w *workload) submit(ctx context.Context, c *batch.Client, r *rand.Rand) {
	w.mu.Lock()
	w.seq++
	name := fmt.Sprintf("j%04d", w.seq)
	w.submits++
	w.mu.Unlock()
	share := []string{"A", "B", "C"}[r.IntN(3)]
	steps := 4 + r.IntN(14)
	trace := filepath.Join(w.traceDir, name)
	prio := r.IntN(4)
	out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
		JobName: aws.String(name), JobQueue: aws.String("q"), QuotaShareName: aws.String(share),
		SchedulingPriority: aws.Int32(int32(prio)), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(shellJob(soak.JobScript, 1+r.IntN(2), map[string]string{"STEPS": strconv.Itoa(steps), "TRACE": trace})),
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	if err != nil {
		w.rejected++
		return
	}
	w.jobs[*out.JobId] = &jobRec{id: *out.JobId, name: name, share: share, steps: steps, trace: trace, prio: prio}
	w.order = append(w.order, *out.JobId)
}

func (w *workload) pick(r *rand.Rand) *jobRec {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.order) == 0 {
		return nil
	}
	// Favour recent jobs: they are the ones still waiting or running.
	n := min(len(w.order), 30)
	return w.jobs[w.order[len(w.order)-1-r.IntN(n)]]
}

// mutate does one random change: mostly priority updates, some
// terminations, and now and then a change of share A's limit.
func (w *workload) mutate(ctx context.Context, c *batch.Client, r *rand.Rand, allowLimit bool) {
	x := r.IntN(100)
	switch {
	case x < 8 && allowLimit:
		w.changeLimit(ctx, c, r)
	case x < 25:
		j := w.pick(r)
		if j == nil {
			return
		}
		w.mu.Lock()
		j.termTried = true
		w.termOps++
		w.mu.Unlock()
		_, err := c.TerminateServiceJob(ctx, &batch.TerminateServiceJobInput{JobId: aws.String(j.id), Reason: aws.String("faulttest terminates it")})
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
		w.prioOps++
		w.mu.Unlock()
		_, err := c.UpdateServiceJob(ctx, &batch.UpdateServiceJobInput{JobId: aws.String(j.id), SchedulingPriority: aws.Int32(int32(p))})
		if err == nil {
			w.mu.Lock()
			j.prio, j.prioUnsure = p, false
			w.mu.Unlock()
		}
	}
}

// changeLimit flips share A's limit between 1 and 2. Only the mutator calls it.
func (w *workload) changeLimit(ctx context.Context, c *batch.Client, r *rand.Rand) {
	w.mu.Lock()
	if !w.known {
		w.mu.Unlock()
		return
	}
	to := 3 - w.knownLimit
	sent := time.Now()
	if sent.After(w.knownFrom) {
		w.windows = append(w.windows, limitWindow{from: w.knownFrom, to: sent, limit: w.knownLimit})
	}
	w.known = false
	w.limitOps++
	w.mu.Unlock()
	_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: aws.String(quotaShareARN("A")),
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(int32(to))}}})
	if err == nil {
		w.mu.Lock()
		w.known, w.knownLimit, w.knownFrom = true, to, time.Now().Add(margin)
		w.mu.Unlock()
	}
}

func quotaShareARN(name string) string {
	return "arn:aws:batch:us-east-1:000000000000:job-queue/q/quota-share/" + name
}

// learnLimit reads share A's limit after a restart, when a change was cut short.
func (w *workload) learnLimit(t testing.TB, ctx context.Context, c *batch.Client) {
	w.mu.Lock()
	known := w.known
	w.mu.Unlock()
	if known {
		return
	}
	out, err := c.DescribeQuotaShare(ctx, &batch.DescribeQuotaShareInput{QuotaShareArn: aws.String(quotaShareARN("A"))})
	if err != nil {
		t.Fatalf("describe share A after a restart: %v", err)
	}
	n := int(aws.ToInt32(out.CapacityLimits[0].MaxCapacity))
	w.mu.Lock()
	w.known, w.knownLimit, w.knownFrom = true, n, time.Now().Add(margin)
	w.mu.Unlock()
}

// closeWindows ends the last known window at now.
func (w *workload) closeWindows() {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.known && time.Now().After(w.knownFrom) {
		w.windows = append(w.windows, limitWindow{from: w.knownFrom, to: time.Now(), limit: w.knownLimit})
		w.knownFrom = time.Now()
	}
}

// listAll lists every job of queue q, trying again after a transport error.
func listAll(ctx context.Context, c *batch.Client) (map[string]types.ServiceJobSummary, error) {
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

// checkAcked checks that every acknowledged submit and termination is in
// the server's state.
func (w *workload) checkAcked(ctx context.Context, c *batch.Client) error {
	all, err := listAll(ctx, c)
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
			if !strings.Contains(aws.ToString(s.StatusReason), "faulttest terminates it") && s.Status != types.ServiceJobStatusRunning &&
				s.Status != types.ServiceJobStatusStarting && s.Status != types.ServiceJobStatusScheduled {
				return fmt.Errorf("acknowledged termination of job %s is lost: it is %s (%s)", j.name, s.Status, aws.ToString(s.StatusReason))
			}
		}
	}
	return nil
}

// waitAllDone waits until every job of the queue is SUCCEEDED or FAILED.
func waitAllDone(ctx context.Context, c *batch.Client, limit time.Duration) (map[string]types.ServiceJobSummary, error) {
	deadline := time.Now().Add(limit)
	for {
		all, err := listAll(ctx, c)
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
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%d of %d jobs unfinished after %s, e.g. %s", left, len(all), limit, strings.Join(some, "; "))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// traceLine is one line a job wrote.
type traceLine struct {
	attempt int
	pid     int
	step    int // -1 for done
	at      int64
}

func readTrace(path string) ([]traceLine, error) {
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []traceLine
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

// outcome sums up the final check.
type outcome struct {
	jobs, succeeded, failed, terminated, preemptedResumes, reruns int
}

// checkFinal checks the final state of every job against what was
// acknowledged, and each job's trace: no two attempts at once, resumes from
// the checkpoint, SUCCEEDED jobs ran every step.
func (w *workload) checkFinal(ctx context.Context, c *batch.Client, all map[string]types.ServiceJobSummary) (outcome, []string) {
	var o outcome
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	w.mu.Lock()
	defer w.mu.Unlock()
	o.jobs = len(all)
	for id, s := range all {
		j := w.jobs[id]
		if j == nil {
			// Submitted while the server was killed: stored but never acknowledged. Fine.
			continue
		}
		switch s.Status {
		case types.ServiceJobStatusSucceeded:
			o.succeeded++
			if j.terminated && s.StoppedAt != nil && time.UnixMilli(*s.StoppedAt).After(j.termAt.Add(time.Second)) {
				bad("job %s succeeded at %s although its termination was acknowledged at %s", j.name, time.UnixMilli(*s.StoppedAt), j.termAt)
			}
		case types.ServiceJobStatusFailed:
			o.failed++
			if j.terminated || j.termTried {
				o.terminated++
			} else {
				bad("job %s FAILED but was never terminated: %s", j.name, aws.ToString(s.StatusReason))
			}
		default:
			bad("job %s ended %s", j.name, s.Status)
		}
		if !j.prioUnsure && !(j.termTried) {
			d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
			if err != nil {
				bad("describe %s: %v", j.name, err)
			} else if int(aws.ToInt32(d.SchedulingPriority)) != j.prio {
				bad("job %s has priority %d, but %d was the last acknowledged", j.name, aws.ToInt32(d.SchedulingPriority), j.prio)
			}
		}
		lines, err := readTrace(j.trace)
		if err != nil {
			bad("trace of %s: %v", j.name, err)
			continue
		}
		// Attempts, in the order they first wrote.
		type span struct {
			attempt, pid     int
			first, last      int64
			firstStep, lastS int
		}
		var spans []*span
		byKey := map[[2]int]*span{}
		done := 0
		for _, l := range lines {
			if l.step == -1 {
				done++
			}
			k := [2]int{l.attempt, l.pid}
			sp := byKey[k]
			if sp == nil {
				sp = &span{attempt: l.attempt, pid: l.pid, first: l.at, last: l.at, firstStep: l.step, lastS: l.step}
				byKey[k] = sp
				spans = append(spans, sp)
			}
			sp.last = l.at
			if l.step >= 0 {
				sp.lastS = l.step
			}
		}
		sort.Slice(spans, func(a, b int) bool { return spans[a].first < spans[b].first })
		for i := 1; i < len(spans); i++ {
			p, q := spans[i-1], spans[i]
			if q.first <= p.last {
				bad("job %s ran two attempts at once: attempt %d (pid %d) wrote until %d, attempt %d (pid %d) from %d", j.name, p.attempt, p.pid, p.last, q.attempt, q.pid, q.first)
			}
			if q.firstStep >= 0 && p.lastS > 0 && q.firstStep < p.lastS {
				bad("job %s attempt %d started at step %d although attempt %d reached step %d: the checkpoint was not used", j.name, q.attempt, q.firstStep, p.attempt, p.lastS)
			}
			if q.firstStep > 0 {
				o.preemptedResumes++
			}
		}
		if s.Status == types.ServiceJobStatusSucceeded {
			if done == 0 {
				bad("job %s SUCCEEDED but its trace has no done line", j.name)
			}
			if done > 1 {
				o.reruns++
			}
			seen := map[int]bool{}
			for _, l := range lines {
				seen[l.step] = true
			}
			for st := 0; st < j.steps; st++ {
				if !seen[st] {
					bad("job %s SUCCEEDED without running step %d", j.name, st)
					break
				}
			}
		}
	}
	return o, problems
}

// checkEvents checks the server's event log with qshare check-events,
// against each limit of share A, and keeps the violations found at a time
// when that limit was in force (away from the moments the limit changed).
func (w *workload) checkEvents(t testing.TB, path string) (event.Summary, []string) {
	return w.checkEventsOf(t, path, false)
}

// checkEventsPrefix checks the log as it is after a restart, before the
// jobs have finished: a preemption whose beneficiary starts after the end
// of the log so far is not counted.
func (w *workload) checkEventsPrefix(t testing.TB, path string) (event.Summary, []string) {
	return w.checkEventsOf(t, path, true)
}

func (w *workload) checkEventsOf(t testing.TB, path string, prefix bool) (event.Summary, []string) {
	t.Helper()
	w.mu.Lock()
	windows := append([]limitWindow(nil), w.windows...)
	w.mu.Unlock()
	limits := map[int]bool{}
	for _, win := range windows {
		limits[win.limit] = true
	}
	var sum event.Summary
	var out []string
	for limit := range limits {
		cfgPath := filepath.Join(t.TempDir(), fmt.Sprintf("limit%d.yaml", limit))
		if err := os.WriteFile(cfgPath, []byte(soak.FleetConfig(limit)), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := config.Parse(cfgPath, []byte(soak.FleetConfig(limit)), config.Options{}); err != nil {
			t.Fatal(err)
		}
		res, err := checkEventsCLI(t, path, cfgPath)
		if err != nil {
			t.Fatal(err)
		}
		sum = res.Summary
		for _, v := range res.Violations {
			at := time.Unix(0, int64(v.T*1e9))
			if prefix && v.Rule == event.RulePreemptedForNothing {
				continue
			}
			if testing.Verbose() && !prefix {
				t.Logf("against share A limit %d (kept only inside a window of that limit): %s", limit, v)
			}
			for _, win := range windows {
				if win.limit == limit && !at.Before(win.from) && at.Before(win.to) {
					out = append(out, fmt.Sprintf("share A limit %d: %s", limit, v))
					break
				}
			}
		}
	}
	return sum, out
}

type checkResult struct {
	Summary    event.Summary     `json:"summary"`
	Violations []event.Violation `json:"violations"`
}

// checkEventsCLI runs qshare check-events -o json.
func checkEventsCLI(t testing.TB, logPath, cfgPath string) (checkResult, error) {
	var res checkResult
	cmd := exec.Command(bin, "check-events", logPath, "--config", cfgPath, "--settle", "1", "-o", "json")
	out, err := cmd.Output()
	if err != nil && len(out) == 0 {
		return res, fmt.Errorf("check-events: %v", err)
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return res, fmt.Errorf("check-events output: %v\n%s", err, out)
	}
	return res, nil
}
