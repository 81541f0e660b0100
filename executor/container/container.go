// Package container is the executor that runs each attempt of a SageMaker
// training job as containers of its TrainingImage through the Docker
// Engine API, against Docker Engine or Podman's compatible service. The
// daemon decides; this executor lays out the job's directory as the
// process executor does (executor/process), binds it at SageMaker's
// /opt/ml, creates and starts one container per instance (algo-1 …
// algo-N, on a private network when there are several), follows the
// engine's log stream into the attempt's directory, and removes each
// container once its end is recorded. Containers carry labels
// (LabelAttempt and the others), so a restarted server finds them by an
// attempt's ID alone. See docs/container.md.
package container

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/process"
	"qshare/trainingjob"
)

// Name is the executor's name, as --executor takes it.
const Name = "container"

// Options configure an Executor.
type Options struct {
	// DataDir holds the jobs' directories (jobs/<jobID>, bound at /opt/ml)
	// and the attempts' records and logs (attempts/<attemptID>).
	DataDir string
	// Host is the engine's address (--container-host): unix:///path,
	// tcp://host:port. Empty means DOCKER_HOST, else the first of the
	// usual sockets that exists (DefaultHosts).
	Host string
	// Pull says when an image is pulled (--pull); empty means PullMissing.
	Pull PullPolicy
	// StopGrace is the grace period of a stop when neither the caller nor
	// the job sets one. Zero means executor.DefaultStopGrace.
	StopGrace time.Duration
	// GPUs restricts or names the host's GPUs (--gpus, gpu.Discover);
	// InstanceTypes overrides the GPUs-per-instance-type table (gpu.File).
	GPUs          []string
	InstanceTypes string
	// RunAs is the user (a name or uid) that jobs without a user of their
	// own (executor.Spec.RunAs) run as. Empty means: the server's user
	// when it is not root, else nobody (65534:65534). Containers never run
	// as root.
	RunAs string
	// WritableRoot leaves the containers' root filesystems writable, for
	// images that write outside /opt/ml and /tmp. By default it is
	// read-only.
	WritableRoot bool
	// Data, when set, carries out SageMaker's data contract around each
	// attempt (package data): before the containers start, the S3 input
	// channels are staged into input/data/<channel> and the checkpoints
	// restored from CheckpointConfig.S3Uri; once they have ended, the model
	// and output/data go to S3OutputPath and the checkpoints are saved.
	// Nil: only local (file://) channels are served, bound read-only.
	Data *data.Client
	// Region and AccountID make the attempts' training job ARNs
	// (TRAINING_JOB_ARN), as the server's --region and --account-id.
	// Empty: us-east-1 and 000000000000.
	Region, AccountID string
	// Logger receives warnings; nil means slog.Default().
	Logger *slog.Logger
}

// DefaultHosts are the engine sockets tried, in order, when neither
// Options.Host nor DOCKER_HOST names one: Docker Engine's, then rootful
// Podman's.
var DefaultHosts = []string{"unix:///var/run/docker.sock", "unix:///run/podman/podman.sock"}

// Executor runs attempts as containers. It is safe for concurrent use.
type Executor struct {
	o     Options
	cli   *client.Client
	fs    *process.Beneath
	table gpu.Table
	alloc *gpu.Allocator
	log   *slog.Logger
	ctx   context.Context // ended by Close: the watchers stop, the containers run on
	stop  context.CancelFunc

	mu       sync.Mutex
	attempts map[string]*attempt
	claimed  map[string]bool // started or recovered since New: never swept
	health   string
	pending  map[string]string // attempts pulling their image: the progress
	version  uint64
	engine   *engineInfo
	users    map[string]*process.RunUser
	// seen holds when each image was last found on the engine: one seen
	// within imageFresh is not asked about again (haveImage).
	seen map[string]time.Time

	infoMu sync.Mutex // held while the engine is asked what it is: once, not by every start
}

// engineInfo is what the executor learns of the engine once.
type engineInfo struct {
	gpus     gpuMode
	cpus     int
	memory   int64
	podman   bool
	apiMajor int
	apiMinor int
}

type attempt struct {
	executor.Slot
	id     string
	rec    record
	killed bool // SIGKILL sent at the end of the grace period
	// cancelLaunch, while Start's pull or download goes on after it
	// returned, cancels it (a stop).
	cancelLaunch context.CancelFunc
	failed       string        // the container of several that failed first
	logDone      chan struct{} // closed once the copy of instance 0's log has ended
	// exits are the waits for each container's next exit, asked before
	// it started (nil for an attempt recovered after a restart); exited
	// closes each container's channel once its end is known.
	exits  []*exitWait
	exited []chan struct{}
}

// record is attempts/<attemptID>/attempt.json: what a restarted executor
// needs of an attempt besides its containers' labels.
type record struct {
	AttemptID  string        `json:"attemptId"`
	JobID      string        `json:"jobId"`
	StartedAt  time.Time     `json:"startedAt"`
	Containers []string      `json:"containers"`
	Network    string        `json:"network,omitempty"`
	GPUs       []string      `json:"gpus,omitempty"`
	Output     string        `json:"output"` // the job's output directory on the host, for the failure file
	Grace      time.Duration `json:"grace,omitempty"`
	// Job is the job's directory on the host; Data the transfers of the
	// data contract (Options.Data), nil when there are none.
	Job  string     `json:"job,omitempty"`
	Data *data.Plan `json:"data,omitempty"`
}

const (
	fileRecord   = "attempt.json"
	fileExit     = "exit.json"
	fileStopping = "stopping"
	fileOutput   = "output.log"
)

var _ interface {
	executor.Executor
	executor.Sweeper
	executor.HealthReporter
	executor.PendingReasoner
	executor.CapacityChecker
	executor.InstanceLogger
} = (*Executor)(nil)

// New returns an executor that talks to the engine at o.Host. The engine
// need not answer yet: until it does, Health says so and starts fail.
func New(ctx context.Context, o Options) (*Executor, error) {
	if o.DataDir == "" || !filepath.IsAbs(o.DataDir) {
		return nil, qshare.Errorf(qshare.EINVALID, "container executor: the data directory %q must be an absolute path", o.DataDir)
	}
	pull, err := ParsePull(string(o.Pull))
	if err != nil {
		return nil, err
	}
	o.Pull = pull
	if o.StopGrace <= 0 {
		o.StopGrace = executor.DefaultStopGrace
	}
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.AccountID == "" {
		o.AccountID = "000000000000"
	}
	host := ResolveHost(o.Host)
	if host == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "container executor: no engine found: give --container-host (for example unix:///run/podman/podman.sock) or set DOCKER_HOST; none of %s exists", strings.Join(DefaultHosts, ", "))
	}
	cli, err := client.New(client.WithHost(host), client.WithAPIVersionNegotiation())
	if err != nil {
		return nil, qshare.Errorf(qshare.EINVALID, "container executor: --container-host %q: %v", host, err)
	}
	for _, d := range []string{o.DataDir, filepath.Join(o.DataDir, "jobs"), filepath.Join(o.DataDir, "attempts")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, qshare.Errorf(qshare.EINTERNAL, "container executor: %v", err)
		}
	}
	// The attempts' records and logs are the server's: jobs reach their
	// resourceconfig.json through a bind mount, not through the path.
	if err := os.Chmod(filepath.Join(o.DataDir, "attempts"), 0o700); err != nil {
		return nil, qshare.Errorf(qshare.EINTERNAL, "container executor: %v", err)
	}
	e := &Executor{o: o, cli: cli, fs: process.NewBeneath(o.DataDir), log: o.Logger,
		attempts: map[string]*attempt{}, claimed: map[string]bool{}, pending: map[string]string{}, users: map[string]*process.RunUser{},
		seen: map[string]time.Time{}}
	if e.log == nil {
		e.log = slog.Default()
	}
	if e.table, e.alloc, err = gpu.Host(ctx, o.InstanceTypes, o.GPUs); err != nil {
		return nil, err
	}
	e.ctx, e.stop = context.WithCancel(context.Background())
	// What the engine is, asked now (for up to 10 s) and, if it does not
	// answer, again in the background until it does, so that the first
	// attempts do not wait for it: a loaded Podman service takes seconds
	// to answer its /info.
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := e.info(pctx); err != nil {
		e.log.Warn("container executor: the engine does not answer yet", "host", host, "err", err)
		go func() {
			for try := 0; e.pause(e.ctx, try); try++ {
				if _, err := e.info(e.ctx); err == nil {
					return
				}
			}
		}()
	}
	return e, nil
}

// ResolveHost returns the engine address to use: host, else DOCKER_HOST,
// else the first of DefaultHosts whose socket exists, else "".
func ResolveHost(host string) string {
	if host != "" {
		return host
	}
	if h := os.Getenv("DOCKER_HOST"); h != "" {
		return h
	}
	for _, h := range DefaultHosts {
		if _, err := os.Stat(strings.TrimPrefix(h, "unix://")); err == nil {
			return h
		}
	}
	return ""
}

// info asks the engine once what it is, and remembers the answer.
func (e *Executor) info(ctx context.Context) (*engineInfo, error) {
	known := func() *engineInfo {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.engine
	}
	if ei := known(); ei != nil {
		return ei, nil
	}
	e.infoMu.Lock()
	defer e.infoMu.Unlock()
	if ei := known(); ei != nil {
		return ei, nil // asked while this call waited for infoMu
	}
	v, err := e.cli.ServerVersion(ctx, client.ServerVersionOptions{})
	if err != nil {
		e.setHealth(err)
		return nil, err
	}
	in, err := e.cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		e.setHealth(err)
		return nil, err
	}
	e.setHealth(nil)
	ei := &engineInfo{cpus: in.Info.NCPU, memory: in.Info.MemTotal}
	for _, c := range v.Components {
		if strings.Contains(strings.ToLower(c.Name), "podman") {
			ei.podman = true
		}
	}
	fmt.Sscanf(v.APIVersion, "%d.%d", &ei.apiMajor, &ei.apiMinor)
	ei.gpus = gpuModeOf(ei.podman, ei.apiMajor, ei.apiMinor)
	e.mu.Lock()
	e.engine = ei
	e.mu.Unlock()
	return ei, nil
}

// gpuModeOf is how an engine is asked for GPUs: Podman takes CDI names as
// devices; Docker Engine 25 (API 1.44) and later as device requests of the
// "cdi" driver; older Docker Engines through the NVIDIA runtime's driver.
func gpuModeOf(podman bool, major, minor int) gpuMode {
	switch {
	case podman:
		return gpuCDIDevice
	case major > 1 || major == 1 && minor >= 44:
		return gpuCDIRequest
	}
	return gpuNVIDIA
}

// setHealth records whether the engine answered.
func (e *Executor) setHealth(err error) {
	h := ""
	if err != nil && !isNotFound(err) && !cerrdefs.IsConflict(err) && !cerrdefs.IsInvalidArgument(err) {
		// The engine's error names server paths (its socket): it goes to
		// the server's log, not into the status reason users read.
		h = "the container engine does not answer: running containers go on, but none starts, and their ends are learned once it is back"
	}
	e.mu.Lock()
	was := e.health
	e.health = h
	e.mu.Unlock()
	if h != "" && was == "" {
		e.log.Warn("container executor: the engine does not answer", "err", err)
	} else if h == "" && was != "" {
		e.log.Info("container executor: the engine answers again")
	}
}

// Health reports the engine's last answer: "" while it answers.
func (e *Executor) Health() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.health
}

// Name returns "container".
func (e *Executor) Name() string { return Name }

// GPUs returns the host's GPUs that attempts are given.
func (e *Executor) GPUs() []gpu.GPU { return e.alloc.GPUs() }

// CheckCapacity warns when an environment's limits ask for more GPUs than
// the host has.
func (e *Executor) CheckCapacity(limits qshare.Capacity) string {
	need, host := e.table.Need(limits), int64(e.alloc.Total())
	if need > host {
		return fmt.Sprintf("the environment's limits need %d GPUs (%s) but this host has %d", need, e.table.Describe(limits), host)
	}
	return ""
}

// Validate checks a payload at submit time.
func (e *Executor) Validate(payload string, demand qshare.Capacity) error {
	return executor.ValidatePayload(payload, demand, e.ValidateRequest)
}

// ValidateRequest is Validate of a parsed payload.
func (e *Executor) ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error {
	_, err := e.check(req, demand)
	return err
}

// check validates a request and returns the job's own grace period.
func (e *Executor) check(req *trainingjob.Request, demand qshare.Capacity) (time.Duration, error) {
	img := req.AlgorithmSpecification.TrainingImage
	if img == "" {
		return 0, qshare.Errorf(qshare.EINVALID, "AlgorithmSpecification.TrainingImage is empty: the container executor runs the training image, for example 763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3-gpu-py311 or a local image")
	}
	if strings.ContainsAny(img, " \t\n\x00") || len(img) > 512 {
		return 0, qshare.Errorf(qshare.EINVALID, "AlgorithmSpecification.TrainingImage %q is not an image reference", img)
	}
	for i, a := range req.AlgorithmSpecification.ContainerEntrypoint {
		if a == "" && i == 0 {
			return 0, qshare.Errorf(qshare.EINVALID, "AlgorithmSpecification.ContainerEntrypoint starts with an empty string: give the program to run, or leave it out to run the image's own entry point")
		}
	}
	if _, _, err := executor.InstanceOf(req, demand, Name); err != nil {
		return 0, err
	}
	if err := process.CheckJobDir(req); err != nil {
		return 0, err
	}
	if e.o.Data != nil {
		if err := data.Validate(req); err != nil {
			return 0, err
		}
	}
	for _, c := range req.InputDataConfig {
		if !validName(c.ChannelName) {
			return 0, qshare.Errorf(qshare.EINVALID, "InputDataConfig channel %q: a channel name is letters, digits, '.', '_' and '-'", c.ChannelName)
		}
	}
	if host := e.alloc.Total(); host > 0 {
		if need := e.table.Need(demand); need > int64(host) {
			return 0, qshare.Errorf(qshare.EINVALID, "the job needs %d GPUs (%s) but this host has %d: ask for fewer instances or a smaller instance type", need, e.table.Describe(demand), host)
		}
	}
	return executor.EnvironmentAndGrace(req)
}

func (e *Executor) attemptDir(id string) string { return filepath.Join(e.o.DataDir, "attempts", id) }

// Start creates and starts the attempt's containers, and returns once
// they run. A Start of an attempt started before (by this executor or,
// after a restart, by an earlier one) returns its handle.
func (e *Executor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	if !validName(s.AttemptID) || len(s.AttemptID) > 100 {
		return executor.Handle{}, qshare.Errorf(qshare.EINVALID, "container executor: attempt ID %q cannot name a container: use letters, digits, '-' and '_'", s.AttemptID)
	}
	e.mu.Lock()
	if a, ok := e.attempts[s.AttemptID]; ok {
		e.mu.Unlock()
		if err := a.AwaitReady(ctx); err != nil {
			return executor.Handle{}, err
		}
		return a.handle(e), nil
	}
	a := &attempt{Slot: executor.NewSlot(), id: s.AttemptID, logDone: make(chan struct{})}
	e.attempts[s.AttemptID] = a
	e.claimed[s.AttemptID] = true
	e.mu.Unlock()
	err := e.start(ctx, a, s)
	if err != nil {
		e.mu.Lock()
		a.StartErr = err
		delete(e.attempts, s.AttemptID)
		e.mu.Unlock()
		close(a.Ready)
		return executor.Handle{}, err
	}
	close(a.Ready)
	return a.handle(e), nil
}

func (a *attempt) handle(e *Executor) executor.Handle {
	st, _ := json.Marshal(a.rec)
	return executor.Handle{AttemptID: a.id, StartedAt: a.rec.StartedAt, LogPath: filepath.Join(e.attemptDir(a.id), fileOutput), State: st}
}

func (e *Executor) start(ctx context.Context, a *attempt, s executor.Spec) error {
	begun := time.Now()
	req, err := trainingjob.Parse(s.Payload)
	if err != nil {
		return err
	}
	grace, err := e.check(req, s.Demand)
	if err != nil {
		return err
	}
	dir := e.attemptDir(s.AttemptID)
	// Started before (a restart while Start ran, or a Start repeated
	// after one): adopt it, whatever became of it.
	var rec record
	if e.readJSON(filepath.Join(dir, fileRecord), &rec) == nil {
		switch r, err := e.attach(ctx, a, rec); {
		case err != nil:
			return err
		case r != executor.Lost:
			return nil
		}
		// Recorded, but no container was made: start it afresh.
	}
	ei, err := e.info(ctx)
	if err != nil {
		return qshare.Errorf(qshare.EINTERNAL, "CannotStartContainerError: the container engine does not answer: %v", err)
	}
	typ, n, err := executor.InstanceOf(req, s.Demand, Name)
	if err != nil {
		return err
	}
	u, err := e.userFor(s)
	if err != nil {
		return err
	}
	var gpus []gpu.GPU
	if e.alloc.Total() > 0 {
		if gpus, err = e.alloc.Claim(s.AttemptID, int(e.table.Need(s.Demand))); err != nil {
			return fmt.Errorf("container executor: attempt %s of job %s (%s): %w", s.AttemptID, s.JobID, e.table.Describe(s.Demand), err)
		}
	}
	ok := false
	defer func() {
		if !ok {
			e.alloc.Release(s.AttemptID)
		}
	}()
	dirs, err := process.PrepareJob(e.fs, s, req, u)
	if err != nil {
		return err
	}
	if err := e.fs.MkdirAll(dir, 0o700); err != nil {
		return qshare.Errorf(qshare.EINTERNAL, "container executor: creating the directory of attempt %s: %v", s.AttemptID, err)
	}
	img := req.AlgorithmSpecification.TrainingImage
	present, err := e.haveImage(ctx, img)
	if err != nil {
		return err
	}
	plan, err := e.plan(s, req, dirs)
	if err != nil {
		return err
	}
	hosts := hostNames(n)
	rec = record{AttemptID: s.AttemptID, JobID: s.JobID, StartedAt: time.Now().UTC(), Output: dirs.Output, Grace: grace, Job: dirs.Job, Data: plan}
	for k := range hosts {
		rec.Containers = append(rec.Containers, containerName(e.o.DataDir, s.AttemptID, k))
	}
	for _, g := range gpus {
		rec.GPUs = append(rec.GPUs, g.UUID)
	}
	if n > 1 {
		rec.Network = namePrefix(e.o.DataDir) + "-" + s.AttemptID
	}
	if err := e.fs.WriteFileAtomic(filepath.Join(dir, fileRecord), mustJSON(rec)); err != nil {
		return qshare.Errorf(qshare.EINTERNAL, "container executor: recording attempt %s: %v", s.AttemptID, err)
	}
	a.rec = rec
	background := false
	launch := func(ctx context.Context) error {
		t0 := time.Now()
		if !present {
			if err := e.pull(ctx, s.AttemptID, img); err != nil {
				return err
			}
		}
		if err := e.stageData(ctx, s, plan, dirs); err != nil {
			return err
		}
		t1 := time.Now()
		err := e.create(ctx, s, req, rec, dirs, typ, hosts, u, gpus, ei)
		if err != nil && present && background && errors.As(err, new(imageGone)) && e.o.Pull != PullNever {
			// Removed from the engine since it was seen: pull it, once.
			e.remove(context.Background(), rec)
			present = false
			e.progress(s.AttemptID, "Pulling image "+img)
			if err := e.pull(ctx, s.AttemptID, img); err != nil {
				return err
			}
			err = e.create(ctx, s, req, rec, dirs, typ, hosts, u, gpus, ei)
		}
		if err != nil {
			e.remove(context.Background(), rec)
			return err
		}
		t2 := time.Now()
		defer func() {
			e.log.Debug("container executor: started", "attempt", s.AttemptID, "prepare", t0.Sub(begun), "create", t2.Sub(t1), "start", time.Since(t2))
		}()
		for try := 1; ; try++ {
			exits, err := e.startContainers(ctx, rec, hosts)
			if err == nil {
				a.exits = exits
				return nil
			}
			e.remove(context.Background(), rec)
			if try == startTries || !engineFault(err) {
				return err
			}
			// The engine's own step failed, not the image: the
			// containers are made again, as a new host would.
			e.log.Warn("container executor: the engine failed to start a container; making the attempt's containers again", "attempt", s.AttemptID, "try", try, "err", err)
			if !e.pause(ctx, try) {
				return err
			}
			if err := e.create(ctx, s, req, rec, dirs, typ, hosts, u, gpus, ei); err != nil {
				e.remove(context.Background(), rec)
				return err
			}
		}
	}
	ok = true
	if present && plan == nil {
		// Nothing to wait for: Start returns once the containers run.
		err := launch(ctx)
		if err == nil {
			go e.watch(a, false)
			return nil
		}
		if !errors.As(err, new(imageGone)) || e.o.Pull == PullNever {
			ok = false
			return err
		}
		present = false // removed from the engine since it was seen: pulled below
	}
	background = true
	// A pull or a download can take minutes: Start returns now, and the
	// attempt's PendingReason says how far it is; a failure ends the
	// attempt with its reason, a stop cancels it.
	if !present {
		e.progress(s.AttemptID, "Pulling image "+img)
	} else {
		e.progress(s.AttemptID, "Downloading input data")
	}
	lctx, cancel := context.WithCancel(e.ctx)
	e.mu.Lock()
	a.cancelLaunch = cancel
	e.mu.Unlock()
	go func() {
		defer cancel()
		err := launch(lctx)
		e.progressDone(s.AttemptID)
		e.mu.Lock()
		a.cancelLaunch = nil
		stopping := a.Stopping
		e.mu.Unlock()
		if err == nil {
			if stopping {
				e.signal(e.ctx, a, "SIGTERM") // the stop came while they started
			}
			e.watch(a, false)
			return
		}
		if e.ctx.Err() != nil {
			return // closed: a new executor finds the attempt Lost
		}
		e.remove(e.ctx, rec)
		x := executor.Exit{AttemptID: a.id, ExitCode: -1, Stopped: stopping, At: time.Now().UTC(), Reason: err.Error()}
		if stopping {
			x.Reason = "Stopped before its containers started"
		}
		e.record(a, x)
		close(a.logDone)
		e.finish(a)
	}()
	return nil
}

// haveImage reports whether the engine has img and need not pull it, as
// the pull policy says: with --pull never, an image it lacks fails the
// start at once.
func (e *Executor) haveImage(ctx context.Context, img string) (bool, error) {
	if e.o.Pull == PullAlways {
		return false, nil
	}
	e.mu.Lock()
	at, ok := e.seen[img]
	e.mu.Unlock()
	if ok && time.Since(at) < imageFresh {
		return true, nil
	}
	_, err := e.cli.ImageInspect(ctx, img)
	switch {
	case err == nil:
		e.sawImage(img)
		return true, nil
	case !isNotFound(err):
		e.setHealth(err)
		return false, qshare.Errorf(qshare.EINTERNAL, "CannotStartContainerError: the container engine does not answer: %v", err)
	case e.o.Pull == PullNever:
		return false, errImageNotFound(img, fmt.Errorf("not on this host, and --pull never"))
	}
	return false, nil
}

// imageFresh is how long an image found on the engine is taken to be
// there still, without asking: the attempts of a burst of jobs of one
// image ask once. An image removed from the engine in that time fails the
// creation of a container with the engine's "no such image" (imageGone):
// the attempt then pulls it, in the background, and creates its
// containers again; with --pull never it fails as an image not found.
const imageFresh = 30 * time.Second

// imageGone is the error of a container's creation whose image the engine
// no longer has.
type imageGone struct{ error }

func (g imageGone) Unwrap() error { return g.error }

// sawImage records that the engine has img.
func (e *Executor) sawImage(img string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for k, t := range e.seen {
		if time.Since(t) >= imageFresh {
			delete(e.seen, k)
		}
	}
	e.seen[img] = time.Now()
}

// userFor returns the user an attempt's containers run as.
func (e *Executor) userFor(s executor.Spec) (*process.RunUser, error) {
	name, field := s.RunAs, "the job's Unix user (its submitter's unixUser)"
	if name == "" {
		name, field = e.o.RunAs, "--run-as"
	}
	if name == "" {
		if uid := os.Geteuid(); uid != 0 {
			return &process.RunUser{Name: strconv.Itoa(uid), UID: uint32(uid), GID: uint32(os.Getegid())}, nil
		}
		return &process.RunUser{Name: "nobody", UID: 65534, GID: 65534}, nil
	}
	e.mu.Lock()
	u := e.users[name]
	e.mu.Unlock()
	if u != nil {
		return u, nil
	}
	u, err := process.LookupUser(field, name)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.users[name] = u
	e.mu.Unlock()
	return u, nil
}

// create makes the attempt's network (with several hosts) and one
// container per host, each with its own resourceconfig.json.
func (e *Executor) create(ctx context.Context, s executor.Spec, req *trainingjob.Request, rec record, dirs process.JobDirs, typ string, hosts []string, u *process.RunUser, gpus []gpu.GPU, ei *engineInfo) error {
	dir := e.attemptDir(s.AttemptID)
	// EnableNetworkIsolation, as on SageMaker: one host has no network
	// but its loopback; several have their own network, internal (no
	// route out). Docker gives that network's bridge an address on this
	// machine, which the hosts would reach: inhibit_ipv4 gives it none.
	// Podman refuses the option; its hosts reach this machine at their
	// network's gateway address, where its DNS server answers.
	isolated := req.EnableNetworkIsolation
	netw, mode := "", ""
	if isolated {
		mode = "none"
	}
	if rec.Network != "" {
		opts := client.NetworkCreateOptions{Internal: isolated, Labels: map[string]string{LabelAttempt: s.AttemptID, LabelDataDir: e.o.DataDir}}
		if isolated && !ei.podman {
			opts.Options = map[string]string{"com.docker.network.bridge.inhibit_ipv4": "true"}
		}
		_, err := e.cli.NetworkCreate(ctx, rec.Network, opts)
		if err != nil && !cerrdefs.IsConflict(err) {
			e.setHealth(err)
			return qshare.Errorf(qshare.EINVALID, "CannotStartContainerError: creating the attempt's network: %v", err)
		}
		netw, mode = rec.Network, rec.Network
	}
	lim := instanceLimits(typ, ei.cpus, ei.memory)
	per := len(gpus) / len(hosts)
	for k, h := range hosts {
		conf := filepath.Join(dir, "resourceconfig-"+h+".json")
		if err := e.fs.WriteFile(conf, mustJSON(executor.NewResourceConfig(h, typ, hosts, "eth0")), 0o644); err != nil {
			return qshare.Errorf(qshare.EINTERNAL, "container executor: writing %s's resourceconfig.json: %v", h, err)
		}
		b := build{Spec: s, Req: req, Dirs: dirs, HostConf: conf, Type: typ, Hosts: hosts, Host: host{Name: h, Index: k},
			User: fmt.Sprintf("%d:%d", u.UID, u.GID), Groups: u.Groups, GPUs: gpus[k*per : (k+1)*per], Devices: ei.gpus,
			Limits: lim, Network: mode, Image: req.AlgorithmSpecification.TrainingImage, ARN: e.arn(s), DataDir: e.o.DataDir, ReadOnly: !e.o.WritableRoot}
		cfg, hc := createRequest(b)
		var nc *network.NetworkingConfig
		if netw != "" {
			nc = &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{netw: {Aliases: []string{h}}}}
		}
		_, err := e.cli.ContainerCreate(ctx, client.ContainerCreateOptions{Name: rec.Containers[k], Config: cfg, HostConfig: hc, NetworkingConfig: nc})
		if err != nil {
			e.setHealth(err)
			if isNotFound(err) {
				e.mu.Lock()
				delete(e.seen, b.Image) // removed since it was seen: look again
				e.mu.Unlock()
				if _, ierr := e.cli.ImageInspect(ctx, b.Image); isNotFound(ierr) {
					return imageGone{errImageNotFound(b.Image, fmt.Errorf("removed from this host since it was seen"))}
				}
			}
			return qshare.Errorf(qshare.EINVALID, "CannotStartContainerError: creating the container of %s: %v", h, err)
		}
	}
	return nil
}

// startTries is how many times an attempt's containers are made and
// started when the engine's own step of the start fails (engineFault).
const startTries = 3

// startContainers starts an attempt's containers, each with a wait for
// its next exit set up before it starts; on an error the waits are ended.
func (e *Executor) startContainers(ctx context.Context, rec record, hosts []string) ([]*exitWait, error) {
	exits := make([]*exitWait, len(rec.Containers))
	for k, name := range rec.Containers {
		exits[k] = e.nextExit(name)
	}
	for k, name := range rec.Containers {
		if _, err := e.cli.ContainerStart(ctx, name, client.ContainerStartOptions{}); err != nil {
			if !engineFault(err) { // that engine answered
				e.setHealth(err)
			}
			for _, w := range exits {
				w.close()
			}
			return nil, qshare.Errorf(qshare.EINVALID, "CannotStartContainerError: starting the container of %s: %v", hosts[k], err)
		}
	}
	return exits, nil
}

// engineFault reports whether a container's start failed in the
// engine's own step, a hook that the engine gives the runtime (Docker's
// network setup), rather than in anything of the image's: such a start
// can succeed when the container is made again. Seen under load on
// Docker 20.10: "error running hook #0: error running hook: exit status
// 1, stdout: , stderr: ... level=fatal msg=\"no such file or directory\"".
func engineFault(err error) bool {
	return err != nil && strings.Contains(err.Error(), "error running hook")
}

// remove removes an attempt's containers and network, retrying while the
// engine does not answer, until they are gone or the executor is closed.
func (e *Executor) remove(ctx context.Context, rec record) {
	for _, name := range rec.Containers {
		for try := 0; ; try++ {
			_, err := e.cli.ContainerRemove(ctx, name, client.ContainerRemoveOptions{Force: true, RemoveVolumes: true})
			if err == nil || isNotFound(err) {
				break
			}
			e.setHealth(err)
			if !e.pause(ctx, try) {
				return
			}
		}
	}
	if rec.Network != "" {
		for try := 0; ; try++ {
			_, err := e.cli.NetworkRemove(ctx, rec.Network, client.NetworkRemoveOptions{})
			if err == nil || isNotFound(err) {
				break
			}
			if !e.pause(ctx, try) || try > 20 {
				return
			}
		}
	}
}

// pause waits before a retry of an engine call; false once the executor
// or ctx is done.
func (e *Executor) pause(ctx context.Context, try int) bool {
	d := time.Duration(min(try+1, 10)) * 200 * time.Millisecond
	select {
	case <-time.After(d):
		return true
	case <-ctx.Done():
	case <-e.ctx.Done():
	}
	return false
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // only the executor's own types are marshalled
	}
	return b
}

func (e *Executor) readJSON(path string, v any) error {
	b, err := e.fs.ReadFile(path)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}

// Stop sends SIGTERM to the attempt's containers and, after the grace
// period (the job's QSHARE_STOP_GRACE, else grace, else Options.StopGrace),
// SIGKILL. It returns at once; Wait reports the end once the engine has
// removed the containers, so the capacity is held until then.
func (e *Executor) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	a, stop, err := executor.BeginStop(ctx, &e.mu, e.attempts, attemptID)
	if !stop {
		return err
	}
	e.mu.Lock()
	if c := a.cancelLaunch; c != nil {
		c()
	}
	e.mu.Unlock()
	// The stop, with its deadline, is recorded first: an executor that
	// recovers the attempt after a restart carries it out (killAfter)
	// from where this one left it.
	g, err := e.fs.KeepStop(filepath.Join(e.attemptDir(attemptID), fileStopping), executor.StopGrace(a.rec.Grace, grace, e.o.StopGrace), time.Now())
	if err != nil {
		e.log.Warn("container executor: recording a stop", "attempt", attemptID, "err", err)
	}
	if err := e.signal(ctx, a, "SIGTERM"); err != nil {
		e.mu.Lock()
		a.Stopping = false // a later Stop tries again
		e.mu.Unlock()
		return fmt.Errorf("container executor: stopping attempt %s: %w", attemptID, err)
	}
	go e.killAfter(a, g)
	return nil
}

// killAfter sends attempt a's containers SIGKILL once g has passed, unless
// they end first, and sends the SIGTERM again while they are new (below).
func (e *Executor) killAfter(a *attempt, g time.Duration) {
	t := time.NewTimer(g)
	defer t.Stop()
	// A container's init (docker-init, catatonit) that has just been
	// started may not have taken charge of its signals yet, and the
	// kernel drops a signal that a namespace's init does not handle:
	// a SIGTERM in the first moments of a container is sent again,
	// until the container is InitWindow old.
	again := time.NewTimer(200 * time.Millisecond)
	defer again.Stop()
	for wait := 200 * time.Millisecond; ; {
		select {
		case <-a.Done:
			return
		case <-e.ctx.Done():
			return
		case <-again.C:
			if time.Since(a.rec.StartedAt) < InitWindow {
				e.signal(e.ctx, a, "SIGTERM")
				wait *= 2
				again.Reset(wait)
			}
			continue
		case <-t.C:
		}
		break
	}
	e.mu.Lock()
	a.killed = true
	e.mu.Unlock()
	for try := 0; ; try++ {
		if e.signal(e.ctx, a, "SIGKILL") == nil || !e.pause(e.ctx, try) {
			return
		}
	}
}

// InitWindow is how long after its start a container that is stopped is
// sent SIGTERM again (at 0.2s, 0.6s, 1.4s, 3s after the first), in case
// its init had not yet set up its signal handling and the kernel dropped
// the signal. A job stopped within it may see more than one SIGTERM.
const InitWindow = 5 * time.Second

// signal sends sig to each of the attempt's containers that runs.
func (e *Executor) signal(ctx context.Context, a *attempt, sig string) error {
	for _, name := range a.rec.Containers {
		_, err := e.cli.ContainerKill(ctx, name, client.ContainerKillOptions{Signal: sig})
		if err != nil && !isNotFound(err) && !cerrdefs.IsConflict(err) && !notRunning(err) {
			e.setHealth(err)
			return err
		}
	}
	return nil
}

// notRunning reports whether err is the engine's refusal to signal a
// container that has ended (Docker: "is not running"; Podman: "can only
// kill running containers", or "container state improper" while it stops).
func notRunning(err error) bool {
	m := err.Error()
	return strings.Contains(m, "is not running") || strings.Contains(m, "can only kill running containers") || strings.Contains(m, "container state improper")
}

// Wait blocks until the attempt's containers are gone and returns how it
// ended.
func (e *Executor) Wait(ctx context.Context, attemptID string) (executor.Exit, error) {
	return executor.WaitFor(ctx, &e.mu, e.attempts, attemptID)
}

// Forget drops an ended attempt from memory; its log stays on disk.
func (e *Executor) Forget(attemptID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.attempts[attemptID]; ok && a.Ended {
		select {
		case <-a.Done:
			delete(e.attempts, attemptID)
		default:
		}
	}
}

// Close stops watching the attempts; their containers run on, and a new
// executor recovers them.
func (e *Executor) Close() error {
	e.stop()
	e.fs.Close()
	return e.cli.Close()
}

// PendingReason returns the progress of the attempt's image pull, while
// Start pulls it, else "".
func (e *Executor) PendingReason(attemptID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.pending[attemptID]
}

// Recover re-attaches to an attempt started before a restart, found by
// its ID: its record in the attempt's directory and its containers'
// labels. One whose containers ended while no server ran is Exited with
// their exit code; one with no container left and no recorded end is
// Lost.
func (e *Executor) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	if !validName(h.AttemptID) {
		return executor.Lost, nil
	}
	e.mu.Lock()
	if a, ok := e.attempts[h.AttemptID]; ok {
		e.mu.Unlock()
		return executor.Recovered(ctx, &e.mu, &a.Slot)
	}
	a := &attempt{Slot: executor.NewSlot(), id: h.AttemptID, logDone: make(chan struct{})}
	e.attempts[h.AttemptID] = a
	e.claimed[h.AttemptID] = true
	e.mu.Unlock()
	var rec record
	if err := e.readJSON(filepath.Join(e.attemptDir(h.AttemptID), fileRecord), &rec); err != nil {
		e.drop(a, nil)
		return executor.Lost, nil
	}
	r, err := e.attach(ctx, a, rec)
	if err != nil || r == executor.Lost {
		e.drop(a, err)
		return r, err
	}
	close(a.Ready)
	return r, nil
}

// drop forgets an attempt that Recover could not set up.
func (e *Executor) drop(a *attempt, err error) {
	e.mu.Lock()
	a.StartErr = executor.ErrUnknownAttempt
	if err != nil {
		a.StartErr = err
	}
	delete(e.attempts, a.id)
	e.mu.Unlock()
	close(a.Ready)
}

// attach takes up an attempt recorded in rec: ended (its exit recorded),
// running (watched from now on), ended while nobody watched (its exit is
// taken from the engine now), or Lost when none of its containers is
// left. The caller closes a.Ready unless it is Lost or an error.
func (e *Executor) attach(ctx context.Context, a *attempt, rec record) (executor.Recovery, error) {
	a.rec = rec
	dir := e.attemptDir(rec.AttemptID)
	var x executor.Exit
	if e.readJSON(filepath.Join(dir, fileExit), &x) == nil {
		e.mu.Lock()
		a.Exit, a.Ended = x, true
		e.mu.Unlock()
		close(a.logDone)
		go func() { e.remove(e.ctx, rec); e.finish(a) }()
		return executor.Exited, nil
	}
	found, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelAttempt+"="+rec.AttemptID, LabelDataDir+"="+e.o.DataDir)})
	if err != nil {
		e.setHealth(err)
		return 0, fmt.Errorf("container executor: listing the containers of attempt %s: %w", rec.AttemptID, err)
	}
	e.setHealth(nil)
	if len(found.Items) == 0 {
		return executor.Lost, nil
	}
	if len(rec.GPUs) > 0 {
		if err := e.alloc.Reclaim(rec.AttemptID, rec.GPUs); err != nil {
			e.log.Warn("container executor: a recovered attempt's GPUs", "attempt", rec.AttemptID, "err", err)
		}
	}
	stopping := e.fs.IsFile(filepath.Join(dir, fileStopping))
	e.mu.Lock()
	a.Stopping = stopping
	e.mu.Unlock()
	running := false
	for _, c := range found.Items {
		if c.State == container.StateRunning || c.State == container.StateCreated || c.State == container.StatePaused || c.State == container.StateRestarting {
			running = true
		}
	}
	if running {
		go e.watch(a, true)
		if stopping {
			// A stop was under way when the server went: its kill comes
			// at the deadline it was given (a Stop of the attempt is a
			// no-op now that it is marked stopping).
			g, err := e.fs.KeepStop(filepath.Join(dir, fileStopping), executor.StopGrace(a.rec.Grace, 0, e.o.StopGrace), time.Now())
			if err != nil {
				e.log.Warn("container executor: a recovered attempt's stop", "attempt", rec.AttemptID, "err", err)
			}
			go e.killAfter(a, g)
		}
		return executor.Running, nil
	}
	// Ended while no server ran: its exit now, its clean-up in the
	// background (Wait returns once the containers are gone).
	e.copyLogs(ctx, a, false)
	x = e.exitOf(ctx, a, false)
	x = e.upload(ctx, a, x)
	if err := errors.Join(ctx.Err(), e.ctx.Err()); err != nil {
		// As in watch: an end learned under a cancelled context is not
		// recorded; the next Recover learns it again.
		return 0, fmt.Errorf("container executor: recovering attempt %s: %w", rec.AttemptID, err)
	}
	e.record(a, x)
	go func() { e.remove(e.ctx, rec); e.finish(a) }()
	return executor.Exited, nil
}

// watch follows a started attempt to its end: it copies the engine's log
// stream into the attempt's directory, waits for every container to stop
// (a failed instance stops the others), records the exit, removes the
// containers and network, releases the GPUs, and only then reports the end.
func (e *Executor) watch(a *attempt, recovered bool) {
	ctx := e.ctx
	n := len(a.rec.Containers)
	a.exited = make([]chan struct{}, n)
	for k := range a.exited {
		a.exited[k] = make(chan struct{})
	}
	go e.copyLogs(ctx, a, true)
	var wg sync.WaitGroup
	failed := make(chan string, n)
	codes := make([]int64, n)
	known := make([]bool, n)
	for k, name := range a.rec.Containers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer close(a.exited[k])
			if k < len(a.exits) && !recovered {
				codes[k], known[k] = e.awaitExit(ctx, name, a.exits[k])
			} else {
				codes[k], known[k] = e.waitContainer(ctx, name)
			}
			if known[k] && codes[k] != 0 {
				failed <- name
			}
		}()
	}
	all := make(chan struct{})
	go func() { wg.Wait(); close(all) }()
	if len(a.rec.Containers) > 1 {
		select {
		case name := <-failed:
			// One host failed: SageMaker ends the job; the others go too,
			// and the attempt ends as that host did.
			e.mu.Lock()
			a.failed = name
			e.mu.Unlock()
			e.signal(ctx, a, "SIGKILL")
		case <-all:
		}
	}
	<-all
	if ctx.Err() != nil {
		return // closed: a new executor recovers it
	}
	t0 := time.Now()
	select {
	case <-a.logDone:
	case <-time.After(5 * time.Second):
		e.log.Warn("container executor: the log stream did not end with the container", "attempt", a.id)
	}
	t1 := time.Now()
	// Every container's wait said 0: the engine need not be asked again.
	clean := true
	for k := range codes {
		clean = clean && known[k] && codes[k] == 0
	}
	x := e.exitOf(ctx, a, clean)
	x = e.upload(ctx, a, x)
	if ctx.Err() != nil {
		// Closed while the end was being learned or uploaded: what was
		// learned may be the close's doing (an inspect cancelled reads
		// as containers gone), so nothing is recorded and a new executor
		// learns the end again.
		return
	}
	e.record(a, x)
	t2 := time.Now()
	e.remove(ctx, a.rec)
	if ctx.Err() != nil {
		return
	}
	e.finish(a)
	e.log.Debug("container executor: ended", "attempt", a.id, "logs", t1.Sub(t0), "exit", t2.Sub(t1), "remove", time.Since(t2))
}

// waitContainer waits until a container no longer runs, retrying while
// the engine does not answer; it returns its exit code, and false when it
// is gone or the executor closed.
func (e *Executor) waitContainer(ctx context.Context, name string) (int64, bool) {
	for try := 0; ; try++ {
		w := e.cli.ContainerWait(ctx, name, client.ContainerWaitOptions{Condition: container.WaitConditionNotRunning})
		select {
		case r := <-w.Result:
			e.setHealth(nil)
			return r.StatusCode, true
		case err := <-w.Error:
			if isNotFound(err) || ctx.Err() != nil {
				return 0, false
			}
			e.setHealth(err)
		}
		if !e.pause(ctx, try) {
			return 0, false
		}
	}
}

// exitWait is a wait for a container's next exit, asked of the engine
// before the container starts. Podman answers a wait for "not-running"
// only once the cleanup process that conmon starts at the exit has run
// (seconds on a loaded host), and "next-exit" as the exit happens.
type exitWait struct {
	w      client.ContainerWaitResult
	cancel context.CancelFunc
	done   bool // its answer was taken
}

// nextExit asks the engine to report the next exit of the container.
func (e *Executor) nextExit(name string) *exitWait {
	ctx, cancel := context.WithCancel(e.ctx)
	return &exitWait{w: e.cli.ContainerWait(ctx, name, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit}), cancel: cancel}
}

// close ends the wait.
func (w *exitWait) close() {
	w.cancel()
	if !w.done {
		w.done = true
		go func() { // the client's reader sends once, unbuffered
			select {
			case <-w.w.Result:
			case <-w.w.Error:
			}
		}()
	}
}

// awaitExit waits for the exit that w asked for. Podman takes up its
// exit events only after it has answered the request, so an exit in
// between is not reported: from 2 s on, with the interval doubling up to
// a minute, the container's state is asked too. A wait the engine breaks
// (a restart) goes on as waitContainer.
func (e *Executor) awaitExit(ctx context.Context, name string, w *exitWait) (int64, bool) {
	defer w.close()
	d := 2 * time.Second
	check := time.NewTimer(d)
	defer check.Stop()
	for {
		select {
		case r := <-w.w.Result:
			w.done = true
			if r.Error == nil && r.StatusCode >= 0 {
				e.setHealth(nil)
				return r.StatusCode, true
			}
			// Podman's -1: its event stream ended without the exit.
			return e.waitContainer(ctx, name)
		case err := <-w.w.Error:
			w.done = true
			if isNotFound(err) || ctx.Err() != nil {
				return 0, false
			}
			return e.waitContainer(ctx, name)
		case <-ctx.Done():
			return 0, false
		case <-check.C:
			in, err := e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if isNotFound(err) {
				return 0, false
			}
			if st := in.Container.State; err == nil && st != nil && !st.Running && !st.Paused && !st.Restarting {
				return int64(st.ExitCode), true
			}
			d = min(2*d, time.Minute)
			check.Reset(d)
		}
	}
}

// exitOf works out how an attempt ended from its container that failed
// first, else the first that failed, else its first: the exit code, the signal of a stop (the init
// process reports 128+N), an out-of-memory kill, and the failure file.
// With clean, every container's wait has reported exit code 0, and the
// engine is not asked again (its end is now, not its FinishedAt).
func (e *Executor) exitOf(ctx context.Context, a *attempt, clean bool) executor.Exit {
	e.mu.Lock()
	stopping, killed, failed := a.Stopping, a.killed, a.failed
	e.mu.Unlock()
	x := executor.Exit{AttemptID: a.id, Stopped: stopping, At: time.Now().UTC(), ExitCode: -1}
	found := false
	oom := false
	names := a.rec.Containers
	if failed != "" {
		names = append([]string{failed}, names...) // the host that failed first tells
	}
	if clean {
		x.ExitCode, found, names = 0, true, nil
	}
	for _, name := range names {
		var in client.ContainerInspectResult
		var err error
		for try := 0; ; try++ {
			in, err = e.cli.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
			if err == nil || isNotFound(err) || !e.pause(ctx, try) {
				break
			}
			e.setHealth(err)
		}
		if err != nil || in.Container.State == nil {
			continue
		}
		code := in.Container.State.ExitCode
		if !found || (x.ExitCode == 0 && code != 0) {
			x.ExitCode, found = code, true
			oom = in.Container.State.OOMKilled
			if t, err := time.Parse(time.RFC3339Nano, in.Container.State.FinishedAt); err == nil && t.Year() > 1 {
				x.At = t.UTC()
			}
		}
	}
	switch {
	case !found:
		x.Lost = true
		x.Reason = "The attempt's containers were removed before their end was learned"
		return x
	case stopping && x.ExitCode == 128+15:
		x.ExitCode, x.Signal = -1, "SIGTERM"
		x.Reason = "Essential process terminated by signal SIGTERM"
	case stopping && x.ExitCode == 128+9:
		x.ExitCode, x.Signal = -1, "SIGKILL"
		x.Reason = "Essential process terminated by signal SIGKILL"
		if killed {
			x.Reason = data.KilledReason
		}
	case oom:
		x.Reason = "OutOfMemoryError: the container used more memory than its instance type allows"
	default:
		x.Reason = fmt.Sprintf("Essential process exited with code %d", x.ExitCode)
	}
	if x.ExitCode != 0 || x.Signal != "" {
		if line := process.FailureLine(e.fs, filepath.Join(a.rec.Output, "failure")); line != "" {
			x.Reason = line
		}
	}
	return x
}

// record writes the attempt's exit to its directory, so that a restarted
// executor reports it even once the containers are gone.
func (e *Executor) record(a *attempt, x executor.Exit) {
	if err := e.fs.WriteFileAtomic(filepath.Join(e.attemptDir(a.id), fileExit), mustJSON(x)); err != nil {
		e.log.Warn("container executor: recording an attempt's exit", "attempt", a.id, "err", err)
	}
	e.mu.Lock()
	a.Exit, a.Ended = x, true
	e.mu.Unlock()
}

// finish reports the end of an attempt whose containers are gone.
func (e *Executor) finish(a *attempt) {
	e.alloc.Release(a.id)
	select {
	case <-a.Done:
	default:
		close(a.Done)
	}
}

// Sweep removes the containers (and networks) of this data directory's
// attempts that keep does not hold and that this executor has not started
// or recovered, and records their end as Lost.
func (e *Executor) Sweep(ctx context.Context, keep map[string]bool) ([]string, error) {
	list, err := e.cli.ContainerList(ctx, client.ContainerListOptions{All: true,
		Filters: make(client.Filters).Add("label", LabelDataDir+"="+e.o.DataDir)})
	if err != nil {
		e.setHealth(err)
		return nil, fmt.Errorf("container executor: listing containers: %w", err)
	}
	byAttempt := map[string][]string{}
	for _, c := range list.Items {
		id := c.Labels[LabelAttempt]
		if id == "" || keep[id] {
			continue
		}
		byAttempt[id] = append(byAttempt[id], c.ID)
	}
	var swept []string
	for id, cs := range byAttempt {
		e.mu.Lock()
		mine := e.claimed[id]
		e.mu.Unlock()
		if mine {
			continue
		}
		rec := record{AttemptID: id, Containers: cs}
		var disk record
		if validName(id) && e.readJSON(filepath.Join(e.attemptDir(id), fileRecord), &disk) == nil {
			rec.Network = disk.Network
		}
		e.remove(ctx, rec)
		if validName(id) && e.fs.IsFile(filepath.Join(e.attemptDir(id), fileRecord)) {
			x := executor.Exit{AttemptID: id, ExitCode: -1, Lost: true, Reason: "Swept: no job claims the attempt", At: time.Now().UTC()}
			e.fs.WriteFileAtomic(filepath.Join(e.attemptDir(id), fileExit), mustJSON(x))
		}
		swept = append(swept, id)
	}
	return swept, nil
}

// errImageNotFound is how a missing image fails an attempt, in
// SageMaker's words.
func errImageNotFound(img string, err error) error {
	return qshare.Errorf(qshare.EINVALID, "CannotStartContainerError: ClientError: image not found: %s (%v)", img, err)
}

// isNotFound reports whether err is the engine's "no such object".
// Podman answers some lookups of a removed container with a server error
// that only its words tell ("does not exist in database").
func isNotFound(err error) bool {
	// An engine socket that does not exist fails with ENOENT too: that is
	// an engine that does not answer, not a container that is gone.
	if err == nil || client.IsErrConnectionFailed(err) {
		return false
	}
	if cerrdefs.IsNotFound(err) || errors.Is(err, os.ErrNotExist) {
		return true
	}
	m := err.Error()
	return strings.Contains(m, "no such container") || strings.Contains(m, "does not exist in database")
}
