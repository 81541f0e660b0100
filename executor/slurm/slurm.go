// Package slurm is the executor that runs training jobs as batch jobs of an
// existing Slurm cluster: qshare's quota shares decide who runs, Slurm runs
// it. The daemon calls it through executor.Executor.
//
// It drives Slurm's own commands (sbatch, scancel, squeue, scontrol, and
// sacct where the cluster keeps accounting) with exec and arguments, never
// a shell, and reads their machine-readable output (sbatch --parsable;
// squeue --Format and sacct --parsable2 with a unit-separator delimiter).
// One attempt is one batch job: N instances of a type are --nodes=N
// --exclusive in the type's partition with its --gres (see Config). The
// job's name (qshare-<attemptID>) and --comment carry the attempt ID, so
// that a restarted server finds its jobs.
//
// On disk, in the shared directory that every node sees:
//
//	jobs/<jobID>/                 the working directory of every attempt
//	  model/ output/ output/data/ SM_MODEL_DIR, SM_OUTPUT_DIR, SM_OUTPUT_DATA_DIR
//	  checkpoints/                SM_CHECKPOINT_DIR, the same on every attempt
//	attempts/<attemptID>/
//	  job.sh                      the batch script: on one node it runs the
//	                              step runner itself; on more it finds the
//	                              nodes (scontrol show hostnames) and starts
//	                              the step runner once per node with srun
//	  step.json                   the command, its environment and the toolkit's files
//	  job.json                    the Slurm job ID, written after sbatch
//	  config/<node>/              each node's SM_INPUT_CONFIG_DIR
//	  exit-<node>.json            how the command ended on each node
//	  output.log                  the job's output
//	  slurm.log                   the batch script's and srun's own (sbatch --output)
//
// The step runner (MaybeStep) is this binary run on each node; it records
// the exit code or signal in the shared directory, so an exit is known even
// after Slurm has forgotten the job (MinJobAge) and without accounting.
// Where the cluster keeps accounting, sacct gives the state of such a job
// (accounting.go): a cancel, a timeout or a node failure that the records
// cannot tell.
package slurm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/process"
	"qshare/trainingjob"
)

// Defaults of Options.
const (
	DefaultStopGrace    = executor.DefaultStopGrace
	DefaultPollInterval = 250 * time.Millisecond
	// EnvStopGrace is the payload Environment key of a job's own grace
	// period, as for the process executor.
	EnvStopGrace = executor.EnvStopGrace
)

// Options configure an Executor.
type Options struct {
	// Config is the --slurm-config file's content. Required.
	Config Config
	// StopGrace is the grace period of a Stop that gives none, for a job
	// whose payload does not set QSHARE_STOP_GRACE. Zero: DefaultStopGrace.
	StopGrace time.Duration
	// Step is the command that starts the step runner on a node; it must
	// call MaybeStep first thing. Empty: this binary (os.Executable), which
	// must then be at the same path on every node.
	Step []string
	// Env is the environment of the Slurm commands (SLURM_CONF, PATH); nil
	// means os.Environ(). Jobs get PATH, HOME, LANG and TZ of it, and
	// nothing else of the server's environment.
	Env []string
	// PollInterval is how often squeue is asked about running attempts.
	// Zero: DefaultPollInterval.
	PollInterval time.Duration
	// CommandTimeout bounds one Slurm command; zero: 30s.
	CommandTimeout time.Duration
	// StartWait bounds how long Start waits for the job's command to run
	// on a node before it returns with the job still pending in Slurm;
	// zero: 10s.
	StartWait time.Duration
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
	// S3 is where the step runner's data wrapper finds S3 (package data):
	// it must be reachable from every node.
	S3 data.Endpoint
}

// Executor runs attempts as Slurm batch jobs. It is safe for concurrent use.
type Executor struct {
	o    Options
	root string
	fs   *process.Beneath
	tag  string // in every job's comment: this shared directory's jobs
	log  *slog.Logger

	mu       sync.Mutex
	attempts map[string]*attempt
	wake     chan struct{}

	users users // the RunAs users

	acct accounting // whether sacct can be asked about jobs squeue forgot

	hmu          sync.Mutex
	trouble      string    // why slurmctld did not answer the last command; "" while it answers
	troubleSince time.Time // when it stopped answering
	lastCheck    time.Time // when a command last told whether it answers

	closeOnce sync.Once
	closed    chan struct{}
}

var _ executor.Executor = (*Executor)(nil)

// jobRecord is job.json, and Handle.State.
type jobRecord struct {
	SlurmJob  int64         `json:"slurmJob"`
	StartedAt time.Time     `json:"startedAt"`
	Grace     time.Duration `json:"grace,omitempty"`
	// JobDir is the job's directory, where its failure file is.
	JobDir string `json:"jobDir,omitempty"`
	// InBatch is true when the batch script runs the step runner itself
	// (a one-node attempt) instead of through srun: a stop then signals
	// the batch script (scancel --batch), the runner, which passes the
	// signal on to the command's process group.
	InBatch bool `json:"inBatch,omitempty"`
	// Uploads is true when the attempt's first node uploads a model, an
	// output or checkpoints: at the end of a stop's grace period, Stop
	// gives its step runner the time to (killFile).
	Uploads bool `json:"uploads,omitempty"`
}

type attempt struct {
	id string
	executor.Slot

	rec    jobRecord
	handle executor.Handle
	state  string // Slurm's last word: PENDING, RUNNING, …
	reason string // and its reason (squeue's %r)
	killed bool   // the grace period ran out and SIGKILL was sent
}

// New returns a Slurm executor over o.Config. It checks the configuration
// and that sbatch, squeue, scancel and scontrol are on PATH, and creates
// the shared directory's layout; it fails with a *qshare.Error.
func New(ctx context.Context, o Options) (*Executor, error) {
	if err := o.Config.Check(); err != nil {
		return nil, err
	}
	if !filepath.IsAbs(o.Config.SharedDir) {
		return nil, qshare.Errorf(qshare.EINVALID, "--slurm-config: sharedDir %q must be an absolute path, the same on every node", o.Config.SharedDir)
	}
	if o.Env == nil {
		o.Env = os.Environ()
	}
	for _, c := range []string{"sbatch", "squeue", "scancel", "scontrol"} {
		if _, err := lookPath(c, o.Env); err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "slurm executor: %s is not on PATH: install Slurm's client commands (Debian: apt-get install slurm-client)", c)
		}
	}
	o.StopGrace = executor.OrDefault(o.StopGrace, DefaultStopGrace)
	o.PollInterval = executor.OrDefault(o.PollInterval, DefaultPollInterval)
	o.CommandTimeout = executor.OrDefault(o.CommandTimeout, 30*time.Second)
	o.StartWait = executor.OrDefault(o.StartWait, 10*time.Second)
	if len(o.Step) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, qshare.Errorf(qshare.EINTERNAL, "slurm executor: cannot find my own binary to run as the step runner: %v", err)
		}
		o.Step = []string{self}
	}
	root := filepath.Clean(o.Config.SharedDir)
	// The attempts' files hold every job's environment and output: they
	// are the server's user's alone (the jobs run as that user in Slurm).
	// A sharedDir made here lets others pass through (jobs of their own
	// users must reach their directories); what is inside is private.
	if err := os.MkdirAll(root, 0o711); err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "slurm executor: cannot create sharedDir: %v", err)
	}
	for _, d := range []string{"jobs", "attempts"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o700); err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "slurm executor: cannot create %s in sharedDir: %v", d, err)
		}
	}
	sum := sha256.Sum256([]byte(root))
	e := &Executor{o: o, root: root, fs: process.NewBeneath(root), tag: hex.EncodeToString(sum[:6]),
		log: o.Logger, attempts: map[string]*attempt{}, wake: make(chan struct{}, 1), closed: make(chan struct{})}
	if e.log == nil {
		e.log = slog.Default()
	}
	go e.poll()
	return e, nil
}

// Name returns "slurm".
func (e *Executor) Name() string { return "slurm" }

// Validate checks the payload: a command, a known instance type, a usable
// checkpoint path and environment.
func (e *Executor) Validate(payload string, demand qshare.Capacity) error {
	return executor.ValidatePayload(payload, demand, e.ValidateRequest)
}

// ValidateRequest is Validate for a payload already parsed with
// trainingjob.Parse. It only reads req.
func (e *Executor) ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error {
	_, _, _, err := e.check(req, demand)
	return err
}

// check validates a parsed request and returns its instance type, the
// number of nodes and the job's own grace period.
func (e *Executor) check(req *trainingjob.Request, demand qshare.Capacity) (string, int, time.Duration, error) {
	// Pipe mode and FileSystemDataSource are refused by every executor
	// (package data); the step runner stages the rest (wrapData).
	if err := data.Validate(req); err != nil {
		return "", 0, 0, err
	}
	if err := executor.NoNetworkIsolation(req, "Slurm"); err != nil {
		return "", 0, 0, err
	}
	if len(req.AlgorithmSpecification.ContainerEntrypoint) == 0 || req.AlgorithmSpecification.ContainerEntrypoint[0] == "" {
		return "", 0, 0, qshare.Errorf(qshare.EINVALID, `serviceRequestPayload has no AlgorithmSpecification.ContainerEntrypoint: the Slurm executor runs a command on the nodes and needs one, for example "ContainerEntrypoint": ["python3", "train.py"] (ContainerArguments are appended)`)
	}
	for _, a := range append(append([]string(nil), req.AlgorithmSpecification.ContainerEntrypoint...), req.AlgorithmSpecification.ContainerArguments...) {
		if strings.ContainsRune(a, 0) {
			return "", 0, 0, qshare.Errorf(qshare.EINVALID, "AlgorithmSpecification holds an argument with a NUL byte, which a command line cannot carry")
		}
	}
	typ, n, err := executor.InstanceOf(req, demand, "Slurm")
	if err != nil {
		return "", 0, 0, err
	}
	if _, err := e.o.Config.typeFor(typ); err != nil {
		return "", 0, 0, err
	}
	if _, err := checkpointRel(req); err != nil {
		return "", 0, 0, err
	}
	grace, err := executor.EnvironmentAndGrace(req)
	if err != nil {
		return "", 0, 0, err
	}
	return typ, n, grace, nil
}

// checkpointRel returns the checkpoint directory relative to the job's
// directory: SageMaker's LocalPath with its /opt/ml prefix mapped there.
func checkpointRel(req *trainingjob.Request) (string, error) {
	if req.CheckpointConfig == nil || strings.TrimSpace(req.CheckpointConfig.LocalPath) == "" {
		return "checkpoints", nil
	}
	lp := req.CheckpointConfig.LocalPath
	p := strings.TrimPrefix(filepath.ToSlash(filepath.Clean("/"+lp)), "/opt/ml")
	p = strings.TrimPrefix(p, "/")
	if p == "" || p == "." || strings.Contains("/"+lp+"/", "/../") || strings.ContainsAny(lp, "\x00\n") {
		return "", qshare.Errorf(qshare.EINVALID, "CheckpointConfig.LocalPath %q does not name a directory inside the job directory: give a path such as /opt/ml/checkpoints or checkpoints", lp)
	}
	return p, nil
}

// pathComponent checks that an ID can name a directory and a Slurm job.
func pathComponent(what, id string) error {
	if id == "" || id == "." || id == ".." || len(id) > 200 || strings.ContainsAny(id, "/\\\x00\n\r\t ,") {
		return qshare.Errorf(qshare.EINVALID, "slurm executor: %s %q cannot name a directory and a batch job: use letters, digits, '-' and '_'", what, id)
	}
	return nil
}

func (e *Executor) attemptDir(id string) string { return filepath.Join(e.root, "attempts", id) }

// startedMarker is the file the step runner writes just before it starts
// the attempt's command: from then on a stop warns the command.
func (e *Executor) startedMarker(attemptID string) string {
	return filepath.Join(e.attemptDir(attemptID), "started")
}

// jobName is the Slurm job name of an attempt.
func jobName(attemptID string) string { return "qshare-" + attemptID }

// comment is the --comment of an attempt's batch job: the attempt ID and
// the shared directory's tag, so that two servers on one cluster never
// adopt each other's jobs.
func (e *Executor) comment(attemptID string) string { return "qshare " + e.tag + " " + attemptID }

// Start writes the attempt's files and submits its batch job; it returns
// once the job's command runs on a node (the step runner has started it),
// or the job has ended, or after Options.StartWait with the job still
// pending in Slurm, whose business it then is to run it. Starting an
// attempt ID again, even after a restart or a crash between sbatch and
// its record, returns the same handle and never submits a second job.
func (e *Executor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	if err := pathComponent("attempt ID", s.AttemptID); err != nil {
		return executor.Handle{}, err
	}
	if err := pathComponent("job ID", s.JobID); err != nil {
		return executor.Handle{}, err
	}
	req, err := trainingjob.Parse(s.Payload)
	if err != nil {
		return executor.Handle{}, err
	}
	typ, nodes, grace, err := e.check(req, s.Demand)
	if err != nil {
		return executor.Handle{}, err
	}
	if _, err := e.userFor(s); err != nil {
		return executor.Handle{}, err
	}
	e.mu.Lock()
	if a, ok := e.attempts[s.AttemptID]; ok {
		e.mu.Unlock()
		if err := a.AwaitReady(ctx); err != nil {
			return executor.Handle{}, err
		}
		return a.handle, nil
	}
	a := &attempt{id: s.AttemptID, Slot: executor.NewSlot()}
	e.attempts[s.AttemptID] = a
	e.mu.Unlock()

	h, err := e.start(ctx, a, s, req, typ, nodes, grace)
	e.mu.Lock()
	if err != nil {
		a.StartErr = err
		delete(e.attempts, s.AttemptID)
	} else {
		a.handle = h
	}
	e.mu.Unlock()
	close(a.Ready)
	if err != nil {
		return h, err
	}
	e.kick()
	e.awaitRun(ctx, a)
	return h, nil
}

// awaitRun waits until the attempt's command runs (the step runner's
// "started" marker), the attempt ends, StartWait passes or ctx ends.
func (e *Executor) awaitRun(ctx context.Context, a *attempt) {
	marker := e.startedMarker(a.id)
	deadline := time.After(e.o.StartWait)
	for !e.fs.IsFile(marker) {
		select {
		case <-a.Done:
			return
		case <-ctx.Done():
			return
		case <-e.closed:
			return
		case <-deadline:
			return
		case <-time.After(20 * time.Millisecond):
		}
	}
}

func (e *Executor) start(ctx context.Context, a *attempt, s executor.Spec, req *trainingjob.Request, typ string, nodes int, grace time.Duration) (executor.Handle, error) {
	// Submitted before (a restart, or a crash before job.json): adopt.
	if rec, err := e.readRecord(s.AttemptID); err == nil {
		a.rec = rec
		return e.handleOf(a), nil
	}
	// While slurmctld does not answer, the attempt waits here (STARTING,
	// holding its capacity) and the submit is retried: each try first
	// looks for a batch job that an earlier one submitted without hearing
	// the answer, so there is never a second.
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		h, err := e.submit(ctx, a, s, req, typ, nodes, grace)
		if err == nil || !controllerDown(err.Error()) {
			return h, err
		}
		e.log.Warn("slurm executor: slurmctld does not answer; the submit is retried", "attempt", s.AttemptID, "in", delay, "err", err)
		select {
		case <-ctx.Done():
			return h, err
		case <-e.closed:
			return h, err
		case <-time.After(delay):
		}
	}
}

// submit adopts the attempt's batch job if Slurm lists one, else writes
// the attempt's files and submits it.
func (e *Executor) submit(ctx context.Context, a *attempt, s executor.Spec, req *trainingjob.Request, typ string, nodes int, grace time.Duration) (executor.Handle, error) {
	dir := e.attemptDir(s.AttemptID)
	// step.json is written before every sbatch: without it no batch job
	// of this attempt can exist, and the squeue is saved (one command of
	// three per start).
	if e.fs.IsFile(filepath.Join(dir, "step.json")) {
		id, err := e.findJob(ctx, s.AttemptID)
		if err != nil {
			return executor.Handle{}, err
		}
		if id > 0 {
			a.rec = jobRecord{SlurmJob: id, StartedAt: time.Now().UTC(), Grace: grace, JobDir: filepath.Join(e.root, "jobs", s.JobID)}
			e.stepFacts(s.AttemptID, &a.rec)
			if err := e.writeRecord(s.AttemptID, a.rec); err != nil {
				return executor.Handle{}, err
			}
			return e.handleOf(a), nil
		}
	}
	it, _ := e.o.Config.typeFor(typ)
	ck, _ := checkpointRel(req)
	job := filepath.Join(e.root, "jobs", s.JobID)
	l := []string{job, filepath.Join(job, "model"), filepath.Join(job, "output"), filepath.Join(job, "output", "data"),
		filepath.Join(job, "input"), filepath.Join(job, "input", "data"), filepath.Join(job, ck), dir}
	for _, d := range l {
		if err := e.fs.MkdirAll(d, 0o755); err != nil {
			return executor.Handle{}, e.fileErr("preparing the job's directory", err, s.JobID)
		}
	}
	u, err := e.userFor(s)
	if err != nil {
		return executor.Handle{}, err
	}
	if u != nil {
		// The job's and the attempt's directories are the user's alone
		// (their parents, root's, let others only pass through).
		for _, d := range []string{job, dir} {
			if err := os.Chmod(d, 0o700); err != nil {
				return executor.Handle{}, e.fileErr("making the job's directory private", err, s.JobID)
			}
		}
	}
	if err := e.give(u, s.JobID, l...); err != nil {
		return executor.Handle{}, err
	}
	sp := stepSpec{
		Argv:            append(append([]string(nil), req.AlgorithmSpecification.ContainerEntrypoint...), req.AlgorithmSpecification.ContainerArguments...),
		Env:             e.jobEnv(s, req, job, ck, typ),
		JobDir:          job,
		HyperParameters: req.HyperParameters,
		InputData:       map[string]any{},
		InstanceType:    typ,
		GPUs:            it.GPUs(),
		Exclusive:       !it.ShareNodes,
		InBatch:         nodes == 1,
	}
	for name, c := range data.InputDataConfig(req) {
		sp.InputData[name] = c
	}
	// The step runner wraps the command in the data wrapper, which each
	// node makes its own instance's (wrapData).
	p, err := data.NewPlan(req, data.Attempt{TrainingJobName: s.TrainingJobName(req), Instances: nodes}, data.Dirs{
		Input: filepath.Join(job, "input"), Model: filepath.Join(job, "model"), OutputData: filepath.Join(job, "output", "data"), Checkpoint: filepath.Join(job, ck)})
	if err != nil {
		return executor.Handle{}, err
	}
	if !p.Empty() {
		sp.Data = &data.Wrapper{Plan: p, Endpoint: e.o.S3, Root: job, FailureFile: filepath.Join(job, "output", "failure")}
	}
	b, _ := json.Marshal(sp)
	if err := e.fs.WriteFile(filepath.Join(dir, "step.json"), b, 0o600); err != nil {
		return executor.Handle{}, e.fileErr("writing step.json", err, s.JobID)
	}
	if err := e.give(u, s.JobID, filepath.Join(dir, "step.json")); err != nil { // the step runner reads it as the user
		return executor.Handle{}, err
	}
	if err := e.fs.WriteFile(filepath.Join(dir, "job.sh"), []byte(e.script(s.AttemptID, nodes)), 0o700); err != nil {
		return executor.Handle{}, e.fileErr("writing the batch script", err, s.JobID)
	}
	args := []string{"--parsable", "--job-name=" + jobName(s.AttemptID), "--comment=" + e.comment(s.AttemptID),
		"--partition=" + it.Partition, "--nodes=" + strconv.Itoa(nodes), "--ntasks-per-node=1",
		"--output=" + filepath.Join(dir, "slurm.log"), "--open-mode=append", "--chdir=" + job,
		"--export=ALL", "--no-requeue"}
	if it.ShareNodes {
		args = append(args, "--cpus-per-task="+strconv.Itoa(it.CPUs), "--mem="+it.Memory)
	} else {
		args = append(args, "--exclusive")
	}
	if it.Gres != "" {
		args = append(args, "--gres="+it.Gres)
	}
	if e.o.Config.Account != "" {
		args = append(args, "--account="+e.o.Config.Account)
	}
	if u != nil {
		args = append(args, "--uid="+strconv.Itoa(u.uid), "--gid="+strconv.Itoa(u.gid))
	}
	args = append(args, filepath.Join(dir, "job.sh"))
	out, err := e.commandEnv(ctx, sbatchEnv(e.o.Env), "sbatch", args...)
	if err != nil {
		return executor.Handle{}, qshare.Errorf(qshare.EINTERNAL, "slurm executor: submitting attempt %s: %v", s.AttemptID, err)
	}
	id, err := ParseJobID(out)
	if err != nil {
		return executor.Handle{}, qshare.Errorf(qshare.EINTERNAL, "slurm executor: %v", err)
	}
	a.rec = jobRecord{SlurmJob: id, StartedAt: time.Now().UTC(), Grace: grace, JobDir: job, InBatch: nodes == 1,
		Uploads: p.Uploads()}
	if err := e.writeRecord(s.AttemptID, a.rec); err != nil {
		return executor.Handle{}, err
	}
	return e.handleOf(a), nil
}

// script is the batch job's script for an attempt on nodes nodes. It holds
// no value a job chose: the command and its environment travel in
// step.json. On one node the script runs the step runner itself, in the
// batch step, which is already on the node: a step of its own (srun) would
// add Slurm's step set-up to every such job, the most of what a short job
// costs (docs/slurm.md, "Measured"). On more, srun starts the step runner
// once per node.
func (e *Executor) script(attemptID string, nodes int) string {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by qshare's Slurm executor for attempt " + attemptID + ".\n")
	for _, k := range []string{"PATH", "SLURM_CONF"} {
		if v, ok := getenv(e.o.Env, k); ok {
			b.WriteString("export " + k + "=" + shellQuote(v) + "\n")
		}
	}
	// The command's output goes to output.log (on more than one node
	// straight from each node's slurmstepd); srun's own words (a task's
	// exit code, which the exit records carry anyway) and the batch
	// script's go to slurm.log.
	out := shellQuote(filepath.Join(e.attemptDir(attemptID), "output.log"))
	step := func() {
		for _, a := range e.o.Step {
			b.WriteString(" " + shellQuote(a))
		}
		b.WriteString(" " + StepArg + " " + shellQuote(e.root) + " " + shellQuote(e.attemptDir(attemptID)))
	}
	if nodes == 1 {
		b.WriteString("exec")
		step()
		b.WriteString(` "$SLURMD_NODENAME" >>` + out + " 2>&1\n")
		return b.String()
	}
	b.WriteString(`hosts=$(scontrol show hostnames "$SLURM_JOB_NODELIST") || exit 70` + "\n")
	b.WriteString("exec srun --quiet --export=ALL --kill-on-bad-exit=0 --ntasks-per-node=1 --nodes=\"$SLURM_JOB_NUM_NODES\" --open-mode=append --output=" + out + " --error=" + out)
	step()
	b.WriteString(` "$hosts"` + "\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func getenv(env []string, k string) (string, bool) {
	v, ok := "", false
	for _, kv := range env {
		if val, found := strings.CutPrefix(kv, k+"="); found {
			v, ok = val, true
		}
	}
	return v, ok
}

// jobEnv is the attempt's environment but for the per-node variables the
// step runner adds.
func (e *Executor) jobEnv(s executor.Spec, req *trainingjob.Request, job, ck, typ string) []string {
	env := executor.TrainingEnv(s, req, executor.TrainingDirs{
		Model: filepath.Join(job, "model"), Output: filepath.Join(job, "output"), OutputData: filepath.Join(job, "output", "data"),
		Input: filepath.Join(job, "input"), Checkpoint: filepath.Join(job, ck)}, typ)
	for _, k := range []string{"PATH", "HOME", "LANG", "TZ"} {
		if _, set := req.Environment[k]; set {
			continue
		}
		if v, ok := getenv(e.o.Env, k); ok {
			env[k] = v
		}
	}
	return executor.EnvList(env)
}

// fileErr describes a refused or failed file operation without server paths.
func (e *Executor) fileErr(what string, err error, jobID string) error {
	rel := process.RelPath(err)
	rel = strings.TrimPrefix(rel, "jobs/"+jobID+"/")
	if process.IsLinkError(err) {
		return qshare.Errorf(qshare.EINVALID, "slurm executor: %s: %s in the job's directory is a link, or not what qshare made there", what, rel)
	}
	return qshare.Errorf(qshare.EINTERNAL, "slurm executor: %s: %s: %v", what, rel, errors.Unwrap(err))
}

func (e *Executor) handleOf(a *attempt) executor.Handle {
	st, _ := json.Marshal(a.rec)
	return executor.Handle{AttemptID: a.id, StartedAt: a.rec.StartedAt, LogPath: filepath.Join(e.attemptDir(a.id), "output.log"), State: st}
}

func (e *Executor) readRecord(attemptID string) (jobRecord, error) {
	var r jobRecord
	if err := e.readJSON(filepath.Join(e.attemptDir(attemptID), "job.json"), &r); err != nil || r.SlurmJob <= 0 {
		if isNotExist(err) {
			return r, err
		}
		return r, fmt.Errorf("job.json of %s is damaged, or not the server's (%v)", attemptID, err)
	}
	return r, nil
}

// stepFacts fills in what a record made again without job.json (after a
// crash between sbatch and the record) cannot learn from Slurm: from the
// attempt's step.json, when the server owns it, whether the command runs
// in the batch step and whether the first node uploads. Where step.json
// cannot be trusted (the job's user owns it), the attempt is taken to
// upload: Stop then waits for an upload after the kill that may not come,
// rather than kill one that does.
func (e *Executor) stepFacts(attemptID string, r *jobRecord) {
	var sp stepSpec
	if err := e.readJSON(filepath.Join(e.attemptDir(attemptID), "step.json"), &sp); err != nil {
		r.Uploads = true
		return
	}
	r.InBatch = sp.InBatch
	r.Uploads = sp.Data != nil && sp.Data.Plan.Uploads()
}

func (e *Executor) writeRecord(attemptID string, r jobRecord) error {
	dir := e.attemptDir(attemptID)
	if err := e.fs.MkdirAll(dir, 0o755); err != nil {
		return e.fileErr("recording the batch job", err, "")
	}
	b, _ := json.Marshal(r)
	if err := e.fs.WriteFileAtomic(filepath.Join(dir, "job.json"), b); err != nil {
		return e.fileErr("recording the batch job", err, "")
	}
	return nil
}

// command runs a Slurm command and returns its standard output; the error
// holds its standard error.
func (e *Executor) command(ctx context.Context, name string, args ...string) (string, error) {
	return e.commandEnv(ctx, e.o.Env, name, args...)
}

// sbatchEnv is the environment sbatch runs in, and so (with
// --export=ALL) the batch job's: PATH and the SLURM_* and SBATCH_*
// variables of env, nothing else, so that the server's environment (its
// credentials, tokens) does not reach jobs. It replaces --export=NONE,
// which Slurm 22.05 treats as --get-user-env: slurmd then runs the
// user's login shell (su - user -c … slurmstepd getenv) before every
// batch job, with an 8 s timeout, and a trivial job held its CPU slot
// for about 10 s (docs/slurm.md, the benchmark).
func sbatchEnv(env []string) []string {
	var out []string
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		if k == "PATH" || strings.HasPrefix(k, "SLURM_") || strings.HasPrefix(k, "SBATCH_") {
			out = append(out, kv)
		}
	}
	return out
}

// commandEnv is command with the environment env.
func (e *Executor) commandEnv(ctx context.Context, env []string, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, e.o.CommandTimeout)
	defer cancel()
	path, err := lookPath(name, e.o.Env)
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = env
	cmd.Dir = e.root
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err = cmd.Run()
	switch {
	case err != nil && ctx.Err() == context.DeadlineExceeded:
		err = fmt.Errorf("%s did not answer within %v (is slurmctld up?): %s", name, e.o.CommandTimeout, strings.TrimSpace(errb.String()))
	case err != nil:
		err = fmt.Errorf("%s: %w: %s", name, err, strings.TrimSpace(errb.String()))
	}
	e.noteCommand(name, err)
	return out.String(), err
}

func lookPath(name string, env []string) (string, error) {
	path, _ := getenv(env, "PATH")
	for _, d := range filepath.SplitList(path) {
		p := filepath.Join(d, name)
		if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return exec.LookPath(name)
}

// ParseJobID reads the job ID from `sbatch --parsable`: "ID" or "ID;CLUSTER",
// then a newline. The benchmark's Slurm half (internal/bench/slurm) reads
// its submissions with it too.
func ParseJobID(out string) (int64, error) {
	s := strings.TrimSpace(out)
	if i := strings.IndexByte(s, ';'); i >= 0 {
		s = s[:i]
	}
	id, err := strconv.ParseInt(s, 10, 64)
	if err != nil || id <= 0 {
		return 0, fmt.Errorf("sbatch printed %q; expected a job ID", strings.TrimSpace(out))
	}
	return id, nil
}

// sep separates squeue's fields: a control character that no job name,
// state, reason or comment that qshare reads can hold unnoticed.
const sep = "\x1f"

// squeueFormat asks for the fields qshare reads, the comment last so that
// nothing in it can shift the others.
var squeueFormat = "JobID:" + sep + ",State:" + sep + ",Reason:" + sep + ",exit_code:" + sep + ",Comment:"

// jobState is one line of squeue, or of sacct for a job squeue no
// longer lists.
type jobState struct {
	ID       int64
	State    string
	Reason   string
	WaitStat int // the batch script's wait status, as squeue's exit_code
	Comment  string
	Name     string // the job's name: sacct's only (squeue's rows are asked for by ID or by name)
}

// parseSqueue reads squeue output in squeueFormat.
func parseSqueue(out string) (map[int64]jobState, error) {
	rows, err := splitRows("squeue", out, 5)
	if err != nil {
		return nil, err
	}
	m := map[int64]jobState{}
	for _, r := range rows {
		f := r.fields
		ws, _ := strconv.Atoi(strings.TrimSpace(f[3]))
		m[r.id] = jobState{ID: r.id, State: strings.TrimSpace(f[1]), Reason: strings.TrimSpace(f[2]), WaitStat: ws, Comment: strings.TrimSpace(f[4])}
	}
	return m, nil
}

// row is one line of a Slurm command's output: its fields, the first
// read as the job ID.
type row struct {
	id     int64
	fields []string
}

// splitRows splits the output of the command cmd, n fields a line
// separated by sep (the last holds the rest of the line, separators
// included), and reads each line's job ID; blank lines are skipped, and
// any other line is an error.
func splitRows(cmd, out string, n int) ([]row, error) {
	var rows []row
	for _, line := range strings.Split(out, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		f := strings.SplitN(line, sep, n)
		if len(f) != n {
			return nil, fmt.Errorf("%s printed %q; expected %d fields", cmd, line, n)
		}
		id, err := strconv.ParseInt(strings.TrimSpace(f[0]), 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%s printed the job ID %q", cmd, f[0])
		}
		rows = append(rows, row{id: id, fields: f})
	}
	return rows, nil
}

// terminal reports whether Slurm is done with a job in this state: its
// processes are gone and its nodes released.
func terminal(state string) bool {
	for _, s := range []string{"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "PREEMPTED", "OUT_OF_MEMORY", "BOOT_FAIL", "DEADLINE", "SPECIAL_EXIT"} {
		if strings.HasPrefix(state, s) {
			return true
		}
	}
	return false
}

// queryJobs asks squeue about the attempts' batch jobs; a job squeue no
// longer lists (past MinJobAge) is asked of sacct where the cluster keeps
// accounting, and is in the result if sacct says it ended. Jobs known to
// neither are absent from the result. Only squeue's failure is an error.
func (e *Executor) queryJobs(ctx context.Context, as []*attempt) (map[int64]jobState, error) {
	if len(as) == 0 {
		return map[int64]jobState{}, nil
	}
	s := make([]string, len(as))
	for i, a := range as {
		s[i] = strconv.FormatInt(a.rec.SlurmJob, 10)
	}
	out, err := e.command(ctx, "squeue", "--noheader", "--states=all", "--jobs="+strings.Join(s, ","), "--Format="+squeueFormat)
	m := map[int64]jobState{}
	switch {
	case err != nil && !strings.Contains(err.Error(), "Invalid job id"):
		return nil, err
	case err == nil:
		if m, err = parseSqueue(out); err != nil {
			return nil, err
		}
	}
	gone := map[int64]string{}
	for _, a := range as {
		if _, ok := m[a.rec.SlurmJob]; !ok {
			gone[a.rec.SlurmJob] = jobName(a.id)
		}
	}
	for id, j := range e.accounted(ctx, gone) {
		e.log.Info("slurm executor: a batch job that squeue no longer lists has ended, says sacct", "slurmJob", id, "state", j.State, "exitCode", j.WaitStat>>8, "signal", j.WaitStat&0x7f)
		m[id] = j
	}
	return m, nil
}

// findJob looks for the batch job of an attempt by its name and comment;
// 0 when there is none.
func (e *Executor) findJob(ctx context.Context, attemptID string) (int64, error) {
	out, err := e.command(ctx, "squeue", "--noheader", "--states=all", "--name="+jobName(attemptID), "--Format="+squeueFormat)
	if err != nil {
		return 0, qshare.Errorf(qshare.EINTERNAL, "slurm executor: looking for attempt %s's batch job: %v", attemptID, err)
	}
	m, err := parseSqueue(out)
	if err != nil {
		return 0, err
	}
	var best int64
	for id, j := range m {
		if j.Comment == e.comment(attemptID) && id > best {
			best = id
		}
	}
	return best, nil
}

func (e *Executor) kick() {
	select {
	case e.wake <- struct{}{}:
	default:
	}
}

// poll asks squeue about every attempt not known to have ended, and
// finishes those Slurm is done with.
func (e *Executor) poll() {
	t := time.NewTicker(e.o.PollInterval)
	defer t.Stop()
	for {
		select {
		case <-e.closed:
			return
		case <-t.C:
		case <-e.wake:
		}
		e.mu.Lock()
		var live []*attempt
		for _, a := range e.attempts {
			select {
			case <-a.Ready:
			default:
				continue
			}
			if !a.Ended && a.StartErr == nil {
				live = append(live, a)
			}
		}
		e.mu.Unlock()
		if len(live) == 0 {
			e.checkHealth()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.o.CommandTimeout)
		m, err := e.queryJobs(ctx, live)
		cancel()
		if err != nil {
			e.log.Warn("slurm executor: squeue failed; attempts keep their state", "err", err)
			continue
		}
		for _, a := range live {
			j, known := m[a.rec.SlurmJob]
			if known && !terminal(j.State) {
				e.mu.Lock()
				a.state, a.reason = j.State, j.Reason
				e.mu.Unlock()
				continue
			}
			e.finish(a, j, known)
		}
	}
}

// finish records the end of an attempt that Slurm is done with: from the
// step runners' records, else from what Slurm says.
func (e *Executor) finish(a *attempt, j jobState, known bool) {
	x := e.exitOf(a, j, known)
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.Ended {
		return
	}
	a.Exit, a.Ended = x, true
	close(a.Done)
}

func (e *Executor) exitOf(a *attempt, j jobState, known bool) executor.Exit {
	e.mu.Lock()
	stopping, killed := a.Stopping, a.killed
	e.mu.Unlock()
	x := executor.Exit{AttemptID: a.id, Stopped: stopping, At: time.Now().UTC()}
	if !stopping && known && nodeFailed(j.State) {
		// Whatever the nodes recorded (the survivors' SIGTERM), the job's
		// command did not fail: its capacity did. Lost has the daemon
		// requeue the job without counting a failed attempt.
		x.ExitCode, x.Lost = -1, true
		x.Reason = "Slurm ended the batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + ": " + stateAndReason(j) + ": a node of the job failed, so the attempt is requeued without using a retry"
		return x
	}
	recs := e.exitRecords(a.id)
	if len(recs) > 0 {
		r := recs[0]
		for _, c := range recs {
			if c.ExitCode != 0 || c.Signal != "" {
				r = c
				break
			}
		}
		x.ExitCode, x.Signal, x.At = r.ExitCode, r.Signal, r.At
		switch {
		case r.Reason != "":
			x.Reason = r.Reason
		case r.Signal == "SIGKILL" && killed:
			x.Reason = data.KilledReason
		case r.Signal != "":
			x.Reason = "Essential process terminated by signal " + r.Signal
		default:
			x.Reason = fmt.Sprintf("Essential process exited with code %d", r.ExitCode)
		}
		if !x.Succeeded() && !stopping {
			if line := e.failureLine(a); line != "" {
				x.Reason = line
			}
		}
		for _, c := range recs { // the first node's runner uploads
			x.Reason = data.AfterKillReason(x.Reason, c.Upload)
		}
		// Slurm's own end of the job (from squeue, or from sacct for a job
		// squeue forgot) says what the records cannot: who ended it.
		switch {
		case stopping || !known:
		case strings.HasPrefix(j.State, "CANCELLED"):
			x.Reason = "The batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + " was cancelled in Slurm, not by qshare (scancel): " + x.Reason
		case slurmEnded(j.State):
			x.Reason = "Slurm ended the batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + ": " + stateAndReason(j) + ": " + x.Reason
		}
		return x
	}
	// No node recorded an end: the command never ran, or was killed with
	// its step runner.
	x.ExitCode = -1
	switch {
	case killed:
		x.Signal = "SIGKILL"
		x.Reason = data.KilledReason
	case stopping:
		x.Signal = "SIGTERM"
		if known && j.WaitStat&0x7f != 0 {
			x.Signal = signalName(sigOf(j.WaitStat))
		}
		x.Reason = "Stopped before the job's command ran to its end (batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + ", " + orGone(j.State, known) + ")"
	case known && strings.HasPrefix(j.State, "CANCELLED"):
		x.Reason = "The batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + " was cancelled in Slurm, not by qshare (scancel)"
	case known && slurmEnded(j.State):
		x.Reason = "Slurm ended the batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + ": " + stateAndReason(j)
	default:
		x.Lost = true
		x.Reason = "Lost: batch job " + strconv.FormatInt(a.rec.SlurmJob, 10) + " ended (" + orGone(j.State, known) + ") without the step runner recording how the command ended (see slurm.log of the attempt in the shared directory)"
	}
	return x
}

// slurmEnded reports a job that Slurm ended for a reason of its own
// (TIMEOUT, PREEMPTED, OUT_OF_MEMORY, DEADLINE, …), not because its
// batch script ended (COMPLETED, FAILED) or someone cancelled it.
func slurmEnded(state string) bool {
	return terminal(state) && state != "COMPLETED" && state != "FAILED" && !strings.HasPrefix(state, "CANCELLED")
}

// nodeFailed reports a job that Slurm ended because its nodes failed
// (NODE_FAIL) or never booted (BOOT_FAIL).
func nodeFailed(state string) bool {
	return strings.HasPrefix(state, "NODE_FAIL") || strings.HasPrefix(state, "BOOT_FAIL")
}

// stateAndReason is "STATE (reason)", or the state alone where Slurm gave
// no reason (sacct's "None").
func stateAndReason(j jobState) string {
	if j.Reason == "" {
		return j.State
	}
	return j.State + " (" + j.Reason + ")"
}

func sigOf(ws int) syscall.Signal { return syscall.Signal(ws & 0x7f) }

func orGone(state string, known bool) string {
	if !known {
		return "no longer known to Slurm"
	}
	return state
}

// exitRecords reads the nodes' exit records, in node order.
func (e *Executor) exitRecords(attemptID string) []exitRecord {
	dir := e.attemptDir(attemptID)
	ents, err := e.fs.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []exitRecord
	for _, d := range ents {
		n := d.Name()
		if !strings.HasPrefix(n, "exit-") || !strings.HasSuffix(n, ".json") {
			continue
		}
		b, err := e.fs.ReadFile(filepath.Join(dir, n))
		if err != nil {
			continue
		}
		var r exitRecord
		if json.Unmarshal(b, &r) == nil {
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Host < out[j].Host })
	return out
}

// failureLine is the first line of SageMaker's failure file, which the job
// may write to output/failure; "" if none. It is the job's file: it is read
// without following links, and at most 1 KiB of it.
func (e *Executor) failureLine(a *attempt) string {
	jobDir := a.rec.JobDir
	if jobDir == "" {
		// A record from before job.json named it: step.json, if the
		// server's own.
		var sp stepSpec
		if e.readJSON(filepath.Join(e.attemptDir(a.id), "step.json"), &sp) != nil {
			return ""
		}
		jobDir = sp.JobDir
	}
	f, err := e.fs.OpenFile(filepath.Join(jobDir, "output", "failure"), os.O_RDONLY, 0)
	if err != nil {
		return ""
	}
	defer f.Close()
	buf := make([]byte, 1024)
	n, _ := io.ReadFull(f, buf)
	line, _, _ := strings.Cut(string(buf[:n]), "\n")
	return strings.TrimSpace(line)
}

// Stop sends SIGTERM to the processes of the attempt's job steps
// (scancel --signal=TERM; for a one-node attempt, whose command runs in
// the batch step, --batch: the step runner passes it on), and after the grace period (the job's
// QSHARE_STOP_GRACE, else grace, else Options.StopGrace) has the step
// runners kill the command and upload its model, output and checkpoints
// (endGrace, killFile), and only when the job outlives that, SIGKILL to
// every process of the job, the batch script's included (scancel
// --signal=KILL --full), then cancels the job. The polite signal leaves out the batch
// script on purpose: with --full it reaches srun too, and srun answers a
// SIGTERM by ending its step at once, which would cut the job's own
// checkpoint short and lose the step runner's record of the exit. It returns at once; Wait reports the end once Slurm
// does, so the capacity stays held until then.
func (e *Executor) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	a, stop, err := executor.BeginStop(ctx, &e.mu, e.attempts, attemptID)
	if !stop {
		return err
	}
	// The state is the last poll's: a job that has started since (its
	// step runner wrote the marker Start waits for) is warned first.
	e.mu.Lock()
	pending := a.state == "PENDING"
	e.mu.Unlock()
	pending = pending && !e.fs.IsFile(e.startedMarker(attemptID))
	g := executor.StopGrace(a.rec.Grace, grace, e.o.StopGrace)
	id := strconv.FormatInt(a.rec.SlurmJob, 10)
	if !pending {
		// The stop and its deadline are recorded: a stop asked for again
		// after the server's restart (the daemon does) keeps the first
		// one's deadline, not a grace period anew.
		left, err := e.fs.KeepStop(filepath.Join(e.attemptDir(attemptID), stopFile), g, time.Now())
		if err != nil {
			e.log.Warn("slurm executor: cannot record a stop; a restart would give it its grace period anew", "attempt", attemptID, "err", err)
		}
		g = left
	}
	if pending {
		// Nothing runs yet: no one to warn.
		if _, err := e.command(ctx, "scancel", id); err != nil {
			return qshare.Errorf(qshare.EINTERNAL, "slurm executor: cancelling attempt %s: %v", attemptID, err)
		}
		e.kick()
		return nil
	}
	term := []string{"--signal=TERM", id}
	if a.rec.InBatch {
		term = []string{"--signal=TERM", "--batch", id} // the step runner passes it on
	}
	if _, err := e.command(ctx, "scancel", term...); err != nil {
		// A job that has just started or ended: cancel it outright.
		e.log.Info("slurm executor: scancel --signal=TERM failed; the batch job is cancelled outright", "attempt", attemptID, "slurmJob", id, "err", err)
		e.command(ctx, "scancel", id) //nolint:errcheck // the poll reports its end either way
	}
	go func() {
		select {
		case <-a.Done:
			return
		case <-e.closed:
			return
		case <-time.After(g):
		}
		e.mu.Lock()
		a.killed = true
		e.mu.Unlock()
		if e.endGrace(a, id) {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.o.CommandTimeout)
		defer cancel()
		e.command(ctx, "scancel", "--signal=KILL", "--full", id) //nolint:errcheck
		e.kick()
		// The job ends once Slurm has seen its processes gone (with
		// proctrack/linuxproc that takes it a few seconds of backing
		// off); cancel only a job that outlives the kill.
		select {
		case <-a.Done:
		case <-e.closed:
		case <-time.After(5 * time.Second):
			e.command(ctx, "scancel", id) //nolint:errcheck
			e.kick()
		}
	}()
	e.kick()
	return nil
}

// endGrace has the step runners of attempt a (batch job id) kill its
// command at the end of a stop's grace period and upload its model
// (killFile), and waits for the job to end: 5 s, or, for an attempt that
// uploads, data.UploadAfterKillLimit and 30 s. It returns true when the
// job ended, false when Slurm must kill what is left.
func (e *Executor) endGrace(a *attempt, id string) bool {
	if err := e.fs.WriteFileAtomic(filepath.Join(e.attemptDir(a.id), killFile), nil); err != nil {
		e.log.Info("slurm executor: cannot write the kill file; the batch job is killed, with no upload", "attempt", a.id, "slurmJob", id, "err", err)
		return false
	}
	sig := []string{"--signal=CONT", id}
	if a.rec.InBatch {
		sig = []string{"--signal=CONT", "--batch", id}
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.o.CommandTimeout)
	_, err := e.command(ctx, "scancel", sig...)
	cancel()
	if err != nil {
		return false
	}
	e.kick()
	limit := 5 * time.Second
	if a.rec.Uploads {
		limit = data.UploadAfterKillLimit + 30*time.Second
	}
	select {
	case <-a.Done:
		return true
	case <-e.closed:
		return true
	case <-time.After(limit):
		return false
	}
}

// Wait blocks until Slurm reports the attempt's batch job ended, and
// returns how.
func (e *Executor) Wait(ctx context.Context, attemptID string) (executor.Exit, error) {
	return executor.WaitFor(ctx, &e.mu, e.attempts, attemptID)
}

// Recover re-attaches to an attempt started before a restart, from its
// job.json or, when the server died before writing it, from the batch
// job's name and comment: Running while Slurm runs or holds the job,
// Exited when it ended (its exit from the step runners' records, or one
// marked Lost with Slurm's reason when a node failed or no record was
// written), Lost when nothing is known of it.
func (e *Executor) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	if err := pathComponent("attempt ID", h.AttemptID); err != nil {
		return executor.Lost, nil
	}
	e.mu.Lock()
	if a, ok := e.attempts[h.AttemptID]; ok {
		e.mu.Unlock()
		return executor.Recovered(ctx, &e.mu, &a.Slot)
	}
	a := &attempt{id: h.AttemptID, Slot: executor.NewSlot()}
	e.attempts[h.AttemptID] = a
	e.mu.Unlock()
	r, err := e.recover(ctx, a)
	e.mu.Lock()
	if err != nil || r == executor.Lost {
		a.StartErr = executor.ErrUnknownAttempt
		delete(e.attempts, h.AttemptID)
	} else {
		a.handle = e.handleOf(a)
	}
	e.mu.Unlock()
	close(a.Ready)
	e.kick()
	return r, err
}

func (e *Executor) recover(ctx context.Context, a *attempt) (executor.Recovery, error) {
	rec, err := e.readRecord(a.id)
	if err != nil {
		id, ferr := e.findJob(ctx, a.id)
		if ferr != nil {
			return 0, ferr
		}
		if id == 0 {
			return executor.Lost, nil
		}
		rec = jobRecord{SlurmJob: id, StartedAt: time.Now().UTC()}
		e.stepFacts(a.id, &rec)
		if err := e.writeRecord(a.id, rec); err != nil {
			return 0, err
		}
	}
	a.rec = rec
	m, err := e.queryJobs(ctx, []*attempt{a})
	if err != nil {
		return 0, qshare.Errorf(qshare.EINTERNAL, "slurm executor: asking Slurm about attempt %s: %v", a.id, err)
	}
	j, known := m[rec.SlurmJob]
	if known && !terminal(j.State) {
		a.state, a.reason = j.State, j.Reason
		return executor.Running, nil
	}
	// An exit that is Lost (a node failed, or the step runner recorded
	// nothing) is still Exited, so that its reason reaches the job's
	// status: Recover's own Lost carries none.
	a.Exit, a.Ended = e.exitOf(a, j, known), true
	close(a.Done)
	return executor.Exited, nil
}

// Forget drops an ended attempt from memory.
func (e *Executor) Forget(attemptID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.attempts[attemptID]; ok && a.Ended {
		delete(e.attempts, attemptID)
	}
}

// Close stops the executor's polling. Batch jobs keep running.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() {
		close(e.closed)
		e.fs.Close()
	})
	return nil
}

// isNotExist reports a missing file.
func isNotExist(err error) bool { return errors.Is(err, fs.ErrNotExist) }
