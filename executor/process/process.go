// Package process is the executor that runs training jobs as processes on
// this host: qshare's embedded default, for a shared GPU box or a
// workstation. The daemon calls it through executor.Executor.
//
// A job's command is its payload's ContainerEntrypoint followed by its
// ContainerArguments (the TrainingImage is recorded, not pulled). Attempts
// run under a supervisor process: the executor's own binary re-executed with
// SupervisorEnv set (see MaybeSupervise), started once per executor, in a
// session of its own, so that attempts outlive a server that is killed. The
// supervisor starts each job in its own process group, in the job's
// directory, copies its output to a capped, rotated log, carries out stops
// (SIGTERM to the group, SIGKILL after the grace period) even while no
// server runs, waits until every process of the job is gone, and then writes
// the exit status atomically to exit.json. When the server goes away the
// supervisor takes no new jobs and exits after the last of its jobs; a new
// server starts a new supervisor.
//
// On disk, under the data directory:
//
//	jobs/<jobID>/                    the working directory of every attempt
//	  input/config/                  hyperparameters.json, resourceconfig.json, inputdataconfig.json
//	  model/ output/ output/data/    SM_MODEL_DIR, SM_OUTPUT_DIR, SM_OUTPUT_DATA_DIR
//	  checkpoints/                   SM_CHECKPOINT_DIR (or CheckpointConfig.LocalPath)
//	attempts/<attemptID>/            launched (the attempt's record: launch,
//	                                 start, end), stop.json, output.log[.1 …]
//	live/<attemptID>                 a second name of launched, from the launch
//	                                 until Forget
//	supervisor.log                   the supervisors' own complaints
//
// An attempt's records name its supervisor and its job by pid, start time
// and boot ID, so Recover after a restart, given only the attempt ID, tells
// a live attempt (Running) from one that ended while the server was down
// (Exited, with the status from exit.json) and from one never launched or
// whose fate is unknown (Lost); see recovery.go.
//
// GPUs are found at New (package gpu), and each attempt gets the GPUs its
// demand needs (instances × GPUs per instance of their type) through
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES. A GPU is held from Start
// until the attempt's processes are all gone, and never by two attempts.
package process

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"time"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/trainingjob"
)

// Defaults of Options.
const (
	DefaultStopGrace   = executor.DefaultStopGrace
	DefaultLogMaxBytes = 64 << 20
	DefaultLogKeep     = 2
	// EnvStopGrace is the payload Environment key of a job's own grace period.
	EnvStopGrace = executor.EnvStopGrace
)

// Options configure an Executor.
type Options struct {
	// DataDir holds the jobs' directories and the attempts' records. Required.
	DataDir string
	// StopGrace is the grace period of a Stop that gives none, for a job
	// whose payload does not set QSHARE_STOP_GRACE. Zero means
	// DefaultStopGrace.
	StopGrace time.Duration
	// GPUs restricts or names the host's GPUs (the --gpus flag); see
	// gpu.Discover. Empty means: ask nvidia-smi.
	GPUs []string
	// InstanceTypes is the path of a YAML file that overrides and extends
	// the built-in GPUs-per-instance-type table (gpu.File). Empty: built-in.
	InstanceTypes string
	// Supervisor is the command that starts a supervisor; it must run
	// MaybeSupervise first thing. Empty means this binary (os.Executable).
	Supervisor []string
	// LogMaxBytes caps one log file of an attempt; LogKeep old files are
	// kept after rotation. Zero means DefaultLogMaxBytes and DefaultLogKeep.
	LogMaxBytes int64
	LogKeep     int
	// Env is the server's environment, from which jobs take PATH, HOME,
	// LANG and TZ (defaultJobEnv) and the variables PassEnv names; nothing
	// else of it reaches a job. Nil means os.Environ(). The supervisor
	// process gets all of it (it runs qshare, not jobs).
	Env []string
	// PassEnv names more of the server's variables that every job gets
	// (--pass-env). Names starting with QSHARE_ are refused.
	PassEnv []string
	// RunAs is the Unix user (a name or a uid) every job runs as, with its
	// groups (--run-as); the job's directories are given to it. Empty
	// means the server's own user. Setting it needs a server that runs as
	// root (or as that user).
	RunAs string
	// S3 is the S3 store that jobs' channels are staged from and their
	// models, outputs and checkpoints go to (package data). The zero value
	// is AWS's own S3, with the SDK's credential chain as the job's user
	// sees it; qshare serve names its embedded store, or --s3-endpoint.
	S3 data.Endpoint
	// S3Keys, when set, grants each attempt S3 credentials of its own,
	// which its wrapper signs with instead of S3's, while it runs:
	// qshare serve's job keys (auth.JobKeys), by which the embedded store
	// takes a job's requests from another local user (--run-as) on a
	// server without --auth.
	S3Keys Grants
	// PollInterval is how often a recovered attempt is checked for its end.
	// Zero means 100ms.
	PollInterval time.Duration
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
	// NoOptML keeps jobs in the host's mount namespace even when the
	// server runs as root: they get no /opt/ml, and a payload that names
	// /opt/ml is refused, as on a server that is not root.
	NoOptML bool
	// CgroupRoot is where the cgroup hierarchy that each attempt gets a
	// cgroup in is mounted (--cgroup-root): a cgroup2 mount (v2), or a
	// directory of v1 controllers with freezer and pids. Empty means
	// DefaultCgroupRoot. Where no cgroup can be made there, attempts are
	// contained by their process group only, with a warning.
	CgroupRoot string
}

// Grants mints an attempt's S3 credentials (Options.S3Keys).
type Grants interface {
	// Grant returns the attempt's access key, the same one each time
	// (also after a restart, for a recovered attempt's wrapper).
	Grant(attemptID string) (keyID, secret string, err error)
	// Revoke ends the attempt's key.
	Revoke(attemptID string)
}

// Executor runs attempts as host processes. It is safe for concurrent use.
type Executor struct {
	o     Options
	fs    dataFS
	user  *jobUser  // nil: jobs run as the server's user
	env   []string  // what every job inherits from the server
	runAs userCache // the users of executor.Spec.RunAs
	table gpu.Table
	alloc *gpu.Allocator
	log   *slog.Logger

	mu       sync.Mutex
	attempts map[string]*attempt
	byDir    map[string]*attempt // attempts the supervisor reports on, by directory

	supMu sync.Mutex
	sup   *supClient

	closeOnce sync.Once
	closed    chan struct{}

	staging stagingProgress // data.go

	// optml: each attempt gets a mount namespace with its job's directory
	// at /opt/ml (optml_linux.go).
	optml bool
}

var (
	_ executor.Executor                = (*Executor)(nil)
	_ executor.CapacityChecker         = (*Executor)(nil)
	_ executor.PendingReasonsVersioner = (*Executor)(nil)
	_ executor.PendingReasoner         = (*Executor)(nil)
)

// state is what Handle.State holds.
type state struct {
	Dir        string        `json:"dir"`
	Supervisor identity      `json:"supervisor"`
	Job        identity      `json:"job"`
	GPUs       []string      `json:"gpus,omitempty"`
	Grace      time.Duration `json:"grace,omitempty"` // the job's QSHARE_STOP_GRACE, 0 if none
}

type attempt struct {
	id string
	executor.Slot

	handle    executor.Handle
	st        state
	sup       *supClient // the supervisor this executor gave the attempt to; nil if recovered
	following bool       // polled for its end (recovered, or its supervisor died)
}

// New returns a process executor. It finds the host's GPUs and loads the
// instance-type table; it fails with a *qshare.Error when either fails or
// DataDir is unusable.
func New(ctx context.Context, o Options) (*Executor, error) {
	if runtime.GOOS != "linux" {
		return nil, qshare.Errorf(qshare.EINVALID, "the process executor runs on Linux only (it relies on /proc and child subreapers): use --executor simulated on %s", runtime.GOOS)
	}
	if o.DataDir == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "process executor: no data directory given")
	}
	dd, err := filepath.Abs(o.DataDir)
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "process executor: data directory %q: %v", o.DataDir, err)
	}
	o.DataDir = dd
	if o.CgroupRoot != "" {
		if o.CgroupRoot, err = filepath.Abs(o.CgroupRoot); err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "process executor: cgroup root: %v", err)
		}
	}
	// jobs/ is traversed, never listed, by the jobs' users on the way to
	// their own directories; attempts/ (every job's log) is the server's.
	// A data directory made here is traversed as jobs/ is; made as a
	// parent of attempts/ it was 0700, which a job of --run-as cannot enter.
	if err := os.MkdirAll(dd, 0o711); err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "process executor: cannot create %s: %v", dd, err)
	}
	for _, d := range []struct {
		name string
		mode os.FileMode
	}{{"jobs", 0o711}, {"attempts", 0o700}} {
		d, mode := d.name, d.mode
		if err := os.MkdirAll(filepath.Join(dd, d), mode); err != nil {
			return nil, qshare.Errorf(qshare.EINVALID, "process executor: cannot create %s: %v", filepath.Join(dd, d), err)
		}
		// Spread the jobs' and attempts' directories over the file system
		// (see markTopDir); a file system without the attribute is fine.
		markTopDir(filepath.Join(dd, d))
	}
	o.StopGrace = executor.OrDefault(o.StopGrace, DefaultStopGrace)
	o.LogMaxBytes = executor.OrDefault(o.LogMaxBytes, DefaultLogMaxBytes)
	o.LogKeep = executor.OrDefault(o.LogKeep, DefaultLogKeep)
	o.PollInterval = executor.OrDefault(o.PollInterval, 100*time.Millisecond)
	if o.Env == nil {
		o.Env = os.Environ()
	}
	if err := checkPassEnv(o.PassEnv); err != nil {
		return nil, err
	}
	var ju *jobUser
	if o.RunAs != "" {
		if ju, err = lookupJobUser(o.RunAs); err != nil {
			return nil, err
		}
		if euid := os.Geteuid(); euid != 0 && uint32(euid) != ju.UID {
			return nil, qshare.Errorf(qshare.EINVALID, "--run-as %s needs a server that runs as root (it runs as uid %d): start it as root, or drop --run-as", o.RunAs, euid)
		}
		if err := checkReachable(filepath.Join(dd, "jobs"), ju); err != nil {
			return nil, err
		}
		// Jobs run as another user: the attempts' records and logs (every
		// job's output) are the server's alone.
		for _, d := range []string{"attempts", dirLive} {
			if err := os.Chmod(filepath.Join(dd, d), 0o700); err != nil && !errors.Is(err, os.ErrNotExist) {
				return nil, qshare.Errorf(qshare.EINVALID, "process executor: cannot make %s private to the server: %v", filepath.Join(dd, d), err)
			}
		}
	}
	if len(o.Supervisor) == 0 {
		self, err := os.Executable()
		if err != nil {
			return nil, qshare.Errorf(qshare.EINTERNAL, "process executor: cannot find my own binary to run supervisors: %v", err)
		}
		o.Supervisor = []string{self}
	}
	e := &Executor{o: o, fs: newDataFS(dd), user: ju, env: jobBaseEnv(o.Env, o.PassEnv, ju), attempts: map[string]*attempt{}, byDir: map[string]*attempt{}, closed: make(chan struct{}), log: o.Logger,
		optml: !o.NoOptML && optmlCapable()}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.table, e.alloc, err = gpu.Host(ctx, o.InstanceTypes, o.GPUs); err != nil {
		return nil, err
	}
	if err := e.recoverLive(); err != nil {
		return nil, qshare.Errorf(qshare.EINTERNAL, "process executor: cannot look for running attempts in %s: %v", filepath.Join(dd, dirLive), err)
	}
	return e, nil
}

// Name returns "process".
func (e *Executor) Name() string { return "process" }

// GPUs returns the host's GPUs as the executor found them.
func (e *Executor) GPUs() []gpu.GPU { return e.alloc.GPUs() }

// FreeGPUs returns how many of the host's GPUs no attempt holds.
func (e *Executor) FreeGPUs() int { return e.alloc.Free() }

// Table returns the GPUs-per-instance-type table in use.
func (e *Executor) Table() gpu.Table { return e.table }

// Validate checks that the payload names a command, a usable checkpoint
// path, local channels and environment, and that its demand needs no more
// GPUs than the host has.
func (e *Executor) Validate(payload string, demand qshare.Capacity) error {
	req, err := trainingjob.Parse(payload)
	if err != nil {
		return err
	}
	_, err = e.check(req, demand)
	return err
}

// ValidateRequest is Validate for a payload that the caller has already
// parsed with trainingjob.Parse (the daemon does, for the demand), so that a
// submit parses its payload once. It only reads req.
func (e *Executor) ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error {
	_, err := e.check(req, demand)
	return err
}

// check validates a parsed request and returns the job's own grace period.
func (e *Executor) check(req *trainingjob.Request, demand qshare.Capacity) (time.Duration, error) {
	if len(req.AlgorithmSpecification.ContainerEntrypoint) == 0 || req.AlgorithmSpecification.ContainerEntrypoint[0] == "" {
		return 0, qshare.Errorf(qshare.EINVALID, `serviceRequestPayload has no AlgorithmSpecification.ContainerEntrypoint: the process executor runs a host command and needs one, for example "ContainerEntrypoint": ["python3", "train.py"] (ContainerArguments are appended)`)
	}
	if _, err := checkpointRel(req); err != nil {
		return 0, err
	}
	if !e.optml && namesOptML(req.Command()) {
		return 0, qshare.Errorf(qshare.EINVALID, "the job's ContainerEntrypoint or ContainerArguments name /opt/ml, which this process executor cannot give its jobs: it binds each job's directory at /opt/ml in a mount namespace of the attempt's own only when qshare serve runs as root (it runs as uid %d). Run it as root, use the container executor, or name the job's directories by $SM_MODEL_DIR, $SM_CHANNEL_<NAME> and the other SM_* variables", os.Geteuid())
	}
	if err := validateEnvironment(req); err != nil {
		return 0, err
	}
	if err := data.Validate(req); err != nil {
		return 0, err
	}
	if err := executor.NoNetworkIsolation(req, "process"); err != nil {
		return 0, err
	}
	grace, err := executor.JobGrace(req)
	if err != nil {
		return 0, err
	}
	if host := e.alloc.Total(); host > 0 {
		if need := e.table.Need(demand); need > int64(host) {
			return 0, qshare.Errorf(qshare.EINVALID, "the job needs %d GPUs (%s) but this host has %d: ask for fewer instances or a smaller instance type", need, e.table.Describe(demand), host)
		}
	}
	return grace, nil
}

// CheckCapacity warns when a service environment with these limits can ask
// for more GPUs than the host has.
func (e *Executor) CheckCapacity(limits qshare.Capacity) string {
	need := e.table.Need(limits)
	host := int64(e.alloc.Total())
	switch {
	case need == 0 || need <= host:
		return ""
	case host == 0:
		return fmt.Sprintf("the capacity limits can run jobs that need up to %d GPUs (%s), but this host has no GPUs (nvidia-smi was not found and --gpus was not given): such jobs will run without GPUs", need, e.table.Describe(limits))
	}
	return fmt.Sprintf("the capacity limits can run jobs that need up to %d GPUs (%s), but this host has only %d: an attempt that finds too few free GPUs fails to start instead of sharing one; lower maxCapacity to at most what the host's GPUs allow", need, e.table.Describe(limits), host)
}

// Start prepares the job's directory and launches the attempt under a
// supervisor; it returns once the job's process runs (or has failed to
// start: a missing binary is an attempt that exits with code 127 and says
// why). Starting an attempt ID again, even after a restart, returns its
// handle and never runs the job twice. Start fails with an error wrapping
// gpu.ErrNoFreeGPUs when too few GPUs are free.
func (e *Executor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	if err := pathComponent("job ID", s.JobID); err != nil {
		return executor.Handle{}, err
	}
	if err := pathComponent("attempt ID", s.AttemptID); err != nil {
		return executor.Handle{}, err
	}
	req, err := trainingjob.ParseAccepted(s.Payload) // accepted at submit, perhaps by an older version
	if err != nil {
		return executor.Handle{}, err
	}
	grace, err := e.check(req, s.Demand)
	if err != nil {
		return executor.Handle{}, err
	}
	var a *attempt
	for {
		var ok bool
		e.mu.Lock()
		a, ok = e.attempts[s.AttemptID]
		if !ok {
			a = &attempt{id: s.AttemptID, Slot: executor.NewSlot()}
			e.attempts[s.AttemptID] = a
			e.mu.Unlock()
			break
		}
		e.mu.Unlock()
		select {
		case <-a.Ready:
		case <-ctx.Done():
			return executor.Handle{}, ctx.Err()
		}
		if a.StartErr == nil {
			return a.handle, nil
		}
		// That Start failed and removed the attempt: try again.
	}
	h, err := e.start(a, s, req, grace)
	if err != nil {
		e.revoke(s.AttemptID)
		e.mu.Lock()
		delete(e.attempts, s.AttemptID)
		e.mu.Unlock()
		e.alloc.Release(s.AttemptID)
	}
	a.handle, a.StartErr = h, err
	close(a.Ready)
	if err == nil && a.sup != nil && !a.sup.alive() {
		// Its supervisor died after answering: no end will be reported.
		e.follow(a)
	}
	return h, err
}

func (e *Executor) start(a *attempt, s executor.Spec, req *trainingjob.Request, grace time.Duration) (executor.Handle, error) {
	l, err := jobLayout(e.o.DataDir, s.JobID, s.AttemptID, req)
	if err != nil {
		return executor.Handle{}, err
	}
	if e.fs.IsDir(oldAttemptDir(e.o.DataDir, s.JobID, s.AttemptID)) {
		// Prepared by an earlier version, which put attempts under their
		// job: go on there, so that it is launched at most once.
		l.Attempt = oldAttemptDir(e.o.DataDir, s.JobID, s.AttemptID)
	}
	if e.fs.Exists(filepath.Join(l.Attempt, fileLaunched)) {
		return e.adopt(a, l.Attempt)
	}
	var gpus []gpu.GPU
	if e.alloc.Total() > 0 {
		if gpus, err = e.alloc.Claim(s.AttemptID, int(e.table.Need(s.Demand))); err != nil {
			return executor.Handle{}, fmt.Errorf("process executor: attempt %s of job %s (%s): %w", s.AttemptID, s.JobID, e.table.Describe(s.Demand), err)
		}
	}
	ju, err := e.userFor(s)
	if err != nil {
		return executor.Handle{}, err
	}
	base := e.env
	if ju != e.user {
		base = jobBaseEnv(e.o.Env, e.o.PassEnv, ju)
	}
	env, err := prepare(e.fs, l, s, req, gpus, base, ju)
	if err != nil {
		if isLinkErr(err) {
			return executor.Handle{}, qshare.Errorf(qshare.EINVALID, "%s: qshare follows no links in a job's directory, so the attempt is not started and nothing is written through it", linkIn(err, s.JobID))
		}
		return executor.Handle{}, qshare.Errorf(qshare.EINTERNAL, "process executor: preparing the directory of job %s: %s", s.JobID, jobRel(err, s.JobID))
	}
	if err := e.fs.Mkdir(l.Attempt, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return executor.Handle{}, qshare.Errorf(qshare.EINTERNAL, "process executor: creating the directory of attempt %s: %v", s.AttemptID, err)
	}
	var ids []string
	for _, g := range gpus {
		ids = append(ids, g.UUID)
	}
	optml := ""
	if e.optml {
		// The job sees its directory at /opt/ml, as in SageMaker's
		// container, and its SM_* variables say so.
		optml = l.Job
		env = optmlPaths(env, l.Job)
	}
	command, env, staged, err := e.dataWrap(s, req, l, env)
	if err != nil {
		return executor.Handle{}, err
	}
	cfg := supervisorConfig{
		AttemptID:   s.AttemptID,
		Command:     command,
		Env:         env,
		Dir:         l.Job,
		Log:         filepath.Join(l.Attempt, fileOutput),
		LogMaxBytes: e.o.LogMaxBytes,
		LogKeep:     e.o.LogKeep,
		Grace:       e.graceFor(grace, 0),
		FailureFile: filepath.Join(l.Output, "failure"),
		GPUs:        ids,
		JobGrace:    grace,
		User:        ju,
		OptML:       optml,
	}
	// The configuration goes to the supervisor with the start request; the
	// supervisor's record of the launch keeps what recovery needs of it. A
	// server killed from here on leaves an attempt directory that a new
	// executor finds by its ID alone (by its live/ link once launched).
	h, err := e.spawn(a, l.Attempt, cfg)
	if err == nil && staged {
		e.watchStaging(a, cfg.Log)
	}
	return h, err
}

// spawn hands the attempt to the supervisor and waits for its reply.
func (e *Executor) spawn(a *attempt, dir string, cfg supervisorConfig) (executor.Handle, error) {
	var ev event
	for try := 0; ; try++ {
		sup, err := e.supervisor()
		if err != nil {
			return executor.Handle{}, err
		}
		a.st = state{Dir: dir, Supervisor: sup.id, GPUs: cfg.GPUs, Grace: cfg.JobGrace}
		e.mu.Lock()
		a.sup = sup
		e.byDir[dir] = a
		e.mu.Unlock()
		ch := sup.expect(dir)
		if err := sup.send(request{Op: "start", Dir: dir, Config: &cfg}); err != nil {
			if sup.markDead(); try == 0 {
				e.unbind(a, nil)
				continue // it died since the last attempt: start another
			}
			return e.settle(a, dir, fmt.Errorf("process executor: cannot reach the supervisor: %w", err))
		}
		select {
		case ev = <-ch:
		case <-time.After(time.Minute):
			return e.settle(a, dir, qshare.Errorf(qshare.EINTERNAL, "process executor: the supervisor did not answer the start of attempt %s within a minute", a.id))
		}
		if ev.Event == "error" && !sup.alive() && try == 0 {
			e.unbind(a, nil)
			continue
		}
		break
	}
	switch ev.Event {
	case replyStarted:
		st := ev.Started
		if st == nil {
			st = readRecords(e.fs, dir).started
		}
		if st == nil {
			// The job runs all the same: failing the Start would have the
			// daemon start another attempt beside it.
			err := fmt.Errorf("process executor: attempt %s started, but its start is not recorded in its %s file", a.id, fileLaunched)
			e.log.Warn("process executor: attempt started, but its start is not recorded; following it from its launch record", "attempt", a.id)
			return e.settle(a, dir, err)
		}
		a.st.Job = st.Job
		a.handle = e.handleOf(a, st.At)
	case replyExited:
		x := ev.Exit
		if x == nil {
			x = readRecords(e.fs, dir).exit
		}
		var at time.Time
		if x != nil {
			at = x.At
		}
		a.handle = e.handleOf(a, at)
		e.finish(a, x)
	case replyAlready:
		e.unbind(a, nil)
		return e.adopt(a, dir)
	default:
		return e.settle(a, dir, qshare.Errorf(qshare.EINTERNAL, "process executor: the supervisor could not start attempt %s: %s (see %s in the server's data directory)", a.id, ev.Msg, fileSupLog))
	}
	return a.handle, nil
}

// settle ends a start that went wrong after the start request was sent. A
// supervisor may have launched the job all the same (it died after the
// fork, or answers late), and a Start that fails makes the daemon start
// another attempt: so the attempt is fenced off with a tombstone launched
// file, and if a supervisor got there first, what it launched is adopted.
// It returns err only when nothing was launched, or can be any more.
func (e *Executor) settle(a *attempt, dir string, err error) (executor.Handle, error) {
	e.unbind(a, nil)
	tomb, _ := json.Marshal(launchRecord{At: time.Now().UTC(), Lost: true})
	ferr := createExclusive(e.fs, filepath.Join(dir, fileLaunched), tomb)
	if ferr == nil || !errors.Is(ferr, os.ErrExist) {
		return executor.Handle{}, err
	}
	if lr, rerr := readLaunch(e.fs, dir); rerr == nil && lr.Lost {
		return executor.Handle{}, err
	}
	h, aerr := e.adopt(a, dir)
	if aerr != nil {
		return executor.Handle{}, fmt.Errorf("%w; and %v", err, aerr)
	}
	return h, nil
}

// unbind detaches an attempt from the supervisor after a failed start.
func (e *Executor) unbind(a *attempt, err error) error {
	e.mu.Lock()
	delete(e.byDir, a.st.Dir)
	a.sup = nil
	e.mu.Unlock()
	return err
}

// supClient is the executor's end of its supervisor process.
type supClient struct {
	cmd *exec.Cmd
	id  identity

	mu      sync.Mutex
	stdin   io.WriteCloser
	pending map[string]chan event
	dead    bool
}

func (c *supClient) expect(dir string) chan event {
	ch := make(chan event, 1)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		ch <- event{Dir: dir, Event: "error", Msg: "the supervisor has exited"}
		return ch
	}
	c.pending[dir] = ch
	return ch
}

func (c *supClient) send(r request) error {
	b, _ := json.Marshal(r)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dead {
		return errors.New("the supervisor has exited")
	}
	_, err := c.stdin.Write(append(b, '\n'))
	return err
}

// markDead makes the executor start a new supervisor for the next attempt.
func (c *supClient) markDead() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.dead = true
}

func (c *supClient) alive() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.dead
}

// supervisor returns the executor's supervisor process, starting one if
// there is none or the last one exited.
func (e *Executor) supervisor() (*supClient, error) {
	e.supMu.Lock()
	defer e.supMu.Unlock()
	if e.sup != nil && e.sup.alive() {
		return e.sup, nil
	}
	select {
	case <-e.closed:
		return nil, qshare.Errorf(qshare.EINTERNAL, "process executor: closed")
	default:
	}
	logf, err := e.fs.OpenFile(filepath.Join(e.o.DataDir, fileSupLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(e.o.Supervisor[0], e.o.Supervisor[1:]...)
	cmd.Env = append(append([]string(nil), e.o.Env...), SupervisorEnv+"="+e.o.DataDir)
	cmd.Env = append(cmd.Env, cgroupRootEnv+"="+e.o.CgroupRoot) // last: it wins over the server's own
	cmd.Dir = e.o.DataDir
	cmd.Stderr = logf
	// A session of its own: a signal to the server's process group or
	// terminal does not reach the supervisor or the jobs.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, qshare.Errorf(qshare.EINTERNAL, "process executor: cannot start the supervisor %s: %v", e.o.Supervisor[0], err)
	}
	c := &supClient{cmd: cmd, stdin: stdin, pending: map[string]chan event{}}
	// Our child: its pid cannot be reused before we reap it.
	if c.id, err = identify(cmd.Process.Pid); err != nil {
		c.id = identity{PID: cmd.Process.Pid, BootID: bootIDOnce}
	}
	go e.listen(c, stdout)
	e.sup = c
	return c, nil
}

// listen reads the supervisor's events until it exits.
func (e *Executor) listen(c *supClient, stdout io.Reader) {
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		var ev event
		if json.Unmarshal(sc.Bytes(), &ev) != nil {
			continue
		}
		if ev.Event == eventEnded {
			e.mu.Lock()
			a := e.byDir[ev.Dir]
			e.mu.Unlock()
			if a != nil {
				e.finish(a, ev.Exit)
			}
			continue
		}
		c.mu.Lock()
		ch := c.pending[ev.Dir]
		delete(c.pending, ev.Dir)
		c.mu.Unlock()
		if ch != nil {
			ch <- ev
		}
	}
	c.mu.Lock()
	c.dead = true
	for dir, ch := range c.pending {
		ch <- event{Dir: dir, Event: "error", Msg: "the supervisor exited"}
	}
	c.pending = nil
	c.mu.Unlock()
	c.cmd.Wait()
	// Attempts it ran that have not ended: watch them from outside. If
	// the supervisor died, their end is not recorded and they are Lost.
	e.mu.Lock()
	var orphans []*attempt
	for _, a := range e.byDir {
		select {
		case <-a.Ready:
		default:
			continue // its Start got an error from the dead supervisor and deals with it
		}
		if a.sup == c && !a.Ended {
			orphans = append(orphans, a)
		}
	}
	e.mu.Unlock()
	for _, a := range orphans {
		e.follow(a)
	}
}

func (e *Executor) handleOf(a *attempt, at time.Time) executor.Handle {
	b, _ := json.Marshal(a.st)
	return executor.Handle{AttemptID: a.id, StartedAt: at, LogPath: filepath.Join(a.st.Dir, fileOutput), State: b}
}

// adopt takes over an attempt that a supervisor launched before (a Start
// repeated after a restart, or racing a supervisor of the server before it):
// it judges the attempt from its directory as Recover does, and follows it.
func (e *Executor) adopt(a *attempt, dir string) (executor.Handle, error) {
	st, v, at := e.inspect(a.id, dir, state{}, false)
	a.st = st
	if !sameGPUs(e.alloc.Held(a.id), st.GPUs) {
		// What this Start claimed is not what the launch recorded: follow
		// claims those.
		e.alloc.Release(a.id)
	}
	switch v {
	case exited:
		a.handle = e.handleOf(a, at)
		e.finish(a, nil)
		return a.handle, nil
	case running:
		a.handle = e.handleOf(a, at)
		e.follow(a)
		return a.handle, nil
	}
	if lr, err := readLaunch(e.fs, dir); err == nil && lr.Lost {
		return executor.Handle{}, qshare.Errorf(qshare.EINTERNAL, "process executor: attempt %s was declared lost by a recovery (it was prepared but never launched); it is not started now", a.id)
	}
	return executor.Handle{}, qshare.Errorf(qshare.EINTERNAL, "process executor: attempt %s was launched before, but nothing of it runs and its end was never recorded; its fate is unknown", a.id)
}

func sameGPUs(held []gpu.GPU, uuids []string) bool {
	if len(held) != len(uuids) {
		return false
	}
	for i, g := range held {
		if g.UUID != uuids[i] {
			return false
		}
	}
	return true
}

// follow re-claims a recovered attempt's GPUs and watches for its end.
func (e *Executor) follow(a *attempt) {
	e.mu.Lock()
	if a.following || a.Ended {
		e.mu.Unlock()
		return
	}
	a.following = true
	e.mu.Unlock()
	if e.o.S3Keys != nil {
		// A recovered attempt's wrapper holds the key it was given.
		if _, _, err := e.o.S3Keys.Grant(a.id); err != nil {
			e.log.Warn("recovered attempt's S3 key cannot be granted again: its transfers will be refused", "attempt", a.id, "err", err)
		}
	}
	if err := e.alloc.Reclaim(a.id, a.st.GPUs); err != nil {
		e.log.Warn("recovered attempt's GPUs are held by another attempt", "attempt", a.id, "err", err)
	}
	go func() {
		t := time.NewTicker(e.o.PollInterval)
		defer t.Stop()
		goneOnce := false
		for {
			r := readRecords(e.fs, a.st.Dir)
			if r.exit != nil {
				e.finish(a, r.exit)
				return
			}
			if a.st.Job.PID == 0 {
				// Recovered while its supervisor was launching it: learn
				// the job once its start is recorded.
				if r.started != nil {
					e.mu.Lock()
					a.st.Job = r.started.Job
					e.mu.Unlock()
				} else if !a.st.Supervisor.alive() {
					// It died without a record: the job may run all the same.
					if job, ok := findAttemptProcess(a.id); ok {
						e.mu.Lock()
						a.st.Job = job
						e.mu.Unlock()
					}
				}
			}
			e.mu.Lock()
			st := a.st
			e.mu.Unlock()
			if !st.Supervisor.alive() && !st.Job.alive() {
				if goneOnce { // looked for the exit once more after seeing it gone
					e.finish(a, nil)
					return
				}
				goneOnce = true
			}
			select {
			case <-t.C:
			case <-e.closed:
				return
			}
		}
	}()
}

// finish records the attempt's end, frees its GPUs and wakes its waiters.
// x is the end as the supervisor reported it; nil: read it from the
// attempt's records.
func (e *Executor) finish(a *attempt, x *exitRecord) {
	if x == nil {
		x = readRecords(e.fs, a.st.Dir).exit
	}
	exit := executor.Exit{AttemptID: a.id}
	if x != nil {
		exit.ExitCode, exit.Signal, exit.Reason, exit.Stopped, exit.At = x.ExitCode, x.Signal, x.Reason, x.Stopped, x.At
	} else {
		exit.ExitCode = -1
		exit.Lost = true
		exit.Reason = "Lost: the attempt's supervisor ended without recording how the job ended (see " + fileSupLog + " in the server's data directory)"
		exit.At = time.Now().UTC()
		e.mu.Lock()
		exit.Stopped = a.Stopping
		e.mu.Unlock()
	}
	e.alloc.Release(a.id)
	e.revoke(a.id)
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.Ended {
		return
	}
	if e.byDir[a.st.Dir] == a {
		delete(e.byDir, a.st.Dir)
	}
	a.Exit, a.Ended = exit, true
	close(a.Done)
}

// graceFor returns the grace period of a stop: the job's own
// (QSHARE_STOP_GRACE) if set, since the job knows how long its checkpoint
// takes; else the caller's if non-zero; else Options.StopGrace.
func (e *Executor) graceFor(job, caller time.Duration) time.Duration {
	return executor.StopGrace(job, caller, e.o.StopGrace)
}

// Stop asks the attempt's supervisor to stop the job: SIGTERM to its process
// group, SIGKILL to all that is left of it after the grace period (the
// job's QSHARE_STOP_GRACE, else the caller's, else Options.StopGrace). The
// supervisor carries the stop out even if this server dies meanwhile. A
// second Stop, or a Stop of an ended attempt, is a no-op.
func (e *Executor) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	a, stop, err := executor.BeginStop(ctx, &e.mu, e.attempts, attemptID)
	if !stop {
		return err
	}
	e.mu.Lock()
	st, sup := a.st, a.sup // follow may learn st.Job meanwhile
	e.mu.Unlock()
	// A stop recorded before a restart keeps its deadline (keepStop).
	g, err := keepStop(e.fs, filepath.Join(st.Dir, fileStop), e.graceFor(st.Grace, grace), time.Now())
	if err != nil {
		return qshare.Errorf(qshare.EINTERNAL, "process executor: cannot record the stop of attempt %s: %v", attemptID, err)
	}
	if sup != nil && sup.send(request{Op: "stop", Dir: st.Dir}) == nil {
		return nil
	}
	// A supervisor we have no pipe to (a recovered attempt's) looks for
	// stop.json on SIGUSR1.
	if st.Supervisor.signal(syscall.SIGUSR1) == nil {
		return nil
	}
	// No supervisor (it was killed): stop the job's group ourselves. A job
	// found by its QSHARE_ATTEMPT_ID may not lead a group (it was caught
	// before its setsid took effect): then the process itself.
	if st.Job.signalGroup(syscall.SIGTERM) == nil || st.Job.signal(syscall.SIGTERM) == nil {
		job := st.Job
		time.AfterFunc(g, func() {
			if job.signalGroup(syscall.SIGKILL) != nil {
				job.signal(syscall.SIGKILL)
			}
		})
	}
	return nil
}

// Wait blocks until the attempt's processes are all gone and its GPUs free,
// and returns how it ended.
func (e *Executor) Wait(ctx context.Context, attemptID string) (executor.Exit, error) {
	return executor.WaitFor(ctx, &e.mu, e.attempts, attemptID)
}

// Recover re-attaches to an attempt started before a restart. It needs
// only h.AttemptID: the attempt's records are on disk (Handle.State, when
// the daemon saved it, only says where). exit.json written → Exited; its
// supervisor or its job still alive (same pid and start time) → Running,
// its GPUs claimed again, and Wait reports its end; never launched, or
// launched but nothing of it alive and no end recorded → Lost. An attempt
// found prepared but never launched is fenced off, so that it can never
// start after it was declared Lost.
func (e *Executor) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	for {
		if a, err := executor.Lookup(ctx, &e.mu, e.attempts, h.AttemptID); err == nil {
			select {
			case <-a.Done:
				return executor.Exited, nil
			default:
				return executor.Running, nil
			}
		} else if !errors.Is(err, executor.ErrUnknownAttempt) {
			return 0, err
		}
		if h.AttemptID == "" {
			return executor.Lost, nil
		}
		var hint state
		if json.Unmarshal(h.State, &hint) != nil {
			hint = state{}
		}
		dir := hint.Dir
		if dir == "" || !e.fs.IsDir(dir) {
			dir = e.findDir(h.AttemptID) // no state, or the data directory moved
		}
		if dir == "" {
			return executor.Lost, nil
		}
		if r := e.recoverFromDisk(h, hint, dir); r != 0 {
			return r, nil
		}
	}
}

// Forget drops an ended attempt from memory, once the daemon has recorded
// its end, so that a long-running server does not accumulate them. After
// Forget, Wait and Stop of the attempt return ErrUnknownAttempt, and Start
// or Recover of it finds its records on disk (it reports its exit again; it
// never runs the job again). Forgetting an attempt that has not ended is a
// no-op.
func (e *Executor) Forget(attemptID string) {
	e.mu.Lock()
	a, ok := e.attempts[attemptID]
	if !ok || !a.Ended {
		e.mu.Unlock()
		return
	}
	delete(e.attempts, attemptID)
	e.mu.Unlock()
	// Its end is recorded by the daemon: a new executor need not look at
	// it (Recover still finds its directory by looking under every job).
	e.fs.Remove(filepath.Join(e.o.DataDir, dirLive, attemptID))
}

// Close stops watching recovered attempts. Attempts keep running; a new
// Executor over the same data directory recovers them.
func (e *Executor) Close() error {
	e.closeOnce.Do(func() {
		close(e.closed)
		e.fs.close()
		e.supMu.Lock()
		if e.sup != nil {
			// The supervisor takes no more jobs and exits when the ones it
			// runs have ended.
			e.sup.mu.Lock()
			e.sup.stdin.Close()
			e.sup.mu.Unlock()
		}
		e.supMu.Unlock()
	})
	return nil
}
