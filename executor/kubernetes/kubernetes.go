// Package kubernetes is the executor that runs each attempt of a service
// job as pods of a Kubernetes cluster: qshare's engine decides who runs,
// who borrows and who is preempted; the cluster places and runs the pods.
// The daemon calls it through executor.Executor.
//
// One attempt of N instances is N bare pods (not a batch/v1 Job; see
// docs/kubernetes.md for why), named from the attempt ID with their index,
// labelled with the job, attempt, queue and quota share, with restartPolicy
// Never, and for N > 1 a headless Service so that the pods find each other
// by name. Each pod follows SageMaker's training contract: the payload's
// image, entrypoint and arguments, its Environment with the SM_* and
// QSHARE_* variables, input/config files from a ConfigMap (or, for one
// instance, its own annotations), and, when the payload has a
// CheckpointConfig, the job's checkpoint claim, the same on every attempt,
// at its LocalPath. A one-instance job without one is a single pod.
//
// An informer on the namespace's pods is the executor's view of the
// cluster: how an attempt ended is read from its pods' status (exit code,
// signal, OOMKilled, eviction, node loss, the failure file as termination
// message), and Wait returns only once every pod of the attempt is gone or
// has ended. Every call to the API server is retried with backoff while the
// server is away, and every object is named from the attempt, so starting
// or stopping twice is harmless.
package kubernetes

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/client-go/tools/cache"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/gpu"
	"qshare/executor/kubernetes/kubeclient"
	"qshare/trainingjob"
)

// Defaults of Options and Config.
const (
	DefaultStopGrace    = executor.DefaultStopGrace
	DefaultStartWait    = 10 * time.Second
	DefaultStartTimeout = 5 * time.Minute
	DefaultKeepEnded    = 24 * time.Hour
	// healthTimeout bounds each health check of the API server.
	healthTimeout = 5 * time.Second
)

// Options configure an Executor.
type Options struct {
	// Client talks to the API server.
	Client *kubeclient.Core
	// Namespace holds the attempts' objects.
	Namespace string
	// Config is the --kube-config file's content.
	Config Config
	// GPUs is the GPU table (nil: the built-in one).
	GPUs gpu.Table
	// StopGrace is the grace period of a Stop whose caller and job give
	// none. Zero means DefaultStopGrace.
	StopGrace time.Duration
	// StartWait bounds how long Start waits for the pods to run before it
	// returns with them still pending (the cluster's business then, within
	// Config.StartTimeout). Zero means DefaultStartWait.
	StartWait time.Duration
	// HealthInterval is how often the executor asks the API server whether
	// it answers, for Health. Zero means 5 s.
	HealthInterval time.Duration
	// Log receives the executor's warnings; nil discards them.
	Log *slog.Logger
	// S3 is where the pods find S3 for the jobs' data (data.go): it must
	// be reachable from them. Its credentials, if any, go to each such
	// attempt's Secret.
	S3 data.Endpoint

	// endedMargin is how long before a pod's deletion its container must
	// have finished for the pod to count as ended before it was deleted
	// (endedBeforeDeletion). Zero means defaultEndedMargin; tests, whose
	// kubelet deletes a pod within milliseconds of its end, shorten it.
	endedMargin time.Duration
}

// defaultEndedMargin is how much earlier than a pod's deletion its
// container must have finished for qshare, seeing the pod for the first
// time already ended and deleted, to take its end as its own rather than
// as the end of a deletion outside qshare. The two look alike but for
// that gap: the API server moves the deletion's time to the kubelet's
// last deletion (grace 0), which follows the container's end by the
// kubelet's clean-up, and it keeps whole seconds; the container's finish
// is the node's clock.
const defaultEndedMargin = 10 * time.Second

// Executor runs attempts as pods. It is safe for concurrent use.
type Executor struct {
	o      Options
	c      *kubeclient.Core
	ns     string
	cfg    Config
	gpus   gpu.Table
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// closeMu guards closing, set by Close: no goroutine joins wg after.
	closeMu sync.Mutex
	closing bool
	pods    cache.SharedIndexInformer

	mu       sync.Mutex
	attempts map[string]*attempt // by label value of the attempt ID
	begin    sync.Mutex          // serialises the first Start of an attempt ID
	starting map[string]*sync.Mutex
	// jobsSince holds, under begin, the jobs of every attempt started or
	// recovered through this executor, until SweepJobs has done its work
	// (then it is nil): their claims are not the sweep's.
	jobsSince map[string]bool
	apiErr    string // the last failure to reach the API server, "" when it answers
	// downSince is when the API server stopped answering (zero while it
	// answers), and downBefore the time of its outages that have ended:
	// the start timeout does not count them (down).
	downSince  time.Time
	downBefore time.Duration
	// Which untracked attempts' ended pods expireEnded may delete, under
	// mu: those this executor followed to their end (forgotten, by label
	// value), and, once Sweep has run (swept), those that the store did
	// not claim then (claimed) and that were not tracked since.
	forgotten map[string]bool
	claimed   map[string]bool
	swept     bool
	// noClaim holds, under mu, the jobs started through this executor
	// whose payload has no CheckpointConfig, until JobFinished.
	noClaim map[string]bool
	// unfinalizing holds, under mu, the pods (by UID) whose Finalizer is
	// being removed, until the watch sees them gone.
	unfinalizing map[types.UID]bool
	// reasons counts the changes of the attempts' pending reasons.
	reasons atomic.Uint64
	// configBudget is defaultConfigBudget; a field of its own executor
	// only so that a test, running beside others, can split a small
	// attempt's files (set before its first Start).
	configBudget int
}

var (
	_ executor.Executor                = (*Executor)(nil)
	_ executor.CapacityChecker         = (*Executor)(nil)
	_ executor.PendingReasoner         = (*Executor)(nil)
	_ executor.PendingReasonsVersioner = (*Executor)(nil)
	_ executor.HealthReporter          = (*Executor)(nil)
	_ executor.Sweeper                 = (*Executor)(nil)
	_ executor.JobFinisher             = (*Executor)(nil)
	_ executor.JobSweeper              = (*Executor)(nil)
	_ executor.InstanceLogger          = (*Executor)(nil)
)

// attempt is what the executor knows of one attempt.
type attempt struct {
	id, job  string
	label    string
	n        int
	parts    int // the ConfigMaps of its files (annParts), or noConfigMaps; 0 while unknown
	grace    time.Duration
	started  time.Time
	created  time.Time     // when this executor created or found the pods
	downAt   time.Duration // the executor's downLocked then
	timeout  time.Duration
	stopping bool      // Stop was called (or the pods carry the stop annotation)
	stopAt   time.Time // the stop's deadline: its grace period's end (annStopped's value)
	stopSent bool      // this executor has issued the deletions of a Stop
	ending   bool      // the executor is deleting the rest of the pods after an end
	last     map[int]*corev1.Pod
	exit     executor.Exit
	decided  bool // exit holds the attempt's end
	done     chan struct{}
	closed   bool
	reason   string // the pending reason last reported
	byHand   int    // the index of a pod deleted outside qshare, or -1
	// relabeled is the label that the pod byHand lost outside qshare, ""
	// when it was deleted.
	relabeled string
	// checking: the start timeout has passed on the watch's view and the
	// API server is being asked; timedOut: the server's own list, taken
	// after the timeout, showed the pods not all placed.
	checking, timedOut bool
	// changed has a value once the attempt's pods or its stop changed
	// since awaitRun last looked (see poke).
	changed chan struct{}
}

// poke tells a waiting awaitRun to look again; it never blocks.
func (a *attempt) poke() {
	select {
	case a.changed <- struct{}{}:
	default:
	}
}

// New returns an executor over o.Client in o.Namespace. It starts the
// informers and waits for their first list within ctx; an API server that
// cannot be reached by then is not an error (the informers keep trying).
func New(ctx context.Context, o Options) (*Executor, error) {
	if o.Client == nil || o.Namespace == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "the Kubernetes executor needs a client and a namespace (--namespace)")
	}
	if err := o.Config.check(); err != nil {
		return nil, err
	}
	if o.GPUs == nil {
		o.GPUs = gpu.Builtin()
	}
	o.StopGrace = executor.OrDefault(o.StopGrace, DefaultStopGrace)
	o.StartWait = executor.OrDefault(o.StartWait, DefaultStartWait)
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	o.HealthInterval = executor.OrDefault(o.HealthInterval, 5*time.Second)
	o.endedMargin = executor.OrDefault(o.endedMargin, defaultEndedMargin)
	lctx, cancel := context.WithCancel(context.Background())
	e := &Executor{o: o, c: o.Client, ns: o.Namespace, cfg: o.Config, gpus: o.GPUs, log: o.Log, ctx: lctx, cancel: cancel,
		attempts: map[string]*attempt{}, starting: map[string]*sync.Mutex{}, jobsSince: map[string]bool{},
		forgotten: map[string]bool{}, claimed: map[string]bool{}, noClaim: map[string]bool{},
		unfinalizing: map[types.UID]bool{}, configBudget: defaultConfigBudget}
	pods := o.Client.Pods(o.Namespace)
	e.pods = kubeclient.Informer(&corev1.Pod{}, pods.List, pods.Watch,
		func(l *metav1.ListOptions) { l.LabelSelector = LabelManagedBy + "=" + managedBy })
	_ = e.pods.AddIndexers(cache.Indexers{"attempt": func(obj any) ([]string, error) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return nil, nil
		}
		return []string{p.Labels[LabelAttemptID]}, nil
	}})
	_, _ = e.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { e.observe(obj, false) },
		UpdateFunc: func(_, obj any) { e.observe(obj, false) },
		DeleteFunc: func(obj any) { e.observe(obj, true) },
	})
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.pods.RunWithContext(lctx) }()
	sctx, scancel := context.WithTimeout(ctx, 10*time.Second)
	cache.WaitForCacheSync(sctx.Done(), e.pods.HasSynced)
	scancel()
	e.wg.Add(2)
	go e.every(time.Minute, e.expireEnded)
	go e.every(e.o.HealthInterval, e.checkHealth)
	return e, nil
}

// setAPIErr records whether the API server answers, for Health.
func (e *Executor) setAPIErr(err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err == nil {
		e.apiErr = ""
		if !e.downSince.IsZero() {
			e.downBefore += time.Since(e.downSince)
			e.downSince = time.Time{}
		}
	} else {
		e.apiErr = err.Error()
		if e.downSince.IsZero() {
			e.downSince = time.Now()
		}
	}
}

// downLocked is how long the API server has not answered, in all, since
// this executor began; under e.mu.
func (e *Executor) downLocked() time.Duration {
	d := e.downBefore
	if !e.downSince.IsZero() {
		d += time.Since(e.downSince)
	}
	return d
}

// waitedLocked is how long an attempt's pods have had to be placed: the
// time since they were created, less the API server's outages since,
// during which nothing could be placed or seen; under e.mu.
func (e *Executor) waitedLocked(a *attempt) time.Duration {
	return time.Since(a.created) - (e.downLocked() - a.downAt)
}

// Health says, while the API server does not answer, what that means for
// the attempts (executor.HealthReporter); "" while it answers.
func (e *Executor) Health() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.apiErr == "" {
		return ""
	}
	return "The Kubernetes API server does not answer (" + e.apiErr + "): running attempts keep their capacity and state, and their starts and stops are retried until it answers"
}

// checkHealth asks the API server for its version, every
// Options.HealthInterval, so that its absence and its return are noticed
// even when nothing else calls it.
func (e *Executor) checkHealth() {
	// Bounded: a server that keeps the connection but answers nothing
	// (hung, overloaded) is one that does not answer, and the client has
	// no timeout of its own.
	ctx, cancel := context.WithTimeout(e.ctx, healthTimeout)
	defer cancel()
	err := e.c.RESTClient().Get().AbsPath("/version").Do(ctx).Error()
	if e.ctx.Err() != nil {
		return
	}
	e.setAPIErr(err)
}

// Name returns "kubernetes".
func (e *Executor) Name() string { return "kubernetes" }

// PendingReasonsVersion counts the changes of the attempts' pending
// reasons (executor.PendingReasonsVersioner).
func (e *Executor) PendingReasonsVersion() uint64 { return e.reasons.Load() }

// PendingReason is the scheduler's reason why the attempt's pods do not
// all run yet, as the watch last saw it ("0/3 nodes are available: 3
// Insufficient nvidia.com/gpu."), or "" (executor.PendingReasoner).
func (e *Executor) PendingReason(attemptID string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a := e.attempts[labelValue(attemptID)]; a != nil {
		return a.reason
	}
	return ""
}

// Validate checks a payload: an image, a usable environment and grace.
func (e *Executor) Validate(payload string, demand qshare.Capacity) error {
	return executor.ValidatePayload(payload, demand, e.ValidateRequest)
}

// ValidateRequest is Validate for a payload already parsed with
// trainingjob.Parse. It only reads req.
func (e *Executor) ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error {
	_, _, _, err := e.check(req, demand)
	return err
}

func (e *Executor) check(req *trainingjob.Request, demand qshare.Capacity) (string, int, time.Duration, error) {
	// Pipe mode and FileSystemDataSource are refused by every executor
	// (package data); the pods stage the rest (data.go).
	if err := data.Validate(req); err != nil {
		return "", 0, 0, err
	}
	if err := executor.NoNetworkIsolation(req, "Kubernetes"); err != nil {
		return "", 0, 0, err
	}
	if strings.TrimSpace(req.AlgorithmSpecification.TrainingImage) == "" {
		return "", 0, 0, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload has no AlgorithmSpecification.TrainingImage: the Kubernetes executor runs the job's container image, so name one")
	}
	for _, a := range req.AlgorithmSpecification.ContainerEntrypoint {
		if a == "" {
			return "", 0, 0, qshare.Errorf(qshare.EINVALID, "AlgorithmSpecification.ContainerEntrypoint holds an empty string: give the command and its arguments")
		}
	}
	typ, n, err := executor.InstanceOf(req, demand, "Kubernetes")
	if err != nil {
		return "", 0, 0, err
	}
	if len(req.ResourceConfig.InstanceGroups) > 1 {
		return "", 0, 0, qshare.Errorf(qshare.EINVALID, "ResourceConfig: the Kubernetes executor runs instances of one type per job; give InstanceType and InstanceCount")
	}
	if n > 1000 {
		return "", 0, 0, qshare.Errorf(qshare.EINVALID, "ResourceConfig.InstanceCount %d: the Kubernetes executor runs at most 1000 pods per attempt", n)
	}
	if req.CheckpointConfig != nil && req.CheckpointConfig.LocalPath != "" {
		p := req.CheckpointConfig.LocalPath
		if !strings.HasPrefix(p, "/") || strings.Contains(p+"/", "/../") || strings.ContainsAny(p, ":\x00") || p == "/" {
			return "", 0, 0, qshare.Errorf(qshare.EINVALID, "CheckpointConfig.LocalPath %q is not an absolute directory path inside the container such as /opt/ml/checkpoints", p)
		}
		// The pod's own mounts: the API server refuses a mount path
		// twice, and the config mount is read-only.
		if c := path.Clean(p); c == modelDir || c == configDir || c == channelsDir || c == BinDir || strings.HasPrefix(c, configDir+"/") {
			return "", 0, 0, qshare.Errorf(qshare.EINVALID, "CheckpointConfig.LocalPath %q is where the container has %s: give a directory of its own such as /opt/ml/checkpoints", p, c)
		}
	}
	grace, err := executor.EnvironmentAndGrace(req)
	if err != nil {
		return "", 0, 0, err
	}
	if _, err := e.dataPlan(executor.Spec{}, req, n, checkpointDir(req), 0); err != nil {
		return "", 0, 0, err
	}
	return typ, n, grace, nil
}

// stopGrace is the grace of a stop: the job's own, else the caller's, else
// Options.StopGrace (executor.StopGrace).
func (e *Executor) stopGrace(job, caller time.Duration) time.Duration {
	return executor.StopGrace(job, caller, e.o.StopGrace)
}

func (e *Executor) startLock(id string) *sync.Mutex {
	e.begin.Lock()
	defer e.begin.Unlock()
	m := e.starting[id]
	if m == nil {
		m = &sync.Mutex{}
		e.starting[id] = m
	}
	return m
}

// Start creates the attempt's objects and returns once all its pods run,
// or they have ended, or after Options.StartWait with some still pending.
// Starting an attempt ID again, even after a restart, returns the handle
// of the pods that exist and never creates a second set.
func (e *Executor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	req, err := trainingjob.Parse(s.Payload)
	if err != nil {
		return executor.Handle{}, err
	}
	typ, n, grace, err := e.check(req, s.Demand)
	if err != nil {
		return executor.Handle{}, err
	}
	e.noteJob(s.JobID)
	m := e.startLock(s.AttemptID)
	m.Lock()
	defer m.Unlock()
	if a := e.lookupAttempt(s.AttemptID); a != nil {
		return e.handle(a), nil
	}
	// After a restart, or a crash between creating and recording: the pods
	// may exist already.
	a, err := e.existing(ctx, s.AttemptID)
	if err != nil {
		return executor.Handle{}, err
	}
	// A set that a crash cut short (pods 0..k made, the rest not) is
	// completed: create keeps what exists and makes the missing pods, so
	// the attempt runs whole instead of waiting for pods never made.
	if a == nil || e.incomplete(a) {
		at := time.Now()
		if a != nil && !a.started.IsZero() {
			at = a.started
		}
		p, err := e.build(s, req, typ, n, grace, at)
		if err != nil {
			return executor.Handle{}, err
		}
		if p.claim == nil {
			e.noteNoClaim(s.JobID)
		}
		if err := e.create(ctx, p); err != nil {
			if ctx.Err() == nil {
				// Refused part way (a ResourceQuota, an admission
				// webhook): the daemon records CannotStartAttempt and
				// gives the capacity away, so nothing of the attempt may
				// run on untracked.
				if a != nil {
					e.mu.Lock()
					a.ending = true
					e.mu.Unlock()
				}
				e.rollback(s.AttemptID, n, p.configMaps())
			}
			return executor.Handle{}, err
		}
		if a == nil {
			a = e.track(s.AttemptID, s.JobID, n, grace, time.Now().UTC(), false)
			if st, err := time.Parse(time.RFC3339Nano, p.pods[0].Annotations[annStarted]); err == nil {
				a.started = st
			}
		}
		e.mu.Lock()
		a.parts = p.configMaps()
		e.mu.Unlock()
	}
	e.evaluate(a)
	e.awaitRun(ctx, a)
	return e.handle(a), nil
}

// incomplete reports whether an adopted attempt lacks some of its pods
// while nothing ended or stopped it.
func (e *Executor) incomplete(a *attempt) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.decided || a.stopping {
		return false
	}
	for i := 0; i < a.n; i++ {
		if a.last[i] == nil {
			return true
		}
	}
	return false
}

// rollback deletes the pods, ConfigMap and Service of an attempt whose
// objects could not all be created. The job's checkpoint claim stays,
// for its other attempts.
func (e *Executor) rollback(attemptID string, n, parts int) {
	ctx, cancel := context.WithTimeout(e.ctx, 30*time.Second)
	defer cancel()
	e.deletePods(ctx, attemptID, n, 0, "")
	for i := 0; i < n; i++ {
		// The start failed and is recorded so: nothing will start it again.
		e.unfinalize(podName(attemptID, i), "", nil)
	}
	e.deleteAttemptObjects(ctx, attemptID, parts)
}

// markMissing records the pods of a recovered attempt that the API server
// does not have as gone, with their end unseen: they were deleted while
// the server was down (by hand, or by a stop whose mark the others carry),
// so the attempt ends as their deletion says instead of waiting for them.
func (e *Executor) markMissing(a *attempt) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for i := 0; i < a.n; i++ {
		if a.last[i] == nil {
			a.last[i] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: podName(a.id, i), Namespace: e.ns,
				Labels: map[string]string{LabelIndex: strconv.Itoa(i)}, Annotations: map[string]string{annGone: "true"}}}
		}
	}
}

func (e *Executor) handle(a *attempt) executor.Handle {
	return executor.Handle{AttemptID: a.id, StartedAt: a.started, LogPath: "pods/" + e.ns + "/" + podName(a.id, 0) + "/log",
		State: []byte(`{"namespace":` + strconv.Quote(e.ns) + `,"pod":` + strconv.Quote(podName(a.id, 0)) + `}`)}
}

// awaitRun waits until all the attempt's pods run or it has ended, for at
// most Options.StartWait, or the start timeout where that is shorter: the
// timeout is measured by Wait's clock, which runs only once Start has
// returned, so a longer wait held a capacity failure back until
// StartWait had passed. It looks again whenever the pod watch or a stop
// pokes the attempt: thousands of attempts starting at once cost nothing
// while they wait (a poll every 20 ms of each was a fifth of qshare's CPU
// in bench kube).
func (e *Executor) awaitRun(ctx context.Context, a *attempt) {
	deadline := time.NewTimer(min(e.o.StartWait, a.timeout))
	defer deadline.Stop()
	for {
		e.mu.Lock()
		done := a.decided || a.stopping || e.runningLocked(a)
		e.mu.Unlock()
		if done {
			return
		}
		select {
		case <-a.changed:
		case <-deadline.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

func (e *Executor) runningLocked(a *attempt) bool {
	for i := 0; i < a.n; i++ {
		p := a.last[i]
		if p == nil || p.Status.Phase != corev1.PodRunning {
			return false
		}
	}
	return true
}

// create makes the objects of a plan, each once: an object that exists
// already (a Start again after a crash) is left as it is. Failures to
// reach the API server are retried with backoff until ctx ends; a refusal
// (the namespace does not exist, the ServiceAccount may not) is returned.
func (e *Executor) create(ctx context.Context, p *plan) error {
	type object struct {
		what, name string
		create     func(context.Context) error
	}
	var objs []object
	if p.claim != nil {
		objs = append(objs, object{"the checkpoint claim", p.claim.Name, func(ctx context.Context) error {
			_, err := e.c.PersistentVolumeClaims(e.ns).Create(ctx, p.claim, metav1.CreateOptions{})
			return err
		}})
	}
	if p.config != nil {
		objs = append(objs, object{"the ConfigMap", p.config.Name, func(ctx context.Context) error {
			cm, err := e.c.ConfigMaps(e.ns).Create(ctx, p.config, metav1.CreateOptions{})
			if apierrors.IsAlreadyExists(err) && p.secret != nil { // made before a crash: its UID owns the Secret
				cm, err = e.c.ConfigMaps(e.ns).Get(ctx, p.config.Name, metav1.GetOptions{})
			}
			if err == nil {
				p.config.UID = cm.UID
			}
			return err
		}})
	}
	if p.secret != nil {
		objs = append(objs, object{"the data Secret", p.secret.Name, func(ctx context.Context) error {
			p.secret.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: p.config.Name, UID: p.config.UID}}
			_, err := e.c.Secrets(e.ns).Create(ctx, p.secret, metav1.CreateOptions{})
			return err
		}})
	}
	for _, cm := range p.parts {
		objs = append(objs, object{"the ConfigMap", cm.Name, func(ctx context.Context) error {
			_, err := e.c.ConfigMaps(e.ns).Create(ctx, cm, metav1.CreateOptions{})
			return err
		}})
	}
	if p.service != nil {
		objs = append(objs, object{"the Service", p.service.Name, func(ctx context.Context) error {
			_, err := e.c.Services(e.ns).Create(ctx, p.service, metav1.CreateOptions{})
			return err
		}})
	}
	for _, pod := range p.pods {
		objs = append(objs, object{"the pod", pod.Name, func(ctx context.Context) error {
			_, err := e.c.Pods(e.ns).Create(ctx, pod, metav1.CreateOptions{})
			return err
		}})
	}
	for _, o := range objs {
		if err := e.retry(ctx, func(ctx context.Context) error {
			err := o.create(ctx)
			if apierrors.IsNotFound(err) {
				// Not an object gone, as for a delete: the namespace is.
				return permanent{fmt.Errorf("namespace %s: %w", e.ns, err)}
			}
			return err
		}); err != nil {
			return fmt.Errorf("creating %s %s: %w", o.what, o.name, err)
		}
	}
	return nil
}

// permanent is an error that retry returns at once, whatever it wraps.
type permanent struct{ err error }

func (p permanent) Error() string { return p.err.Error() }
func (p permanent) Unwrap() error { return p.err }

// retry calls f until it succeeds, finds the object there already (a
// create) or gone (a delete), fails for a reason other than the API
// server's absence, or ctx ends; it backs off up to 5 s between calls.
func (e *Executor) retry(ctx context.Context, f func(context.Context) error) error {
	delay := 50 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := f(cctx)
		cancel()
		if p, ok := err.(permanent); ok {
			return p.err
		}
		if err == nil || apierrors.IsAlreadyExists(err) || apierrors.IsNotFound(err) {
			e.setAPIErr(nil)
			return nil
		}
		if !transient(err) {
			return err
		}
		e.setAPIErr(err)
		select {
		case <-ctx.Done():
			return fmt.Errorf("the Kubernetes API server did not answer: %w", err)
		case <-time.After(delay):
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// transient reports whether err is the API server's absence or overload,
// worth trying again, rather than a refusal.
func transient(err error) bool {
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		switch {
		case apierrors.IsServerTimeout(err), apierrors.IsTimeout(err), apierrors.IsTooManyRequests(err),
			apierrors.IsServiceUnavailable(err), apierrors.IsInternalError(err), apierrors.IsUnexpectedServerError(err):
			return true
		}
		return false
	}
	return !errors.Is(err, context.Canceled)
}

func (e *Executor) lookupAttempt(id string) *attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.attempts[labelValue(id)]
}

// track registers an attempt whose pods exist.
func (e *Executor) track(id, job string, n int, grace time.Duration, started time.Time, stopping bool) *attempt {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a := e.attempts[labelValue(id)]; a != nil {
		return a
	}
	timeout := e.cfg.startTimeout()
	delete(e.claimed, labelValue(id))
	a := &attempt{id: id, job: job, label: labelValue(id), n: n, grace: grace, started: started, created: time.Now(), downAt: e.downLocked(), timeout: timeout,
		stopping: stopping, byHand: -1, last: map[int]*corev1.Pod{}, done: make(chan struct{}), changed: make(chan struct{}, 1)}
	for _, obj := range e.podsOf(a.label) {
		a.observe(obj, false)
	}
	e.attempts[a.label] = a
	return a
}

func (e *Executor) podsOf(label string) []*corev1.Pod {
	objs, _ := e.pods.GetIndexer().ByIndex("attempt", label)
	out := make([]*corev1.Pod, 0, len(objs))
	for _, o := range objs {
		if p, ok := o.(*corev1.Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// existing is find for Start. Once the pod informer has made its first
// list, every pod made before this process started is in its cache, and
// the pods of an attempt this process created are tracked already, so the
// cache answers. A LIST through the API server for every new attempt cost
// the server a scan of the namespace's pods each, O(n²) in a burst of
// starts. A pod created too recently for the cache (a Start retried after
// a failure part way) is still found by create, which leaves an object
// that exists as it is. Before the first list, find asks the server.
func (e *Executor) existing(ctx context.Context, id string) (*attempt, error) {
	if !e.pods.HasSynced() {
		return e.find(ctx, id)
	}
	var pods []*corev1.Pod
	for _, p := range e.podsOf(labelValue(id)) {
		if p.Annotations[annAttemptID] == id {
			pods = append(pods, p)
		}
	}
	if len(pods) == 0 {
		return nil, nil
	}
	return e.adopt(id, pods), nil
}

// find looks for an attempt's pods through the API server (not the
// informer's cache, which may lag behind a restart) and tracks them; nil
// when there are none.
func (e *Executor) find(ctx context.Context, id string) (*attempt, error) {
	var list *corev1.PodList
	err := e.retry(ctx, func(ctx context.Context) error {
		var err error
		list, err = e.c.Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelManagedBy: managedBy, LabelAttemptID: labelValue(id)}.String()})
		return err
	})
	if err != nil {
		return nil, err
	}
	var pods []*corev1.Pod
	have := map[string]bool{}
	if list != nil {
		for i := range list.Items {
			if p := &list.Items[i]; p.Annotations[annAttemptID] == id {
				pods = append(pods, p)
				have[p.Name] = true
			}
		}
	}
	// A pod whose label was removed or changed by hand while no server
	// ran is not in the list, yet may run: look for each one missing by
	// its name (pod 0 first, which says how many there are), so that it
	// is not taken for a deletion and left to run unseen.
	n := 1
	if len(pods) > 0 {
		n, _ = strconv.Atoi(pods[0].Annotations[annInstances])
	}
	var unlabelled []*corev1.Pod
	for i := 0; i < max(n, 1); i++ {
		name := podName(id, i)
		if have[name] {
			continue
		}
		var p *corev1.Pod
		if err := e.retry(ctx, func(ctx context.Context) error {
			q, err := e.c.Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				p = q
			}
			return err
		}); err != nil {
			return nil, err
		}
		if p == nil || p.Annotations[annAttemptID] != id {
			continue
		}
		pods, unlabelled = append(pods, p), append(unlabelled, p)
		if len(pods) == 1 {
			n, _ = strconv.Atoi(p.Annotations[annInstances])
		}
	}
	if len(pods) == 0 {
		return nil, nil
	}
	a := e.adopt(id, pods)
	for _, p := range unlabelled {
		// The watch does not show it: follow it through the API server
		// until it is gone (evaluate ends the attempt and deletes it).
		e.spawn(func() { e.followUnwatched(a, p) })
	}
	return a, nil
}

// adopt tracks an attempt from its pods, found by find or existing; the
// first carries the attempt's annotations.
func (e *Executor) adopt(id string, pods []*corev1.Pod) *attempt {
	p := pods[0]
	n, _ := strconv.Atoi(p.Annotations[annInstances])
	if n < 1 {
		n = 1
	}
	grace, _ := time.ParseDuration(p.Annotations[annGrace])
	started, _ := time.Parse(time.RFC3339Nano, p.Annotations[annStarted])
	stopping, ended := false, ""
	var stopAt time.Time
	for _, q := range pods {
		if v := q.Annotations[annStopped]; v != "" {
			stopping = true
			if t, err := time.Parse(time.RFC3339Nano, v); err == nil {
				stopAt = t // "true" (an older server's mark) has none
			}
		}
		if v := q.Annotations[annEnded]; v != "" {
			ended = v
		}
	}
	a := e.track(id, p.Annotations[annJobID], n, grace, started, stopping)
	var x executor.Exit
	e.mu.Lock()
	a.parts = partsOf(p.Annotations)
	a.stopAt = stopAt
	e.mu.Unlock()
	if ended != "" && json.Unmarshal([]byte(ended), &x) != nil {
		ended = ""
	}
	e.mu.Lock()
	for _, q := range pods {
		a.observe(q, false)
	}
	var rest []int
	if ended != "" && !a.decided {
		// The end was decided before a restart: carry on deleting the
		// pods it left running (the server may have died before it
		// deleted them all).
		a.exit, a.decided, a.ending = x, true, true
		for _, q := range pods {
			if i, err := strconv.Atoi(q.Labels[LabelIndex]); err == nil && !terminal(q) && q.DeletionTimestamp == nil {
				rest = append(rest, i)
			}
		}
	}
	g := e.stopGrace(a.grace, 0)
	e.mu.Unlock()
	if len(rest) > 0 {
		e.spawn(func() {
			e.endPods(e.ctx, id, n, rest, g, "")
		})
	}
	return a
}

// observe takes an informer's event about a pod to its attempt.
func (e *Executor) observe(obj any, deleted bool) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = d.Obj, true
	}
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	// By the attempt's annotation: its label may have been removed or
	// changed by hand.
	key := p.Labels[LabelAttemptID]
	if id := p.Annotations[annAttemptID]; id != "" {
		key = labelValue(id)
	}
	e.mu.Lock()
	a := e.attempts[key]
	if deleted {
		delete(e.unfinalizing, p.UID)
	}
	// Deleted (by its expiry, a sweep, the pod garbage collector or a
	// person) while no record of the store can start its attempt again:
	// Finalizer has done its work.
	unfin := a == nil && !deleted && p.DeletionTimestamp != nil && e.notClaimedLocked(key)
	check := false
	if a != nil {
		// A pod that leaves the watch before it has ended was deleted at
		// once (grace 0, by someone else), or lost a label the watch
		// selects and still runs: the API server says which.
		check = deleted && !terminal(p)
		if !check {
			a.observe(p, deleted)
		}
	}
	e.mu.Unlock()
	if unfin {
		e.unfinalize(p.Name, p.UID, p.Finalizers)
	}
	if check {
		e.spawn(func() { e.followUnwatched(a, p) })
		return
	}
	if a != nil {
		e.evaluate(a)
		a.poke()
	}
}

// followUnwatched follows, through the API server, a pod of a that the
// watch no longer shows before it ended: until it is gone (then it is
// recorded so) or the watch shows it again. A pod that lost its labels
// outside qshare still runs and holds its node; the attempt ends
// (evaluate) and its pods are deleted, and it holds its capacity until
// this sees the pod gone.
func (e *Executor) followUnwatched(a *attempt, p *corev1.Pod) {
	delay := 200 * time.Millisecond
	for {
		var cur *corev1.Pod
		if err := e.retry(e.ctx, func(ctx context.Context) error {
			q, err := e.c.Pods(e.ns).Get(ctx, p.Name, metav1.GetOptions{})
			if err == nil {
				cur = q
			} else if apierrors.IsNotFound(err) {
				cur = nil
			}
			return err
		}); err != nil {
			return // closing
		}
		e.mu.Lock()
		if a.closed {
			e.mu.Unlock()
			return
		}
		i, ok := a.index(p)
		last := a.last[i]
		if !ok || last == nil || last.UID != p.UID || gone(last) {
			// Another pod of the name (or its end) is the watch's now.
			e.mu.Unlock()
			return
		}
		watched := false
		if cur == nil || cur.UID != p.UID {
			a.observe(last, true)
		} else {
			a.observe(cur, false)
			watched = cur.Labels[LabelManagedBy] == managedBy
		}
		e.mu.Unlock()
		e.evaluate(a)
		a.poke()
		if cur == nil || cur.UID != p.UID || watched {
			return
		}
		select {
		case <-e.ctx.Done():
			return
		case <-time.After(delay):
		}
		delay = min(2*delay, 2*time.Second)
	}
}

// relabeledOf names the label that qshare gave pod i of a and that it
// no longer carries as given (removed or changed outside qshare), or "".
func (a *attempt) relabeledOf(i int, p *corev1.Pod) string {
	switch {
	case p.Labels[LabelManagedBy] != managedBy:
		return LabelManagedBy
	case p.Labels[LabelAttemptID] != a.label:
		return LabelAttemptID
	case p.Labels[LabelIndex] != strconv.Itoa(i):
		return LabelIndex
	}
	return ""
}

// index is a pod's index in the attempt: its label, else (the label was
// removed or changed by hand) what its name says.
func (a *attempt) index(p *corev1.Pod) (int, bool) {
	if i, err := strconv.Atoi(p.Labels[LabelIndex]); err == nil && i >= 0 && i < a.n && p.Name == podName(a.id, i) {
		return i, true
	}
	if s, ok := strings.CutPrefix(p.Name, baseName(a.id)+"-"); ok {
		if i, err := strconv.Atoi(s); err == nil && i >= 0 && i < a.n {
			return i, true
		}
	}
	return 0, false
}

// observe records a pod's latest state; a deleted pod is kept, marked
// gone (annGone). A state older than the one kept, by their resource
// versions, does not replace it: a recovered attempt takes its pods from a
// list made before it was tracked, and the watch may have shown a newer
// state of one in between (its end, say), after which none may come.
// Callers hold e.mu.
func (a *attempt) observe(p *corev1.Pod, deleted bool) {
	i, ok := a.index(p)
	if !ok {
		return
	}
	if kept := a.last[i]; kept != nil {
		if c, err := resourceversion.CompareResourceVersion(p.ResourceVersion, kept.ResourceVersion); err == nil && c < 0 {
			if !deleted {
				return
			}
			p = kept // gone, in the newer state seen
		}
	}
	c := p.DeepCopy()
	if deleted {
		if c.Annotations == nil {
			c.Annotations = map[string]string{}
		}
		c.Annotations[annGone] = "true"
	}
	a.last[i] = c
}

func gone(p *corev1.Pod) bool { return p != nil && p.Annotations[annGone] != "" }

func terminal(p *corev1.Pod) bool {
	return p != nil && (p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed)
}

// released reports whether a pod holds no capacity any more: it is gone;
// or it has ended and nobody is deleting it (a pod being deleted holds its
// node until the kubelet is done with it); or its deletion is final
// (removed) and it has ended or was never placed, so that only
// Finalizer keeps the object.
func released(p *corev1.Pod) bool {
	return p != nil && (gone(p) || terminal(p) && p.DeletionTimestamp == nil ||
		removed(p) && (terminal(p) || p.Spec.NodeName == ""))
}

// removed reports whether a pod's deletion is final (its grace is 0): the
// kubelet's last deletion once its containers stopped, a forced one, or
// that of a pod ended or on no node, which the API server makes final at
// once. Only finalizers keep such a pod.
func removed(p *corev1.Pod) bool {
	return p.DeletionTimestamp != nil && p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0
}

// endedBeforeDeletion reports whether a pod being deleted had ended before
// the deletion was asked for, so that its end stands: it was deleted after
// its end (by the pod garbage collector, or a person), and Finalizer kept
// it for qshare to read. The deletion was asked for at DeletionTimestamp
// less the grace; but once the kubelet has made the deletion of a pod that
// ran final (grace 0), the API server has moved DeletionTimestamp to that
// last deletion (it never leaves it in the past), which follows the
// container's end by the kubelet's clean-up. So a pod deleted while it ran
// looks, to one who sees it only now, like one that ended and was deleted
// a moment later; margin, which is more than that clean-up, tells them
// apart (and covers a node's clock a little behind the API server's).
// Within it the deletion is taken for one outside qshare: the attempt
// fails, rather than letting a program that exits 0 on the deletion's
// SIGTERM succeed.
func endedBeforeDeletion(p *corev1.Pod, margin time.Duration) bool {
	t := terminated(p)
	if t == nil || p.DeletionTimestamp == nil || p.DeletionGracePeriodSeconds == nil {
		return false
	}
	asked := p.DeletionTimestamp.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
	return t.FinishedAt.Add(margin).Before(asked)
}

// evaluate decides, from the pods' latest states, whether the attempt has
// ended and how, deletes what must go, reports a pending reason, and
// closes done once no pod of the attempt holds capacity.
func (e *Executor) evaluate(a *attempt) {
	e.mu.Lock()
	if a.closed {
		e.mu.Unlock()
		return
	}
	allReleased, allSucc := true, true
	var firstFail *corev1.Pod
	pendingWhy, placed := "", 0
	for i := 0; i < a.n; i++ {
		p := a.last[i]
		if !released(p) {
			allReleased = false
		}
		if p == nil || p.Status.Phase != corev1.PodSucceeded || gone(p) && terminated(p) == nil {
			allSucc = false
		}
		if p == nil {
			continue
		}
		if p.Status.Phase == corev1.PodFailed && firstFail == nil {
			firstFail = p
		}
		if !a.stopping && !a.ending && a.byHand < 0 && p.Annotations[annStopped] == "" {
			if gone(p) && !terminal(p) || p.DeletionTimestamp != nil && !endedBeforeDeletion(p, e.o.endedMargin) {
				a.byHand = i
			} else if l := a.relabeledOf(i, p); l != "" && !gone(p) && !terminal(p) {
				a.byHand, a.relabeled = i, l
			}
		}
		if placedPod(p) {
			placed++
		}
		if !terminal(p) && !gone(p) {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && pendingWhy == "" {
					pendingWhy = c.Message
					if pendingWhy == "" {
						pendingWhy = c.Reason
					}
				}
			}
		}
	}
	deleteRest, deleteGrace, confirm := false, e.stopGrace(a.grace, 0), false
	if !a.decided {
		switch {
		case a.stopping:
			if allReleased {
				a.exit, a.decided = e.stopExit(a), true
			}
		case a.byHand >= 0:
			if !a.ending {
				a.ending, deleteRest = true, true
			}
			if allReleased {
				p := a.last[a.byHand]
				x := exitFrom(a, p, true)
				x.Stopped = false
				if x.ExitCode == 0 && x.Signal == "" {
					// A program that checkpoints and exits 0 on the
					// deletion's SIGTERM did not finish its work: the
					// attempt must not succeed.
					x.ExitCode, x.Signal = -1, "SIGTERM"
					x.Reason = "Essential process exited with code 0 on the SIGTERM of the deletion"
				}
				if a.relabeled != "" {
					x.Reason = fmt.Sprintf("The pod %s lost its label %s outside qshare, so qshare could no longer follow it by its labels: qshare deleted it, and the attempt is not restarted behind qshare's back", p.Name, a.relabeled)
				} else {
					x.Reason = fmt.Sprintf("The pod %s was deleted outside qshare (not by a stop qshare decided), and the attempt is not restarted behind qshare's back: %s", p.Name, x.Reason)
				}
				a.exit, a.decided = x, true
			}
		case firstFail != nil:
			a.exit, a.decided = e.failExit(a, firstFail), true
			a.ending, deleteRest = true, true
		case allSucc:
			a.exit, a.decided = executor.Exit{AttemptID: a.id, ExitCode: 0, Reason: "Essential process exited with code 0", At: finishedAt(a.last[0])}, true
		case placed < a.n && e.waitedLocked(a) > a.timeout && !a.timedOut:
			// The watch may lag behind the API server (it was away, or
			// the executor could not reach it): only the server's own
			// list decides a capacity failure.
			if !a.checking {
				a.checking, confirm = true, true
			}
		case placed < a.n && e.waitedLocked(a) > a.timeout:
			// The start timeout bounds the placement of the pods, not
			// their run: a pod that has run (and ended, before the others)
			// was placed.
			why := pendingWhy
			if why == "" {
				why = "the pods did not start"
			}
			a.exit, a.decided = executor.Exit{AttemptID: a.id, ExitCode: -1, Lost: true, At: time.Now().UTC(),
				Reason: fmt.Sprintf("Capacity failure: %d of %d pods were not running %v after they were created (%s); the attempt was requeued without using a retry", a.n-placed, a.n, a.timeout, why)}, true
			a.ending, deleteRest, deleteGrace = true, true, 0
		}
	}
	if a.decided && allReleased {
		a.closed = true
		close(a.done)
	}
	why := ""
	if !a.decided && !a.stopping && a.byHand < 0 {
		why = pendingWhy
	}
	if a.reason != why {
		a.reason = why
		e.reasons.Add(1)
	}
	id, n, closed, parts := a.id, a.n, a.closed, a.parts
	allGone := true
	// The pods still running (an ended pod stays, with its log), those on
	// no node first: deleted after a placed sibling, one could be placed
	// on the node that sibling frees and start, for nothing.
	var rest, onNodes []int
	for i := 0; i < n; i++ {
		allGone = allGone && gone(a.last[i])
		if p := a.last[i]; p == nil || !gone(p) && !terminal(p) {
			if p != nil && p.Spec.NodeName != "" {
				onNodes = append(onNodes, i)
			} else {
				rest = append(rest, i)
			}
		}
	}
	rest = append(rest, onNodes...)
	mark := ""
	if deleteRest && a.decided {
		// The decided end goes on the pods, so that a server that
		// restarts before they are gone ends the attempt as decided and
		// does not take its own deletion for one by hand.
		b, _ := json.Marshal(a.exit)
		mark = string(b)
	}
	e.mu.Unlock()
	if confirm {
		e.spawn(func() { e.confirmStartTimeout(a) })
	}
	if deleteRest && !allReleased {
		e.spawn(func() {
			e.endPods(e.ctx, id, n, rest, deleteGrace, mark)
		})
	}
	if closed && allGone {
		e.spawn(func() {
			e.deleteAttemptObjects(e.ctx, id, parts)
		})
	}
}

// placedPod reports whether a pod was placed, for the start timeout: it
// runs, or has run, or has ended.
func placedPod(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning || started(p) || terminal(p)
}

// confirmStartTimeout asks the API server for the pods of an attempt whose
// start timeout has passed on the watch's view, retrying while the server
// is away. When they are not all placed there either, the attempt ends
// as a capacity failure (timedOut); when they are, the watch was stale,
// and the attempt takes the server's view of them.
func (e *Executor) confirmStartTimeout(a *attempt) {
	var list *corev1.PodList
	err := e.retry(e.ctx, func(ctx context.Context) error {
		var err error
		list, err = e.c.Pods(e.ns).List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelManagedBy: managedBy, LabelAttemptID: a.label}.String()})
		return err
	})
	e.mu.Lock()
	a.checking = false
	if err != nil || list == nil {
		e.mu.Unlock()
		return
	}
	seen := map[int]*corev1.Pod{}
	for k := range list.Items {
		p := &list.Items[k]
		if i, ok := a.index(p); ok && p.Annotations[annAttemptID] == a.id {
			seen[i] = p
		}
	}
	placed := 0
	for i := 0; i < a.n; i++ {
		if p := seen[i]; p != nil && placedPod(p) {
			placed++
		}
	}
	if placed < a.n {
		a.timedOut = true
	} else {
		for i, p := range seen {
			if q := a.last[i]; q == nil || !gone(q) {
				a.observe(p, false)
			}
		}
	}
	e.mu.Unlock()
	e.evaluate(a)
	a.poke()
}

func finishedAt(p *corev1.Pod) time.Time {
	if p != nil {
		for _, cs := range p.Status.ContainerStatuses {
			if t := cs.State.Terminated; t != nil && !t.FinishedAt.IsZero() {
				return t.FinishedAt.UTC()
			}
		}
	}
	return time.Now().UTC()
}

// endedAt is when an ended pod ended, for its expiry: its container's
// finish, else (it ended before its container ran) the last change of its
// conditions, else its creation; never the present, which would keep it
// for good.
func endedAt(p *corev1.Pod) time.Time {
	if t := terminated(p); t != nil && !t.FinishedAt.IsZero() {
		return t.FinishedAt.Time
	}
	at := p.CreationTimestamp.Time
	for _, c := range p.Status.Conditions {
		if c.LastTransitionTime.After(at) {
			at = c.LastTransitionTime.Time
		}
	}
	return at
}

func terminated(p *corev1.Pod) *corev1.ContainerStateTerminated {
	if p == nil {
		return nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == container && cs.State.Terminated != nil {
			return cs.State.Terminated
		}
	}
	// A staging that failed (data.go) ended the pod before its training
	// container ran: its exit and failure file are the attempt's.
	for _, cs := range p.Status.InitContainerStatuses {
		if cs.Name == StageContainer && cs.State.Terminated != nil && cs.State.Terminated.ExitCode != 0 {
			return cs.State.Terminated
		}
	}
	return nil
}

// signalName names the signal of an exit code 128+N, as a container
// runtime reports a process killed by signal N.
func signalName(code int32) string {
	switch code - 128 {
	case 9:
		return "SIGKILL"
	case 15:
		return "SIGTERM"
	case 2:
		return "SIGINT"
	case 6:
		return "SIGABRT"
	case 11:
		return "SIGSEGV"
	}
	return "signal " + strconv.Itoa(int(code-128))
}

// exitFrom reads an exit from a pod's container status. A container's exit
// code 128+N after a stop is its death by signal N; without a stop it is
// the code the process chose (exit 137 is code 137), but OOMKilled.
func exitFrom(a *attempt, p *corev1.Pod, stopped bool) executor.Exit {
	x := executor.Exit{AttemptID: a.id, Stopped: stopped, At: finishedAt(p), ExitCode: -1}
	t := terminated(p)
	if t == nil && gone(p) && p.Status.Phase == "" {
		x.Reason = "The pod " + p.Name + " was gone before its end could be seen"
		return x
	}
	if t == nil {
		x.Reason = "The pod " + p.Name + " ended before its container ran"
		if p.Status.Reason != "" {
			x.Reason += " (" + p.Status.Reason + ": " + p.Status.Message + ")"
		}
		return x
	}
	switch {
	case t.Signal != 0:
		x.Signal = signalName(128 + t.Signal)
	case t.Reason == "OOMKilled":
		x.Signal = "SIGKILL"
	case stopped && t.ExitCode > 128:
		x.Signal = signalName(t.ExitCode)
	default:
		x.ExitCode = int(t.ExitCode)
	}
	switch {
	case t.Reason == "OOMKilled":
		x.Reason = "OutOfMemoryError: the container of pod " + p.Name + " was killed for exceeding its memory limit (OOMKilled)"
	case x.Signal == "SIGKILL" && stopped:
		x.Reason = data.KilledReason
		// The data wrapper's upload after its kill failed (data.Run).
		if line := firstLine(t.Message); strings.HasPrefix(line, data.KilledReason+"; after the kill") {
			x.Reason = line
		}
	case x.Signal != "":
		x.Reason = "Essential process terminated by signal " + x.Signal
	default:
		x.Reason = fmt.Sprintf("Essential process exited with code %d", x.ExitCode)
	}
	if line := firstLine(t.Message); line != "" && !stopped && (x.ExitCode != 0 || x.Signal != "") {
		x.Reason = line
	}
	return x
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(strings.TrimSpace(s), "\n")
	if len(s) > 1024 {
		s = s[:1024]
	}
	return strings.TrimSpace(s)
}

// disrupted returns the reason of a pod that the cluster took away (its
// node was lost, it was preempted by the scheduler or evicted through the
// API), or "".
func disrupted(p *corev1.Pod) string {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.DisruptionTarget && c.Status == corev1.ConditionTrue {
			return c.Reason + ": " + c.Message
		}
	}
	if p.Status.Reason == "NodeLost" {
		return p.Status.Reason + ": " + p.Status.Message
	}
	return ""
}

// failExit is the end of an attempt one of whose pods failed on its own.
func (e *Executor) failExit(a *attempt, p *corev1.Pod) executor.Exit {
	// The kubelet's eviction first: it also sets a DisruptionTarget
	// condition (TerminationByKubelet), and a job that makes its node
	// evict it (its disk filled) must use its retries, not be requeued
	// for ever.
	if p.Status.Reason == "Evicted" {
		return executor.Exit{AttemptID: a.id, ExitCode: -1, At: time.Now().UTC(),
			Reason: fmt.Sprintf("Evicted: the node evicted the pod %s: %s", p.Name, p.Status.Message)}
	}
	if why := disrupted(p); why != "" {
		return executor.Exit{AttemptID: a.id, ExitCode: -1, Lost: true, At: time.Now().UTC(),
			Reason: fmt.Sprintf("Capacity failure: the pod %s was taken away by the cluster (%s); the attempt was requeued without using a retry", p.Name, why)}
	}
	return exitFrom(a, p, false)
}

// stopExit is the end of a stopped attempt, from its pod of index 0 (or
// the first that ran).
func (e *Executor) stopExit(a *attempt) executor.Exit {
	for i := 0; i < a.n; i++ {
		if p := a.last[i]; terminated(p) != nil {
			return exitFrom(a, p, true)
		}
	}
	for i := 0; i < a.n; i++ {
		if p := a.last[i]; p != nil && started(p) {
			return executor.Exit{AttemptID: a.id, ExitCode: -1, Stopped: true, At: time.Now().UTC(),
				Reason: "Stopped; the pod " + p.Name + " was gone before its end could be seen (the API server was away), so its exit is unknown"}
		}
	}
	return executor.Exit{AttemptID: a.id, ExitCode: -1, Stopped: true, At: time.Now().UTC(), Reason: "Stopped before the attempt's pods ran"}
}

// Stop deletes the attempt's pods with the grace period (the job's
// QSHARE_STOP_GRACE, else grace, else Options.StopGrace), after marking
// them as stopped by qshare; the kubelet sends SIGTERM, and SIGKILL when
// the grace has passed. It returns at once; the deletions are retried
// while the API server is away, and Wait reports the end once every pod is
// gone.
func (e *Executor) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	a := e.lookupAttempt(attemptID)
	if a == nil {
		return executor.ErrUnknownAttempt
	}
	e.mu.Lock()
	// A stop found in the pods' annotations after a restart is carried
	// out again: the server may have died between marking the pods and
	// deleting them.
	if a.decided || a.stopSent {
		e.mu.Unlock()
		return nil
	}
	a.stopping, a.stopSent = true, true
	g := e.stopGrace(a.grace, grace)
	// A stop found on the pods after a restart keeps its deadline: the
	// daemon asks again, with a grace of its own, which must not give the
	// job its grace period anew.
	if a.stopAt.IsZero() {
		a.stopAt = time.Now().Add(g)
	} else {
		g = max(0, time.Until(a.stopAt))
	}
	deadline := a.stopAt.UTC().Format(time.RFC3339Nano)
	n := a.n
	e.mu.Unlock()
	a.poke()
	// The pods are marked, with the deadline, before Stop returns (one try
	// each, 10 s in all, none after the first that fails: an API server
	// that is away does not hold Stop for each of many pods), so that a
	// server that restarts at once finds the stop; when a mark failed, all
	// are marked again, and the pods deleted, in the background.
	marked := true
	mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	for i := 0; i < n && marked; i++ {
		marked = e.markPodOnce(mctx, podName(attemptID, i), annStopped, deadline) == nil
	}
	cancel()
	mark := ""
	if !marked {
		mark = deadline
	}
	e.spawn(func() {
		e.deletePods(e.ctx, attemptID, n, g, mark)
	})
	return nil
}

// deletePods deletes an attempt's pods with a grace period, marking them
// first with mark (annStopped: the stop's deadline) unless it is "", so
// that a restarted server knows the deletion was its own, and when its
// grace period ends.
func (e *Executor) deletePods(ctx context.Context, attemptID string, n int, grace time.Duration, mark string) {
	for i := 0; i < n; i++ {
		if mark != "" {
			e.markPod(ctx, podName(attemptID, i), annStopped, mark)
		}
		e.deletePod(ctx, podName(attemptID, i), grace)
	}
}

// endPods ends an attempt whose end qshare decided: it marks each of its
// n pods with that end (mark, the Exit's JSON; "" for none), then deletes
// the pods of the indices in rest.
func (e *Executor) endPods(ctx context.Context, attemptID string, n int, rest []int, grace time.Duration, mark string) {
	if mark != "" {
		for i := 0; i < n; i++ {
			e.markPod(ctx, podName(attemptID, i), annEnded, mark)
		}
	}
	for _, i := range rest {
		e.deletePod(ctx, podName(attemptID, i), grace)
	}
}

// markPod sets an annotation of a pod, trying while the API server is
// away; a pod that is gone is left so.
func (e *Executor) markPod(ctx context.Context, name, key, value string) {
	_ = e.retry(ctx, func(ctx context.Context) error { return e.markPodOnce(ctx, name, key, value) })
}

// markPodOnce sets an annotation of a pod, with one request.
func (e *Executor) markPodOnce(ctx context.Context, name, key, value string) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	_, err := e.c.Pods(e.ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// deletePod deletes a pod with a grace period (whole seconds, rounded up,
// at least 1; for a pod that uploads after a stop, annUploads, at least
// its own). Never 0: the API server takes gracePeriodSeconds 0 as a
// forced deletion, and removes a pod that is on a node at once, while its
// container still runs there, so that the watch would see its capacity
// free (and the scheduler its node) too early. A pod on no node, or ended,
// is removed at once whatever the grace.
func (e *Executor) deletePod(ctx context.Context, name string, grace time.Duration) {
	secs := max(1, int64(math.Ceil(grace.Seconds())))
	// The pod whose wrapper uploads after a stop keeps the grace it was
	// made with, which covers the program's grace and the upload.
	if obj, ok, _ := e.pods.GetStore().GetByKey(e.ns + "/" + name); ok {
		if p, _ := obj.(*corev1.Pod); p != nil && p.Annotations[annUploads] != "" && p.Spec.TerminationGracePeriodSeconds != nil {
			secs = max(secs, *p.Spec.TerminationGracePeriodSeconds)
		}
	}
	bg := metav1.DeletePropagationBackground
	if err := e.retry(ctx, func(ctx context.Context) error {
		return e.c.Pods(e.ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: &secs, PropagationPolicy: &bg})
	}); err != nil && ctx.Err() == nil {
		e.log.Warn("kubernetes: deleting a pod failed", "pod", name, "err", err)
	}
}

// deleteAttemptObjects deletes the ConfigMaps and Service of an attempt
// whose pods are all gone. parts is how many ConfigMaps its files take
// (annParts), or 0 where no pod is left to say: then its own ConfigMap
// says. The parts go before the attempt's ConfigMap, so that one left
// behind by an interrupted deletion still names them. An attempt whose
// files were its pod's annotations (noConfigMaps) is of one instance and
// has neither.
func (e *Executor) deleteAttemptObjects(ctx context.Context, attemptID string, parts int) {
	if parts == noConfigMaps {
		return
	}
	name := baseName(attemptID)
	if parts < 1 {
		parts = 1
		if err := e.retry(ctx, func(ctx context.Context) error {
			cm, err := e.c.ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err == nil {
				parts = partsOf(cm.Annotations)
			}
			return err
		}); err != nil && e.ctx.Err() == nil {
			e.log.Warn("kubernetes: reading an attempt's ConfigMap, for how many ConfigMaps its files take, failed; deleting its own only", "attempt", attemptID, "err", err)
		}
	}
	for k := parts - 1; k >= 1; k-- {
		_ = e.retry(ctx, func(ctx context.Context) error {
			return e.c.ConfigMaps(e.ns).Delete(ctx, partName(attemptID, k), metav1.DeleteOptions{})
		})
	}
	_ = e.retry(ctx, func(ctx context.Context) error {
		return e.c.ConfigMaps(e.ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
	_ = e.retry(ctx, func(ctx context.Context) error {
		return e.c.Services(e.ns).Delete(ctx, name, metav1.DeleteOptions{})
	})
}

// Wait blocks until the attempt has ended and none of its pods holds
// capacity, and returns how it ended.
func (e *Executor) Wait(ctx context.Context, attemptID string) (executor.Exit, error) {
	a := e.lookupAttempt(attemptID)
	if a == nil {
		return executor.Exit{}, executor.ErrUnknownAttempt
	}
	// The start timeout is measured by the clock, not by an event.
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-a.done:
			e.mu.Lock()
			x := a.exit
			e.mu.Unlock()
			return x, nil
		case <-ctx.Done():
			return executor.Exit{}, ctx.Err()
		case <-t.C:
			e.evaluate(a)
		}
	}
}

// Recover re-attaches to an attempt by its ID (Handle.State is not
// needed): Running when its pods run, Exited when they have ended, Lost
// when there are none. An API server that cannot be reached is an error,
// and the daemon asks again.
func (e *Executor) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	a := e.lookupAttempt(h.AttemptID)
	if a == nil {
		rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		var err error
		a, err = e.find(rctx, h.AttemptID)
		cancel()
		if err != nil {
			return 0, err
		}
		if a == nil {
			// No pod of it will expire and take its ConfigMap and
			// Service with it; none is left to say how many ConfigMaps.
			e.spawn(func() {
				e.deleteAttemptObjects(e.ctx, h.AttemptID, 0)
			})
			return executor.Lost, nil
		}
		// The list was the API server's own: a pod it lacks is gone.
		e.markMissing(a)
		e.noteJob(a.job)
	}
	e.evaluate(a)
	e.mu.Lock()
	defer e.mu.Unlock()
	if a.decided && a.closed {
		return executor.Exited, nil
	}
	return executor.Running, nil
}

// Forget drops an ended attempt from memory; its pods stay, for their
// logs, until Config.KeepEnded has passed.
func (e *Executor) Forget(attemptID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	a := e.attempts[labelValue(attemptID)]
	if a == nil || !a.closed {
		return
	}
	delete(e.attempts, a.label)
	if len(e.podsOf(a.label)) > 0 {
		e.forgotten[a.label] = true
	}
	e.begin.Lock()
	delete(e.starting, attemptID)
	e.begin.Unlock()
	// The attempt's end is recorded: the pods that are being deleted
	// (stopped, or ended and deleted by someone else) may go, and with
	// the last of them the attempt's ConfigMaps and Service.
	// By its last state of each pod, which follows by name a pod that
	// lost its labels too.
	deleting, kept := 0, 0
	for _, p := range a.last {
		switch {
		case gone(p):
		case p.DeletionTimestamp != nil:
			deleting++
			e.unfinalizeLocked(p.Name, p.UID, p.Finalizers)
		default:
			kept++ // ended, kept for keepEnded
		}
	}
	if deleting > 0 && kept == 0 {
		id, parts := a.id, a.parts
		e.spawn(func() { e.deleteAttemptObjects(e.ctx, id, parts) })
	}
}

// notClaimedLocked reports whether no record of the store can start or
// recover the untracked attempt of a label: this executor followed it to
// its end (forgotten), or Sweep has shown that the store does not claim
// it and no Start of it has begun since. Under e.mu (spawn, which
// unfinalizeLocked calls, takes only closeMu, never held while e.mu is
// taken).
func (e *Executor) notClaimedLocked(label string) bool {
	if e.forgotten[label] {
		return true
	}
	if !e.swept || e.claimed[label] {
		return false
	}
	e.begin.Lock()
	defer e.begin.Unlock()
	for id := range e.starting {
		if labelValue(id) == label {
			return false
		}
	}
	return true
}

// unfinalize removes Finalizer from a pod that is being deleted, once per
// pod (by UID; an empty UID, for a pod known by name alone, is not
// remembered), so that its deletion completes; retried while the API
// server is away. A pod without it is left alone.
func (e *Executor) unfinalize(name string, uid types.UID, finalizers []string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.unfinalizeLocked(name, uid, finalizers)
}

// unfinalizeLocked is unfinalize under e.mu; finalizers nil means unknown.
func (e *Executor) unfinalizeLocked(name string, uid types.UID, finalizers []string) {
	if finalizers != nil && !slices.Contains(finalizers, Finalizer) || uid != "" && e.unfinalizing[uid] {
		return
	}
	if uid != "" {
		e.unfinalizing[uid] = true
	}
	// The UID in the patch is a precondition: a pod of the same name made
	// since is not touched (the API server refuses the change of UID).
	meta := map[string]any{"$deleteFromPrimitiveList/finalizers": []string{Finalizer}}
	if uid != "" {
		meta["uid"] = uid
	}
	patch, _ := json.Marshal(map[string]any{"metadata": meta})
	e.spawn(func() {
		if err := e.retry(e.ctx, func(ctx context.Context) error {
			_, err := e.c.Pods(e.ns).Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{})
			return err
		}); err != nil && e.ctx.Err() == nil {
			e.log.Warn("kubernetes: removing qshare's finalizer from a deleted pod failed", "pod", name, "err", err)
		}
	})
}

// noteNoClaim records that a job has no checkpoint claim (its payload
// has no CheckpointConfig), so that JobFinished asks the API server for
// nothing.
func (e *Executor) noteNoClaim(job string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.noClaim[job] = true
}

// JobFinished deletes the job's checkpoint claim, unless the job is known
// to have none (one started through this executor without a
// CheckpointConfig; after a restart the deletion is tried, and finding
// nothing is no error).
func (e *Executor) JobFinished(jobID string) {
	e.mu.Lock()
	none := e.noClaim[jobID]
	delete(e.noClaim, jobID)
	e.mu.Unlock()
	if none {
		return
	}
	e.spawn(func() {
		ctx, cancel := context.WithTimeout(e.ctx, 5*time.Minute)
		defer cancel()
		if err := e.retry(ctx, func(ctx context.Context) error {
			return e.c.PersistentVolumeClaims(e.ns).Delete(ctx, claimName(jobID), metav1.DeleteOptions{})
		}); err != nil && e.ctx.Err() == nil {
			e.log.Warn("kubernetes: deleting a finished job's checkpoint claim failed", "job", jobID, "err", err)
		}
	})
}

// noteJob records, until SweepJobs has done its work, that this executor
// starts or recovers an attempt of job, so that the sweep keeps its claim.
func (e *Executor) noteJob(job string) {
	e.begin.Lock()
	defer e.begin.Unlock()
	if e.jobsSince != nil {
		e.jobsSince[job] = true
	}
}

// SweepJobs deletes the checkpoint claims of jobs that are neither in live
// (the store's unfinished jobs) nor started or recovered through this
// executor: a job that ended while the server was down, or whose claim's
// deletion (JobFinished) the server did not live to finish
// (executor.JobSweeper). It lists the namespace's claims through the API
// server and answers an error, for the daemon to ask again, when that or a
// deletion fails. It does its work once; a later call does nothing.
func (e *Executor) SweepJobs(ctx context.Context, live map[string]bool) ([]string, error) {
	e.begin.Lock()
	done := e.jobsSince == nil
	e.begin.Unlock()
	if done {
		return nil, nil
	}
	// Every claim of the list was created before it, so a job of this
	// executor that made one was noted before it too.
	l, err := e.c.PersistentVolumeClaims(e.ns).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + managedBy})
	if err != nil {
		return nil, fmt.Errorf("kubernetes: listing the checkpoint claims: %w", err)
	}
	var stale []string
	e.begin.Lock()
	for _, c := range l.Items {
		job := c.Annotations[annJobID]
		if job == "" || c.Name != claimName(job) || c.DeletionTimestamp != nil || live[job] || e.jobsSince[job] {
			continue
		}
		stale = append(stale, job)
	}
	e.begin.Unlock()
	sort.Strings(stale)
	var swept []string
	for _, job := range stale {
		e.log.Warn("kubernetes: deleting the checkpoint claim of a job that is finished or not in the store", "job", job)
		if err := e.retry(ctx, func(ctx context.Context) error {
			return e.c.PersistentVolumeClaims(e.ns).Delete(ctx, claimName(job), metav1.DeleteOptions{})
		}); err != nil {
			return swept, fmt.Errorf("kubernetes: deleting the checkpoint claim of job %s: %w", job, err)
		}
		swept = append(swept, job)
	}
	e.begin.Lock()
	e.jobsSince = nil
	e.begin.Unlock()
	return swept, nil
}

// Close stops the informers. The pods keep running.
func (e *Executor) Close() error {
	e.closeMu.Lock()
	e.closing = true
	e.closeMu.Unlock()
	e.cancel()
	e.wg.Wait()
	return nil
}

// spawn runs f as one of the executor's goroutines (e.wg), unless the
// executor is closing: an informer's handler may still call evaluate
// while Close waits, and a wg.Add then would race with the Wait.
func (e *Executor) spawn(f func()) {
	e.closeMu.Lock()
	defer e.closeMu.Unlock()
	if e.closing {
		return
	}
	e.wg.Go(func() {
		f()
	})
}

// every calls f every d until the executor closes; it runs as one of
// e.wg's goroutines (the executor's housekeeping: checkHealth, and
// expireEnded every minute).
func (e *Executor) every(d time.Duration, f func()) {
	defer e.wg.Done()
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-e.ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// Sweep deletes the live pods of attempts that are neither in keep (the
// store's unfinished attempts) nor started (a Start begun counts) or
// recovered through this executor: they have no record in the store, and adopting them later
// would run the job twice (executor.Sweeper). It answers an error, and
// the daemon tries again, until the executor has seen the namespace's pods.
func (e *Executor) Sweep(ctx context.Context, keep map[string]bool) ([]string, error) {
	if !e.pods.HasSynced() {
		return nil, errors.New("kubernetes: the pods of the namespace are not listed yet")
	}
	seen := map[string]*corev1.Pod{}
	for _, obj := range e.pods.GetStore().List() {
		p := obj.(*corev1.Pod)
		if terminal(p) || p.DeletionTimestamp != nil {
			continue
		}
		seen[p.Labels[LabelAttemptID]] = p
	}
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e.mu.Lock()
	for id := range keep {
		if e.attempts[labelValue(id)] == nil {
			e.claimed[labelValue(id)] = true
		}
	}
	e.swept = true
	// The pods being deleted (while no server ran) of attempts that the
	// store does not claim: nothing will start those again.
	for _, obj := range e.pods.GetStore().List() {
		p := obj.(*corev1.Pod)
		if l := p.Labels[LabelAttemptID]; p.DeletionTimestamp != nil && e.attempts[l] == nil && e.notClaimedLocked(l) {
			e.unfinalizeLocked(p.Name, p.UID, p.Finalizers)
		}
	}
	e.mu.Unlock()
	var swept []string
	for _, label := range keys {
		p := seen[label]
		id := p.Annotations[annAttemptID]
		e.mu.Lock()
		known := e.attempts[label] != nil
		e.mu.Unlock()
		// A Start under way has created pods before it tracks them.
		e.begin.Lock()
		starting := e.starting[id] != nil
		e.begin.Unlock()
		if known || starting || keep[id] {
			continue
		}
		n, _ := strconv.Atoi(p.Annotations[annInstances])
		e.log.Warn("kubernetes: deleting the pods of an attempt that no record of the store claims", "attempt", id, "job", p.Annotations[annJobID])
		e.deletePods(ctx, id, max(n, 1), 0, "")
		for i := 0; i < max(n, 1); i++ {
			e.unfinalize(podName(id, i), "", nil)
		}
		// Its pods never end, so nothing else would delete these.
		e.deleteAttemptObjects(ctx, id, partsOf(p.Annotations))
		swept = append(swept, id)
	}
	return swept, nil
}

// expireEnded deletes, every minute, the ended pods (and their attempts'
// objects) older than Config.KeepEnded whose attempts the executor no
// longer follows: it followed them to their end (Forget), or Sweep has
// shown that the store does not claim them. Not those of an attempt
// started before a restart that the daemon has not recovered or started
// yet: a Start again (the store said STARTING) would find no pods and run
// the attempt a second time.
func (e *Executor) expireEnded() {
	keep := e.cfg.keepEnded()
	expired := func(p *corev1.Pod) bool { return terminal(p) && time.Since(endedAt(p)) >= keep }
	for _, obj := range e.pods.GetStore().List() {
		p := obj.(*corev1.Pod)
		if !expired(p) {
			continue
		}
		label := p.Labels[LabelAttemptID]
		e.mu.Lock()
		a := e.attempts[label]
		recorded := a == nil && e.notClaimedLocked(label)
		mine := a != nil && a.closed || recorded
		e.mu.Unlock()
		if !mine {
			continue
		}
		// An attempt that ended but is not forgotten yet (its end is not
		// recorded) keeps the mark until Forget.
		if e.retry(e.ctx, func(ctx context.Context) error {
			return e.c.Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{})
		}) == nil && recorded {
			e.unfinalize(p.Name, p.UID, p.Finalizers)
		}
		// The attempt's last pods take its ConfigMap and Service with
		// them (pod 0 may be gone already: deleted after another's
		// failure).
		last := true
		for _, q := range e.podsOf(p.Labels[LabelAttemptID]) {
			last = last && (q.Name == p.Name || expired(q))
		}
		if last {
			e.deleteAttemptObjects(e.ctx, p.Annotations[annAttemptID], partsOf(p.Annotations))
			e.mu.Lock()
			delete(e.forgotten, label)
			e.mu.Unlock()
		}
	}
	// A forgotten attempt whose pods someone else deleted.
	e.mu.Lock()
	for label := range e.forgotten {
		if len(e.podsOf(label)) == 0 {
			delete(e.forgotten, label)
		}
	}
	e.mu.Unlock()
}

func sortStrings(s []string) { sort.Strings(s) }
