// Package soak runs qshare serve for a long while under a random workload
// and kills it with SIGKILL now and then (qshare bench soak). The server
// runs the process executor with fake GPUs and appends its capacity event
// log; jobs are shell scripts that checkpoint and write a trace of their
// attempts. At the end the soak counts every violation it can see: an
// acknowledged job missing, a job that ran two attempts at once, a job that
// failed although nobody terminated it, a job left unfinished, and every
// broken guarantee in the event log (event.Check), and reports the server's
// memory at the start and at the end.
package soak

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/config"
	"qshare/event"
	"qshare/internal/batchclient"
	"qshare/internal/serveproc"
)

// Options configure a soak run.
type Options struct {
	// Binary is the qshare executable; the running one when empty.
	Binary string
	// Duration is how long the workload runs (the drain comes after).
	Duration time.Duration
	// KillEvery is the mean time between two kill -9 of the server.
	KillEvery time.Duration
	// Dir holds the data, the event log and the traces; a temporary
	// directory (removed after a clean run) when empty.
	Dir string
	// Seed seeds the workload and the kill moments; 0 picks one.
	Seed uint64
	// Progress, when set, receives a line now and then.
	Progress io.Writer
}

// Result is what a soak run saw.
type Result struct {
	Duration      time.Duration `json:"duration"`
	Seed          uint64        `json:"seed"`
	Dir           string        `json:"dir"`
	Restarts      int           `json:"restarts"`
	SubmitsSent   int           `json:"submitsSent"`
	Acknowledged  int           `json:"acknowledged"`
	Jobs          int           `json:"jobs"`
	Succeeded     int           `json:"succeeded"`
	Failed        int           `json:"failed"`
	Terminated    int           `json:"terminated"`
	PriorityOps   int           `json:"priorityUpdates"`
	Resumes       int           `json:"resumesFromCheckpoint"`
	EventLines    int           `json:"eventLines"`
	Starts        int           `json:"starts"`
	Preemptions   int           `json:"preemptions"`
	Violations    int           `json:"violations"`
	Problems      []string      `json:"problems,omitempty"`
	RSSStartBytes int64         `json:"rssStartBytes"`
	RSSEndBytes   int64         `json:"rssEndBytes"`
	RSSPeakBytes  int64         `json:"rssPeakBytes"`
}

// FleetConfig is the fleet of the soak and of faulttest's kill -9 test:
// three shares of a six-instance pool, A (LEND_AND_BORROW, borrowing up to
// 100 %) with a limit of limitA instances, B (LEND) and C (RESERVE, no
// in-share preemption) with 2 each. The soak runs it with limitA 2.
func FleetConfig(limitA int) string {
	return PoolQueue("q", 6) + fmt.Sprintf(`      - quotaShareName: A
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: %d}]
        resourceSharingConfiguration: {strategy: LEND_AND_BORROW, borrowLimit: 100}
        preemptionConfiguration: {inSharePreemption: ENABLED}
      - quotaShareName: B
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
        resourceSharingConfiguration: {strategy: LEND}
        preemptionConfiguration: {inSharePreemption: ENABLED}
      - quotaShareName: C
        capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: 2}]
        resourceSharingConfiguration: {strategy: RESERVE}
        preemptionConfiguration: {inSharePreemption: DISABLED}
`, limitA)
}

// PoolQueue is the head of an apply file of one pool and one queue: the
// service environment pool of capacity ml.g5.xlarge instances, the FIFO
// quota-share policy qm, and the job queue named queue (q for the soak and
// the fault tests) of qm on pool, whose quotaShares list the caller appends
// (each item indented by six spaces).
func PoolQueue(queue string, capacity int) string {
	return fmt.Sprintf(`serviceEnvironments:
  - serviceEnvironmentName: pool
    capacityLimits: [{capacityUnit: ml.g5.xlarge, maxCapacity: %d}]
schedulingPolicies:
  - name: qm
    quotaSharePolicy: {idleResourceAssignmentStrategy: FIFO}
jobQueues:
  - jobQueueName: %s
    priority: 1
    schedulingPolicy: qm
    serviceEnvironment: pool
    quotaShares:
`, capacity, queue)
}

// fleet is the configuration the soak applies and checks its event log
// against.
var fleet = FleetConfig(2)

// JobScript is the shell job of the soak and of faulttest's workload: it
// runs $STEPS steps of 0.1 s from its checkpoint ($SM_CHECKPOINT_DIR/step)
// and appends "attempt pid step unixnano" to $TRACE before each step,
// "attempt pid done unixnano" at the end.
const JobScript = `ck="$SM_CHECKPOINT_DIR/step"
s=$(cat "$ck" 2>/dev/null || echo 0)
while [ "$s" -lt "$STEPS" ]; do
  echo "$QSHARE_ATTEMPT $$ $s $(date +%s%N)" >> "$TRACE"
  sleep 0.1
  s=$((s+1))
  echo "$s" > "$ck.tmp" && mv "$ck.tmp" "$ck"
done
echo "$QSHARE_ATTEMPT $$ done $(date +%s%N)" >> "$TRACE"
`

type run struct {
	o      Options
	r      *rand.Rand
	dir    string
	data   string
	events string
	traces string
	mu     sync.Mutex // guards res.Problems
	w      *Workload
	res    Result
	srv    *serveproc.Server
	logf   *os.File
	url    string
}

// Run runs a soak and returns what it saw. An error means the soak itself
// could not go on (the server would not start); violations are in Result.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Duration <= 0 {
		o.Duration = 10 * time.Minute
	}
	if o.KillEvery <= 0 {
		o.KillEvery = 20 * time.Second
	}
	if o.Seed == 0 {
		o.Seed = uint64(time.Now().UnixNano())
	}
	if o.Binary == "" {
		b, err := os.Executable()
		if err != nil {
			return nil, err
		}
		o.Binary = b
	}
	dir := o.Dir
	temp := dir == ""
	if temp {
		d, err := os.MkdirTemp("", "qshare-soak-")
		if err != nil {
			return nil, err
		}
		dir = d
	}
	s := &run{o: o, r: rand.New(rand.NewPCG(o.Seed, 7)), dir: dir, data: filepath.Join(dir, "data"),
		events: filepath.Join(dir, "events.jsonl"), traces: filepath.Join(dir, "traces")}
	s.w = NewWorkload(s.traces, 2)
	s.res.Seed, s.res.Dir = o.Seed, dir
	if err := os.MkdirAll(s.traces, 0o755); err != nil {
		return nil, err
	}
	defer s.killServer()
	if err := s.startServer(ctx); err != nil {
		return nil, err
	}
	cfgPath := filepath.Join(dir, "fleet.yaml")
	if err := os.WriteFile(cfgPath, []byte(fleet), 0o644); err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, o.Binary, "apply", "-f", cfgPath, "--endpoint", s.url).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("soak: qshare apply: %v\n%s", err, out)
	}
	start := time.Now()
	s.progress("soak: %s of random workload, kill -9 about every %s (seed %d, files in %s)", o.Duration, o.KillEvery, o.Seed, dir)
	time.Sleep(2 * time.Second)
	s.res.RSSStartBytes = rss(s.srv.Pid())
	s.res.RSSPeakBytes = s.res.RSSStartBytes

	end := start.Add(o.Duration)
	for time.Now().Before(end) && ctx.Err() == nil {
		wait := time.Duration(float64(o.KillEvery) * (0.5 + s.r.Float64()))
		if left := time.Until(end); wait > left {
			wait = left
		}
		s.drive(ctx, wait)
		if n := rss(s.srv.Pid()); n > s.res.RSSPeakBytes {
			s.res.RSSPeakBytes = n
		}
		if time.Now().Before(end) && ctx.Err() == nil {
			s.killServer()
			s.res.Restarts++
			if err := s.startServer(ctx); err != nil {
				return &s.res, err
			}
			if err := s.w.CheckAcked(ctx, s.client()); err != nil {
				s.problem("after restart %d: %v", s.res.Restarts, err)
			}
			s.progress("soak: %s, restart %d, %d jobs acknowledged", time.Since(start).Round(time.Second), s.res.Restarts, s.w.Stats().Acknowledged)
		}
	}
	s.res.Duration = time.Since(start)
	s.progress("soak: workload over; waiting for the jobs to finish")
	s.finish(ctx)
	if n := rss(s.srv.Pid()); n > 0 {
		s.res.RSSEndBytes = n
		if n > s.res.RSSPeakBytes {
			s.res.RSSPeakBytes = n
		}
	}
	s.stopServer()
	s.checkEvents(cfgPath)
	s.res.Violations = len(s.res.Problems)
	if temp && s.res.Violations == 0 {
		os.RemoveAll(dir)
		s.res.Dir = ""
	}
	return &s.res, nil
}

func (s *run) progress(format string, args ...any) {
	if s.o.Progress != nil {
		fmt.Fprintf(s.o.Progress, format+"\n", args...)
	}
}

func (s *run) problem(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Problems = append(s.res.Problems, fmt.Sprintf(format, args...))
}

// startServer starts the server on the soak's data directory, its output
// appended to serve.log.
func (s *run) startServer(ctx context.Context) error {
	logf, err := os.OpenFile(filepath.Join(s.dir, "serve.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	srv, err := serveproc.Start(ctx, serveproc.Options{Binary: s.o.Binary, DataDir: s.data,
		Args:   []string{"--executor", "process", "--gpus", "0,1,2,3,4,5,6,7", "--log-level", "warn", "--stop-grace", "1s", "--events", s.events},
		Output: logf, StopSignal: syscall.SIGTERM, StopWait: 30 * time.Second})
	if err != nil {
		logf.Close()
		return fmt.Errorf("soak: %w", err)
	}
	s.srv, s.logf, s.url = srv, logf, srv.Endpoint
	return nil
}

// killServer kills the server with SIGKILL, as a crash would.
func (s *run) killServer() {
	if s.srv == nil {
		return
	}
	s.srv.Kill()
	s.logf.Close()
	s.srv = nil
}

// stopServer stops the server cleanly (SIGTERM), or kills it 30 s later.
func (s *run) stopServer() {
	if s.srv == nil {
		return
	}
	_ = s.srv.Stop()
	s.logf.Close()
	s.srv = nil
}

func (s *run) client() *batch.Client {
	return batchclient.New(s.url, "us-east-1", batchclient.NoRetry)
}

// drive runs the workload against the current server for d: two
// submitters that keep the backlog bounded, and a mutator that changes
// priorities and terminates now and then.
func (s *run) drive(ctx context.Context, d time.Duration) {
	c := s.client()
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < 2; w++ {
		r := rand.New(rand.NewPCG(s.r.Uint64(), uint64(w)))
		wg.Go(func() {
			for wctx.Err() == nil {
				if s.backlog(wctx, c) < 30 {
					s.w.Submit(wctx, c, r)
				}
				sleep(wctx, time.Duration(300+r.IntN(600))*time.Millisecond)
			}
		})
	}
	r := rand.New(rand.NewPCG(s.r.Uint64(), 99))
	wg.Go(func() {
		for wctx.Err() == nil {
			// Share A keeps its limit: checkEvents checks against one.
			s.w.Mutate(wctx, c, r, false)
			sleep(wctx, time.Duration(200+r.IntN(400))*time.Millisecond)
		}
	})
	wg.Wait()
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// backlog counts RUNNABLE jobs (one page is enough to tell).
func (s *run) backlog(ctx context.Context, c *batch.Client) int {
	out, err := c.ListServiceJobs(ctx, &batch.ListServiceJobsInput{JobQueue: aws.String("q"), JobStatus: types.ServiceJobStatusRunnable, MaxResults: aws.Int32(100)})
	if err != nil {
		return 1 << 30
	}
	return len(out.JobSummaryList)
}

// finish waits for every job to end and checks final states and traces.
func (s *run) finish(ctx context.Context) {
	c := s.client()
	all, err := WaitAllDone(ctx, c, 5*time.Minute)
	if err != nil {
		s.problem("at the end: %v", err)
		if all == nil {
			return
		}
	}
	o, problems := s.w.CheckFinal(ctx, c, all)
	st := s.w.Stats()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.res.Problems = append(s.res.Problems, problems...)
	s.res.SubmitsSent, s.res.Acknowledged, s.res.PriorityOps = st.Submits, st.Acknowledged, st.PriorityOps
	s.res.Jobs, s.res.Succeeded, s.res.Failed, s.res.Terminated, s.res.Resumes = o.Jobs, o.Succeeded, o.Failed, o.Terminated, o.Resumes
}

// checkEvents checks the event log against the fleet's configuration.
func (s *run) checkEvents(cfgPath string) {
	cfg, err := config.Parse(cfgPath, []byte(fleet), config.Options{})
	if err != nil {
		s.problem("config: %v", err)
		return
	}
	f, err := os.Open(s.events)
	if err != nil {
		s.problem("event log: %v", err)
		return
	}
	defer f.Close()
	vs, sum, err := event.Check(cfg, f, event.CheckOptions{Settle: 1})
	if err != nil {
		s.problem("event log: %v", err)
		return
	}
	s.res.EventLines, s.res.Starts, s.res.Preemptions = sum.Lines, sum.Starts, sum.Preempts
	for _, v := range vs {
		s.problem("event log: %s", v)
	}
	if sum.Violations > len(vs) {
		s.problem("event log: %d more violations", sum.Violations-len(vs))
	}
}

// rss returns the resident set size of a process, or 0.
func rss(pid int) int64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) >= 1 {
				n, _ := strconv.ParseInt(f[0], 10, 64)
				return n * 1024
			}
		}
	}
	return 0
}
