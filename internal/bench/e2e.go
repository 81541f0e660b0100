package bench

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare"
	"qshare/config"
	"qshare/fanout"
	"qshare/internal/bench/slurm"
	"qshare/trainingjob"
)

// E2EOptions configure the end-to-end benchmark.
type E2EOptions struct {
	Endpoint string
	Server   ServerOptions
	// Sign signs each request (ClientOptions.Sign).
	Sign bool
	// Jobs trivial jobs (`true`, one instance each) are submitted by
	// Clients parallel clients onto Capacity instances (64).
	Jobs     int
	Clients  int
	Capacity int
	// VsSlurm runs the same count through a local Slurm right after.
	VsSlurm bool
	// Timeout bounds the wait for the jobs to finish (each side).
	Timeout time.Duration
	// With names a second executor kind (simulated, process, container):
	// after the run on Server.Executor alone, the same jobs run on With
	// alone; the faster of the two runs alone again with its jobs scaled
	// to the ratio of the rates (scaledJobs); then one server with both
	// executors (--executors) runs the two halves at once, each with its
	// own Clients clients, jobs and environment, and the sum of their own
	// rates is compared with the sum of the two alone (issue 34).
	With string
	// ContainerHost is the engine of --executor container (and of --with
	// container): its address, as qshare serve's --container-host takes
	// it; empty: DOCKER_HOST, else the usual sockets. With --executor
	// container the same jobs then run as the engine's own `podman run
	// --rm` (or `docker run --rm`) from the same number of clients, and
	// both sides' start latency is measured from the engine's events.
	ContainerHost string
	// JobSeconds, when above 0, makes each job hold its instance that
	// long (`sleep`, or the simulated executor's QSHARE_SIM_DURATION)
	// instead of exiting at once, so that a run's rate is bounded by the
	// capacity, as a cluster's is, rather than by the machine's CPU.
	JobSeconds float64

	// image is the trivial image of a container run (containerImage),
	// and starts the engine's start events while qshare's half runs.
	image    string
	starts   *starts
	noEngine bool
}

// E2EResult is what `qshare bench e2e` reports for one run.
type E2EResult struct {
	Jobs     int    `json:"jobs" row:"jobs;%.0f"`
	Clients  int    `json:"clients" row:"clients;%.0f"`
	Executor string `json:"executor"`
	// JobSeconds is E2EOptions.JobSeconds: 0 for jobs that exit at once.
	JobSeconds float64 `json:"job_seconds,omitempty" row:"seconds each job holds its instance;%.1f"`
	// WallS runs from the first submit to the stoppedAt of the last job
	// (every job SUCCEEDED); JobsPerS is Jobs over it.
	WallS       float64 `json:"wall_s" row:"qshare wall;%.2f;s"`
	JobsPerS    float64 `json:"jobs_per_s" row:"qshare jobs/s (submit → last SUCCEEDED);%.1f"`
	SubmitsPerS float64 `json:"submits_per_s" row:"qshare submits/s;%.0f"`
	// SubmitLatency is of one SubmitServiceJob call.
	SubmitLatency Latency `json:"submit_latency" row:"qshare submit latency;%.2f;ms"`
	// The Slurm side, with --vs-slurm: the same jobs (`sbatch --wrap
	// true`) from the same number of clients on one 64-slot node, timed
	// until squeue shows the queue empty.
	SlurmWallS         float64  `json:"slurm_wall_s,omitempty" row:"Slurm wall;%.2f;s"`
	SlurmJobsPerS      float64  `json:"slurm_jobs_per_s,omitempty" row:"Slurm jobs/s (submit → queue empty);%.1f;;BENCHMARKS.md: about 9 on this kind of machine"`
	SlurmSubmitsPerS   float64  `json:"slurm_submits_per_s,omitempty" row:"Slurm submits/s;%.0f;;BENCHMARKS.md: about 30"`
	SlurmSubmitLatency *Latency `json:"slurm_submit_latency,omitempty" row:"Slurm submit latency;%.2f;ms"`
	// Ratio is JobsPerS over SlurmJobsPerS.
	Ratio float64 `json:"ratio,omitempty" row:"ratio (qshare / Slurm jobs/s);%.2f;;target ≥ 20; with --executor slurm ≥ 0.9"`
	// The conditions that move these figures most (docs/performance.md,
	// section 3): TmpDir is the directory under which the temporary
	// server's data directory and the Slurm cluster's directory are made
	// ($TMPDIR, else /tmp), and TmpFS its file system ("tmpfs", "ext4",
	// ...): every acknowledged submit waits for an fsync there. LoadAvg and
	// SlurmLoadAvg are the 1-minute load average when each half started.
	TmpDir       string  `json:"tmp_dir" row:"$TMPDIR (data of both halves);%s"`
	TmpFS        string  `json:"tmp_fs" row:"its file system;%s;;fsync at every acknowledged submit"`
	LoadAvg      float64 `json:"load_avg_1m" row:"load average at start (1 min);%.2f"`
	SlurmLoadAvg float64 `json:"slurm_load_avg_1m,omitempty" row:"load average at Slurm's start;%.2f"`
	// With --with: the second executor alone (WithJobs jobs at
	// WithJobsPerS), then both on one server at once. Jobs and WithJobs
	// are each half's jobs, the same alone and with both: the faster one
	// has its count scaled to the ratio of the two rates (scaledJobs), so
	// that the halves, started together, would take about as long each.
	With         string  `json:"with,omitempty" row:"second executor (--with);%s"`
	WithJobs     int     `json:"with_jobs,omitempty" row:"its jobs (alone, and its half with both);%.0f"`
	WithJobsPerS float64 `json:"with_jobs_per_s,omitempty" row:"its jobs/s alone;%.1f"`
	// HalfJobsPerS and WithHalfJobsPerS are, in the run with both, each
	// executor's own rate (the server's executor's, then With's). Each
	// half has its own Clients clients (its own connections), submits its
	// own jobs to its own environment's queue and waits for them itself;
	// both halves start together, and each one's rate is its jobs over the
	// time from its own first submit to its own last end (stoppedAt), as
	// a run alone measures it. CombinedVsSum is their sum over the sum of
	// the two rates alone.
	HalfJobsPerS     float64 `json:"half_jobs_per_s,omitempty" row:"with both: the server's executor's own jobs/s;%.1f"`
	WithHalfJobsPerS float64 `json:"with_half_jobs_per_s,omitempty" row:"with both: the second executor's own jobs/s;%.1f"`
	CombinedVsSum    float64 `json:"combined_vs_sum,omitempty" row:"sum of each one's own rate with both / sum of the two alone;%.3f;;target ≥ 0.9"`
	// HalvesOverlap is the shorter half's wall over the longer's in the
	// run with both: 1 when the two ran side by side the whole time; less
	// when the slower half ran on alone at the end (the scaled count was
	// capped, or the rates with both differ from those alone), which
	// flatters the slower half's rate.
	HalvesOverlap float64 `json:"halves_overlap,omitempty" row:"with both: shorter half's wall / longer half's;%.2f;;1: side by side throughout"`
	// CombinedJobsPerS is both halves' jobs over the run with both (from
	// the first submit to the last end of either half).
	CombinedJobsPerS float64 `json:"combined_jobs_per_s,omitempty" row:"with both: all jobs over the whole run, jobs/s;%.1f"`
	// CPUPerJobMs, WithCPUPerJobMs and BothCPUPerJobMs are the CPU (user
	// and system) of the server's process tree (the server, the process
	// executor's supervisor, and the jobs it reaped) per job: the
	// server's executor alone, the second alone, and both together. On a
	// machine whose cores are busy, they are what bounds the rates.
	CPUPerJobMs     float64 `json:"cpu_per_job_ms,omitempty" row:"CPU per job alone (server, supervisor, jobs);%.2f;ms"`
	WithCPUPerJobMs float64 `json:"with_cpu_per_job_ms,omitempty" row:"CPU per job, the second alone;%.2f;ms"`
	BothCPUPerJobMs float64 `json:"both_cpu_per_job_ms,omitempty" row:"CPU per job, both on one server;%.2f;ms"`
	// CombinedVsSlowest is the longer wall of the two alone over the
	// wall of the run with both: 1 when the two halves, each as large as
	// its run alone, take no longer together than the slower one alone.
	CombinedVsSlowest float64 `json:"combined_vs_slowest,omitempty" row:"slower alone's wall / combined wall;%.2f;;1: no cost of sharing a server"`

	treeCPU time.Duration // the server's tree's CPU over the run, when known

	// With --executor container: StartLatency runs from the submit call
	// to the start of the job's container as the engine reports it (its
	// start event: the process runs). The baseline is the engine's own
	// CLI (Engine: podman or docker) running the same image's `/true`
	// with `run --rm`, the same count from the same number of clients,
	// each client one after the other; its start latency runs from the
	// command's launch to the same event. RateVsEngine is JobsPerS over
	// EngineJobsPerS (target ≥ 0.9); StartP50VsEngine the two start
	// latencies' p50s (target < 1.2).
	StartLatency       *Latency `json:"start_latency,omitempty" row:"qshare start latency (submit → container started);%.0f;ms"`
	Engine             string   `json:"engine,omitempty" row:"engine of the baseline (run --rm from its CLI);%s"`
	EngineWallS        float64  `json:"engine_wall_s,omitempty" row:"engine wall;%.2f;s"`
	EngineJobsPerS     float64  `json:"engine_jobs_per_s,omitempty" row:"engine jobs/s (first run → last exited);%.2f"`
	EngineStartLatency *Latency `json:"engine_start_latency,omitempty" row:"engine start latency (command → container started);%.0f;ms"`
	EngineLoadAvg      float64  `json:"engine_load_avg_1m,omitempty" row:"load average at the engine's start;%.2f"`
	RateVsEngine       float64  `json:"rate_vs_engine,omitempty" row:"qshare / engine jobs/s;%.2f;;target ≥ 0.9"`
	StartP50VsEngine   float64  `json:"start_p50_vs_engine,omitempty" row:"qshare / engine start latency p50;%.2f;;target < 1.2"`
}

// E2ERows returns the rows of the e2e benchmark's table.
func E2ERows() []Row { return RowsOf(E2EResult{}) }

const e2eType = "ml.m5.large"

func e2eConfig(capacity int) *config.File {
	prio := int64(1)
	n := int64(capacity)
	return &config.File{
		ServiceEnvironments: []config.Environment{{Name: "e2e-env", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: e2eType, MaxCapacity: n}}}},
		SchedulingPolicies:  []config.Policy{{Name: "e2e-policy", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}}},
		JobQueues: []config.Queue{{Name: "e2e", Priority: &prio, SchedulingPolicy: "e2e-policy", ServiceEnvironment: "e2e-env",
			QuotaShares: []config.Share{{Name: "s0", CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: e2eType, MaxCapacity: n}}, Strategy: qshare.StrategyReserve}}}},
	}
}

// RunE2E runs opt.Jobs trivial jobs through qshare, then with VsSlurm the
// same through Slurm, and reports both.
func RunE2E(ctx context.Context, opt E2EOptions) (E2EResult, error) {
	if opt.Jobs < 1 || opt.Clients < 1 {
		return E2EResult{}, fmt.Errorf("bench e2e: need at least one job and one client")
	}
	defer lessGC()()
	if opt.Capacity == 0 {
		opt.Capacity = 64
	}
	if opt.Timeout == 0 {
		opt.Timeout = 30 * time.Minute
	}
	if opt.Server.Executor == "" {
		opt.Server.Executor = "process"
	}
	if opt.JobSeconds < 0 || opt.JobSeconds > 3600 {
		return E2EResult{}, fmt.Errorf("bench e2e: --job-seconds %g: give 0 (jobs that exit at once) to 3600", opt.JobSeconds)
	}
	if opt.JobSeconds > 0 && (opt.VsSlurm || opt.Server.Executor == "container" || opt.With == "container") {
		return E2EResult{}, fmt.Errorf("bench e2e: --job-seconds runs `sleep`, which the trivial container image and --vs-slurm's `sbatch --wrap true` do not: leave it out with those")
	}
	if opt.With != "" {
		if opt.VsSlurm || opt.Endpoint != "" {
			return E2EResult{}, fmt.Errorf("bench e2e: --with starts its own servers, and compares executors, not Slurm: leave out --endpoint and --vs-slurm")
		}
		for _, k := range []string{opt.Server.Executor, opt.With} {
			if k != "process" && k != "simulated" && k != "container" && k != "slurm" {
				return E2EResult{}, fmt.Errorf("bench e2e: --with compares process, simulated, container or slurm executors, not %q", k)
			}
			if k == "slurm" {
				if err := slurm.Available(); err != nil { // before the first half rather than after it
					return E2EResult{}, fmt.Errorf("bench e2e --with and slurm: %w", err)
				}
			}
		}
		if opt.With == opt.Server.Executor {
			return E2EResult{}, fmt.Errorf("bench e2e: --with %s is the server's executor already: name another kind", opt.With)
		}
		return runE2EWith(ctx, opt)
	}
	if opt.VsSlurm || opt.Server.Executor == "slurm" {
		// Fail before the qshare half rather than after it.
		if err := slurm.Available(); err != nil {
			return E2EResult{}, fmt.Errorf("--vs-slurm or --executor slurm: %w", err)
		}
	}
	// With the Slurm executor, qshare runs the jobs on the cluster that
	// then runs the same jobs given to it with sbatch: the two halves run
	// on one Slurm, one after the other.
	var cl *slurm.Cluster
	if opt.Server.Executor == "slurm" {
		var err error
		if cl, err = slurm.Start(ctx, slurm.Options{CPUs: opt.Capacity}); err != nil {
			return E2EResult{}, err
		}
		defer cl.Close()
		args, env, err := slurmServe(cl)
		if err != nil {
			return E2EResult{}, err
		}
		opt.Server.Args = append(append([]string(nil), opt.Server.Args...), args...)
		opt.Server.Env = append(append([]string(nil), opt.Server.Env...), env...)
	}
	var en *ctrEngine
	if opt.Server.Executor == "container" {
		var err error
		if en, err = containerSetup(ctx, &opt); err != nil {
			return E2EResult{}, err
		}
		defer en.cli.Close()
		wctx, cancel := context.WithCancel(ctx)
		defer cancel()
		opt.starts = watchStarts(wctx, en.cli)
	}
	res := E2EResult{Jobs: opt.Jobs, Clients: opt.Clients, Executor: opt.Server.Executor, JobSeconds: opt.JobSeconds,
		TmpDir: os.TempDir(), TmpFS: FileSystem(os.TempDir()), LoadAvg: LoadAverage()}
	if opt.Endpoint != "" {
		res.Executor = "(the server's)"
	}
	err := withServer(ctx, opt.Endpoint, opt.Server, ClientOptions{Conns: opt.Clients, Sign: opt.Sign}, e2eConfig(opt.Capacity), func(c *batch.Client, queues map[string]string, _ string, srv *Server) (err error) {
		res.treeCPU, err = withTreeCPU(srv, func() error { return e2eQshare(ctx, c, queues["e2e"], srv, opt, &res) })
		return err
	})
	if err != nil {
		return res, err
	}
	if en != nil && !opt.noEngine {
		res.EngineLoadAvg = LoadAverage()
		b, err := runBaseline(ctx, en, opt.image, opt.Jobs, opt.Clients)
		if err != nil {
			return res, err
		}
		res.Engine = en.name()
		res.EngineWallS = round(b.wall.Seconds(), 3)
		res.EngineJobsPerS = round(float64(opt.Jobs)/b.wall.Seconds(), 2)
		res.EngineStartLatency = &b.start
		if res.EngineJobsPerS > 0 {
			res.RateVsEngine = round(res.JobsPerS/res.EngineJobsPerS, 2)
		}
		if res.StartLatency != nil && b.start.P50 > 0 {
			res.StartP50VsEngine = round(res.StartLatency.P50/b.start.P50, 2)
		}
	}
	if !opt.VsSlurm {
		return res, nil
	}
	res.SlurmLoadAvg = LoadAverage()
	if cl == nil {
		if cl, err = slurm.Start(ctx, slurm.Options{CPUs: opt.Capacity}); err != nil {
			return res, err
		}
		defer cl.Close()
	}
	sr, err := cl.Run(ctx, slurm.RunOptions{Jobs: opt.Jobs, Clients: opt.Clients})
	if err != nil {
		return res, err
	}
	lat := Latencies(sr.SubmitLatencies)
	res.SlurmWallS = round(sr.Wall.Seconds(), 3)
	res.SlurmJobsPerS = round(sr.JobsPerSecond(), 2)
	res.SlurmSubmitsPerS = round(sr.SubmitsPerSecond(), 1)
	res.SlurmSubmitLatency = &lat
	res.Ratio = round(res.JobsPerS/res.SlurmJobsPerS, 2)
	return res, nil
}

// slurmServe writes the Slurm executor's configuration for the cluster
// (the e2e type on its partition, sharing its one node: one CPU slot and
// 1 MB of the node's nominal memory each) into the cluster's directory,
// and returns the flags and the environment of a qshare serve over it.
func slurmServe(cl *slurm.Cluster) (args, env []string, err error) {
	dir := cl.Config().Dir
	conf := filepath.Join(dir, "qshare-slurm.yaml")
	text := "sharedDir: " + filepath.Join(dir, "qshare") + "\ninstanceTypes:\n  " + e2eType + ": {partition: bench, cpus: 1, memory: 1M, shareNodes: true}\n"
	if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
		return nil, nil, fmt.Errorf("bench e2e: %w", err)
	}
	for _, kv := range cl.Env() {
		if strings.HasPrefix(kv, "SLURM_CONF=") {
			env = append(env, kv)
		}
	}
	return []string{"--slurm-config", conf}, env, nil
}

// withTreeCPU runs f and returns the CPU that the server's process tree
// used meanwhile (0 when that is not known: no server of ours).
func withTreeCPU(srv *Server, f func() error) (time.Duration, error) {
	var cpu0 time.Duration
	if srv != nil {
		cpu0, _ = treeCPU(srv.Pid())
	}
	if err := f(); err != nil {
		return 0, err
	}
	if srv != nil {
		if c, err := treeCPU(srv.Pid()); err == nil {
			return c - cpu0, nil
		}
	}
	return 0, nil
}

// e2eQshare submits opt.Jobs jobs to the queue from opt.Clients clients
// (c's connections), waits until every one has ended, and fills res with
// their rate from the first submit to the last end.
func e2eQshare(ctx context.Context, c *batch.Client, queue string, srv *Server, opt E2EOptions, res *E2EResult) error {
	lats := make([]time.Duration, opt.Jobs)
	env := map[string]string{"QSHARE_SIM_DURATION": "0s"} // the simulated executor's `true`
	image, entry := benchImage, []string{"true"}
	if opt.JobSeconds > 0 {
		secs := strconv.FormatFloat(opt.JobSeconds, 'f', -1, 64)
		env["QSHARE_SIM_DURATION"], entry = secs+"s", []string{"sleep", secs}
	}
	if opt.image != "" {
		image, entry = opt.image, []string{"/true"} // the container executor's `true`
	}
	var mu sync.Mutex
	submitted := map[string]time.Time{} // "job:ID": when its submit began
	start := time.Now()
	if err := fanout.Each(ctx, opt.Clients, opt.Jobs, func(ctx context.Context, i int) error {
		name := fmt.Sprintf("e2e-%d", i)
		t := time.Now()
		out, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{
			JobName: aws.String(name), JobQueue: aws.String(queue), QuotaShareName: aws.String("s0"),
			ServiceJobType:        types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(payloadWith(name, e2eType, 1, entry, env, func(r *trainingjob.Request) { r.AlgorithmSpecification.TrainingImage = image })),
		})
		lats[i] = time.Since(t)
		if err != nil {
			return fmt.Errorf("bench e2e: submit %d: %w", i, err)
		}
		mu.Lock()
		submitted["job:"+aws.ToString(out.JobId)] = t
		mu.Unlock()
		if opt.starts != nil {
			// Against the engine's `run --rm`, each client waits for its
			// container to end before the next, as that command does.
			return awaitEnded(ctx, c, aws.ToString(out.JobId), opt.Timeout)
		}
		return nil
	}); err != nil {
		return err
	}
	submitWall := time.Since(start)
	if err := waitDone(ctx, c, []string{queue}, srv, 50*time.Millisecond, opt.Timeout); err != nil {
		return err
	}
	failed, err := listJobs(ctx, c, queue, types.ServiceJobStatusFailed)
	if err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("bench e2e: %d of %d jobs FAILED, the first because %q", len(failed), opt.Jobs, aws.ToString(failed[0].StatusReason))
	}
	done, err := listJobs(ctx, c, queue, types.ServiceJobStatusSucceeded)
	if err != nil {
		return err
	}
	if len(done) != opt.Jobs {
		return fmt.Errorf("bench e2e: %d jobs SUCCEEDED, want %d", len(done), opt.Jobs)
	}
	var last time.Time
	for _, j := range done {
		if t := ms(j.StoppedAt); t.After(last) {
			last = t
		}
	}
	if last.IsZero() {
		return fmt.Errorf("bench e2e: no SUCCEEDED job has a stoppedAt")
	}
	wall := last.Sub(start)
	// stoppedAt has millisecond resolution; a run can never be shorter
	// than its own submits.
	wall = max(wall, submitWall)
	res.WallS = round(wall.Seconds(), 3)
	res.JobsPerS = round(float64(opt.Jobs)/wall.Seconds(), 2)
	res.SubmitsPerS = round(float64(opt.Jobs)/submitWall.Seconds(), 1)
	res.SubmitLatency = Latencies(lats)
	if opt.starts != nil {
		opt.starts.awaitStarts(submitted)
		lat, missing := opt.starts.latencies(submitted)
		if missing > 0 {
			return fmt.Errorf("bench e2e: the engine reported no container start for %d of %d jobs", missing, opt.Jobs)
		}
		l := Latencies(lat)
		res.StartLatency = &l
	}
	return nil
}

// awaitEnded polls a job until it has ended (every 20ms, a cheap read).
func awaitEnded(ctx context.Context, c *batch.Client, id string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		d, err := c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		if err != nil {
			return fmt.Errorf("bench e2e: describing job %s: %w", id, err)
		}
		if d.Status == types.ServiceJobStatusSucceeded || d.Status == types.ServiceJobStatusFailed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench e2e: job %s still %s after %s", id, d.Status, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// maxHalfJobs bounds the jobs of a half whose count scaledJobs raises: a
// simulated executor can be a hundred times faster than a process one on
// a busy machine, and every job stays in the server's memory and store.
const maxHalfJobs = 20000

// scaledJobs is the jobs of a half whose rate alone is rate when the other
// half's is other and has n jobs: n times the ratio of the rates when this
// one is the faster (so that each half alone would take about as long as
// the other, and the two, started together, run side by side to the
// end), at most maxHalfJobs (or n); else n.
func scaledJobs(n int, rate, other float64) int {
	if other <= 0 || rate <= other {
		return n
	}
	return min(int(float64(n)*rate/other+0.5), max(n, maxHalfJobs))
}

// runE2EWith is RunE2E with opt.With: each executor alone, the faster
// again with its jobs scaled to the ratio of the rates, then both halves
// at once on one server, each with its own clients.
func runE2EWith(ctx context.Context, opt E2EOptions) (E2EResult, error) {
	alone := func(kind string, jobs int) (E2EResult, error) {
		o := opt
		o.With, o.Server.Executor, o.Jobs = "", kind, jobs
		o.noEngine = true // the executors against each other, not against the engine's CLI
		r, err := RunE2E(ctx, o)
		if err != nil {
			return r, fmt.Errorf("bench e2e: %s alone: %w", kind, err)
		}
		return r, nil
	}
	res, err := alone(opt.Server.Executor, opt.Jobs)
	if err != nil {
		return res, err
	}
	other, err := alone(opt.With, opt.Jobs)
	if err != nil {
		return res, err
	}
	// The faster runs alone again with its jobs scaled to the ratio of
	// the rates; a run of n jobs is often slower per job than a larger one
	// (its start weighs more), so the count is scaled once more from the
	// new rate while it moves by more than a tenth.
	runs, kinds := [2]*E2EResult{&res, &other}, [2]string{opt.Server.Executor, opt.With}
	fast := 0
	if other.JobsPerS > res.JobsPerS {
		fast = 1
	}
	for range 2 {
		f := runs[fast]
		n := scaledJobs(opt.Jobs, f.JobsPerS, runs[1-fast].JobsPerS)
		if d := n - f.Jobs; 10*d <= f.Jobs && -10*d <= f.Jobs {
			break
		}
		if *f, err = alone(kinds[fast], n); err != nil {
			return res, err
		}
	}
	res.With, res.WithJobs, res.WithJobsPerS = opt.With, other.Jobs, other.JobsPerS

	dir, err := os.MkdirTemp("", "qshare-bench-executors-")
	if err != nil {
		return res, err
	}
	defer os.RemoveAll(dir)
	both := opt
	entry := func(kind string) string { return "{kind: " + kind + "}" }
	if opt.Server.Executor == "slurm" || opt.With == "slurm" {
		// The Slurm half runs on a throwaway cluster of its own, as a run
		// of --executor slurm alone does.
		cl, err := slurm.Start(ctx, slurm.Options{CPUs: opt.Capacity})
		if err != nil {
			return res, err
		}
		defer cl.Close()
		args, env, err := slurmServe(cl)
		if err != nil {
			return res, err
		}
		both.Server.Env = append(append([]string(nil), opt.Server.Env...), env...)
		plain := entry
		entry = func(kind string) string {
			if kind == "slurm" {
				return "{kind: slurm, slurmConfig: " + strconv.Quote(args[1]) + "}"
			}
			return plain(kind)
		}
	}
	file := filepath.Join(dir, "executors.yaml")
	if err := os.WriteFile(file, []byte("default: "+entry(opt.Server.Executor)+"\nsecond: "+entry(opt.With)+"\n"), 0o644); err != nil {
		return res, err
	}
	both.Server.Executor = ""
	both.Server.Args = append(append([]string(nil), opt.Server.Args...), "--executors", file)
	cfg := e2eConfig(opt.Capacity)
	second := cfg.ServiceEnvironments[0]
	second.Name, second.Tags = "e2e-env-2", map[string]string{qshare.TagExecutor: "second"}
	cfg.ServiceEnvironments = append(cfg.ServiceEnvironments, second)
	q := cfg.JobQueues[0]
	q.Name, q.ServiceEnvironment = "e2e-2", second.Name
	cfg.JobQueues = append(cfg.JobQueues, q)
	if opt.Server.Executor == "container" || opt.With == "container" {
		en, err := containerSetup(ctx, &both)
		if err != nil {
			return res, err
		}
		defer en.cli.Close()
	}
	halves, cpu, err := runBoth(ctx, both, cfg, [2]int{res.Jobs, res.WithJobs})
	if err != nil {
		return res, fmt.Errorf("bench e2e: both executors on one server: %w", err)
	}
	res.HalfJobsPerS, res.WithHalfJobsPerS = halves[0].JobsPerS, halves[1].JobsPerS
	if long := max(halves[0].WallS, halves[1].WallS); long > 0 {
		res.HalvesOverlap = round(min(halves[0].WallS, halves[1].WallS)/long, 2)
		res.CombinedJobsPerS = round(float64(res.Jobs+res.WithJobs)/long, 2)
		res.CombinedVsSlowest = round(max(res.WallS, other.WallS)/long, 2)
	}
	if sum := res.JobsPerS + res.WithJobsPerS; sum > 0 {
		res.CombinedVsSum = round((res.HalfJobsPerS+res.WithHalfJobsPerS)/sum, 3)
	}
	if res.treeCPU > 0 && other.treeCPU > 0 && cpu > 0 {
		per := func(d time.Duration, jobs int) float64 { return round(float64(d.Microseconds())/1000/float64(jobs), 3) }
		res.CPUPerJobMs, res.WithCPUPerJobMs, res.BothCPUPerJobMs = per(res.treeCPU, res.Jobs), per(other.treeCPU, other.Jobs), per(cpu, res.Jobs+res.WithJobs)
	}
	return res, nil
}

// runBoth runs the two halves at once on one server with both executors
// (both.Server, cfg's queues e2e and e2e-2): jobs[h] jobs each, each half
// with its own both.Clients clients. It returns each half's result and
// the CPU of the server's process tree over the two.
func runBoth(ctx context.Context, both E2EOptions, cfg *config.File, jobs [2]int) (halves [2]E2EResult, cpu time.Duration, err error) {
	err = withServer(ctx, "", both.Server, ClientOptions{Conns: both.Clients, Sign: both.Sign}, cfg, func(c *batch.Client, queues map[string]string, _ string, srv *Server) (err error) {
		// The second half's own clients: its own connections, so that
		// neither half's requests wait for the other's.
		clients := [2]*batch.Client{c, NewClient(srv.Endpoint, ClientOptions{Conns: both.Clients, Sign: both.Sign, Key: srv.Key})}
		// The second environment must run on the second executor: without
		// its tag every job would run on the default one (as every job of
		// this run once did, when applyConfig dropped the tags).
		envs, err := c.DescribeServiceEnvironments(ctx, &batch.DescribeServiceEnvironmentsInput{ServiceEnvironments: []string{"e2e-env-2"}})
		if err != nil {
			return err
		}
		if len(envs.ServiceEnvironments) != 1 || envs.ServiceEnvironments[0].Tags[qshare.TagExecutor] != "second" {
			return fmt.Errorf("bench e2e: the environment e2e-env-2 does not name the executor second (tag %s)", qshare.TagExecutor)
		}
		cpu, err = withTreeCPU(srv, func() error {
			var wg sync.WaitGroup
			var errs [2]error
			for h, queue := range []string{queues["e2e"], queues["e2e-2"]} {
				o := both
				o.Jobs = jobs[h]
				wg.Go(func() { errs[h] = e2eQshare(ctx, clients[h], queue, srv, o, &halves[h]) })
			}
			wg.Wait()
			return errors.Join(errs[:]...)
		})
		return err
	})
	return halves, cpu, err
}
