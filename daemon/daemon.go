// Package daemon is the only part of qshare with a wall clock: it holds the
// working state of every resource and job in memory, serves reads from it,
// and runs the control loop that turns commands into engine inputs, commits
// the engine's decisions to the store, carries them out through an executor,
// and acknowledges the requests that caused them.
//
// Every change is written through the store before it is acted on and before
// the request that caused it is acknowledged. Only the control loop touches
// the engine's scheduling state and changes a job once it has been submitted,
// so job records have a single writer; submits commit on their own goroutine
// so that concurrent submits share the store's group commit.
//
// On Start the daemon rebuilds itself from the store and asks the executor to
// recover every attempt that was SCHEDULED, STARTING or RUNNING.
//
// The resource operations live one file per resource (environment.go,
// policy.go, queue.go, share.go); each gives the engine its resources
// through the one mapping, engine.Configure's parts, that the simulator also
// uses. Lending (lending.go) reads back who lends to whom.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"qshare"
	"qshare/engine"
	"qshare/executor"
	"qshare/store"
)

// Config configures a Daemon. Store, and Executor or Executors, are required.
type Config struct {
	Store store.Store
	// Executor is the one executor of a server without named executors:
	// it is the set's DefaultName. Executors, when set, replaces it.
	Executor executor.Executor
	// Executors are the server's named executors: each service
	// environment's tag qshare:executor names the one that runs its jobs.
	Executors *executor.Set
	// Engine is the scheduler; New creates one when nil. It must be empty.
	Engine *engine.Engine
	// Region and AccountID appear in ARNs (defaults us-east-1, 000000000000).
	Region    string
	AccountID string
	// MaxSharesPerQueue bounds the quota shares of one job queue (default 20).
	MaxSharesPerQueue int
	// Logger receives a structured record of every decision and transition.
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Tick is how often the loop wakes without a kick, for timeouts and
	// time-limit actions (default 1s).
	Tick time.Duration
	// StopGrace is the grace period of a stop: preemption, termination,
	// timeout (0: the executor's default).
	StopGrace time.Duration
	// JobRetention is how long a finished job (SUCCEEDED or FAILED) is kept
	// after it stopped; older ones are deleted from the store and memory.
	// 0 keeps every job forever.
	JobRetention time.Duration
	// Events, when set, receives the capacity event log: the events of
	// each commit, after it (see EventSink).
	Events EventSink
	// RequireRunAs refuses a submit without SubmitInput.RunAs: qshare serve
	// --auth sets it with the process executor, whose jobs run as their
	// submitter's unixUser.
	RequireRunAs bool
	// Observer, when set, receives the daemon's measurements (see
	// Observer); package metrics exports them.
	Observer Observer
}

// Daemon is the server's state and control loop. Create one with New, then
// call Start. Its methods are safe for concurrent use.
type Daemon struct {
	cfg Config
	st  store.Store
	// execs are the named executors (executors.go).
	execs *executor.Set
	log   *slog.Logger
	now   func() time.Time

	// resMu serialises changes to resources (environments, policies, queues,
	// shares) with each other; submits hold it for reading so that the queue
	// and share they were validated against cannot go away under them.
	resMu sync.RWMutex

	// engMu guards the engine: the loop holds it while it feeds the engine
	// and schedules, readers (snapshots) while they look.
	engMu sync.Mutex
	eng   *engine.Engine
	// decisions is the slice the loop's passes append their decisions to
	// (engine.AppendSchedule), reused from cycle to cycle (under engMu).
	decisions []engine.Decision
	// wakeAt is when the engine asked for its next pass although nothing
	// else changes (engine.NextWake; zero for never): the end of a
	// minimum run time that a waiting job needs. Only the loop uses it.
	wakeAt time.Time

	// mu guards the maps below. Job records are immutable once installed:
	// a change installs a new *qshare.Job, so a reader may keep a pointer.
	mu       sync.RWMutex
	envs     map[string]*qshare.ServiceEnvironment
	policies map[string]*qshare.SchedulingPolicy
	queues   map[string]*qshare.JobQueue
	shares   map[store.ShareKey]*qshare.QuotaShare
	plans    map[string]*qshare.CapacityPlan // by name
	jobs     map[string]*qshare.Job
	// legacy finds the job of an attempt whose training job name has the
	// older form (trainingjob.LegacyAttemptName), by that name in lower
	// case; setJob and dropJob keep it with d.jobs.
	legacy map[string]string
	// inflight holds the loop's newest versions of jobs whose commit has
	// not returned yet (the committer), newer than their d.jobs record.
	// Only the loop reads it, to decide on top of its own changes; every
	// API read keeps to d.jobs, which holds durable versions only. The
	// loop adds to it; the committer removes a version once it has
	// installed it in d.jobs, if the loop has not replaced it since.
	inflight map[string]*qshare.Job
	byQueue  map[string]*jobIndex
	tokens   map[string]*tokenEntry
	inbox    []op
	// spare is the inbox the last cycle emptied, kept (cleared) for the
	// next one, so that a busy loop does not grow a new inbox every cycle.
	spare []op

	kick    chan struct{}
	started bool
	// lctx is the loop's context: it ends when Close is called.
	lctx   context.Context
	cancel context.CancelFunc
	done   chan struct{}
	bg     sync.WaitGroup

	// loop-owned state (touched only by the loop goroutine, and by Start
	// before the loop runs).
	runs  map[string]*run
	waits map[string]waitInfo
	// pendingVersion is the executor's PendingReasonsVersion at the last
	// look at every run's pending reason; pendingDirty is set when a run
	// begins to run (or is recovered), which needs a look whatever the
	// version says (before any run, there is nothing to look at).
	pendingVersion uint64
	pendingDirty   bool

	// meta caches the payload facts of unfinished jobs (payloadMeta),
	// guarded by metaMu: a plain map costs a submit less than a sync.Map,
	// whose Store boxed the value and allocated a node per job.
	metaMu sync.Mutex
	meta   map[string]payloadMeta

	// evlog is the capacity event log (nil without Config.Events); evMu
	// orders its appends.
	evlog *eventLog
	evMu  sync.Mutex

	// The committer's queue (see commit.go), guarded by cmu: the cycles
	// the loop has finished whose changes are not committed yet, in order,
	// and how many job versions they hold.
	cmu    sync.Mutex
	cq     []*pending
	cqJobs int
	// cwake wakes the committer; cspace tells a loop held back by a full
	// queue that the committer took it; cdone is closed when the committer
	// has returned.
	cwake  chan struct{}
	cspace chan struct{}
	cdone  chan struct{}

	// obs receives the measurements (Config.Observer, or none); counts
	// holds the jobs of d.jobs per queue, share and status (setJob, under
	// d.mu).
	obs    Observer
	counts map[statusKey]int
	// unfinished holds, per submitter (the ARN of qshare.TagSubmittedBy),
	// how many of its jobs in d.jobs are not SUCCEEDED or FAILED (setJob,
	// under d.mu); admitting holds the submits of each that passed the
	// check of SubmitInput.MaxUnfinished and are not yet in d.jobs.
	unfinished map[string]int
	admitting  map[string]int

	// storeDown is set while the loop's last commit failed (cleared once
	// one succeeds): commands are then refused at once. The error itself
	// is in the log, not in the answers.
	storeDown atomic.Bool
}

// New returns a daemon over the given store and executor. It does not touch
// either until Start.
func New(cfg Config) (*Daemon, error) {
	if cfg.Store == nil || cfg.Executor == nil && cfg.Executors == nil {
		return nil, errors.New("daemon: Config.Store and Config.Executor (or Executors) are required")
	}
	if cfg.Executors == nil {
		cfg.Executors = executor.Single(cfg.Executor)
	}
	if cfg.Region == "" {
		cfg.Region = "us-east-1"
	}
	if cfg.AccountID == "" {
		cfg.AccountID = "000000000000"
	}
	if cfg.MaxSharesPerQueue <= 0 {
		cfg.MaxSharesPerQueue = qshare.DefaultQuotaSharesPerQueue
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Tick <= 0 {
		cfg.Tick = time.Second
	}
	if cfg.Engine == nil {
		cfg.Engine = engine.New()
	}
	obs := cfg.Observer
	if obs == nil {
		obs = noObserver{}
	}
	var evlog *eventLog
	if cfg.Events != nil {
		evlog = &eventLog{sink: cfg.Events}
	}
	return &Daemon{
		evlog:      evlog,
		obs:        obs,
		counts:     map[statusKey]int{},
		unfinished: map[string]int{},
		admitting:  map[string]int{},
		cfg:        cfg,
		st:         cfg.Store,
		execs:      cfg.Executors,
		log:        cfg.Logger,
		now:        cfg.Now,
		eng:        cfg.Engine,
		envs:       map[string]*qshare.ServiceEnvironment{},
		policies:   map[string]*qshare.SchedulingPolicy{},
		queues:     map[string]*qshare.JobQueue{},
		shares:     map[store.ShareKey]*qshare.QuotaShare{},
		plans:      map[string]*qshare.CapacityPlan{},
		jobs:       map[string]*qshare.Job{},
		legacy:     map[string]string{},
		inflight:   map[string]*qshare.Job{},
		byQueue:    map[string]*jobIndex{},
		tokens:     map[string]*tokenEntry{},
		meta:       map[string]payloadMeta{},
		kick:       make(chan struct{}, 1),
		done:       make(chan struct{}),
		cwake:      make(chan struct{}, 1),
		cspace:     make(chan struct{}, 1),
		cdone:      make(chan struct{}),
		runs:       map[string]*run{},
		waits:      map[string]waitInfo{},
	}, nil
}

// Region returns the region used in ARNs.
func (d *Daemon) Region() string { return d.cfg.Region }

// AccountID returns the account ID used in ARNs.
func (d *Daemon) AccountID() string { return d.cfg.AccountID }

// Start loads the store, rebuilds the engine, recovers the attempts that were
// in flight through the executor, and starts the control loop. It returns
// once the daemon serves requests. The loop runs until Close.
func (d *Daemon) Start(ctx context.Context) error {
	if d.started {
		return errors.New("daemon: already started")
	}
	state, err := d.st.Load(ctx)
	if err != nil {
		return fmt.Errorf("daemon: load store: %w", err)
	}
	lctx, cancel := context.WithCancel(context.Background())
	if err := d.recover(ctx, lctx, state); err != nil {
		cancel()
		d.bg.Wait()
		return err
	}
	if err := d.reconcileEvents(); err != nil {
		cancel()
		d.bg.Wait()
		return fmt.Errorf("daemon: event log: %w", err)
	}
	d.started = true
	d.cancel = cancel
	d.lctx = lctx
	go d.commitLoop(lctx)
	go d.loop(lctx)
	if d.cfg.JobRetention > 0 {
		d.bg.Go(func() {
			d.retain(lctx)
		})
	}
	d.resumeDeletions()
	d.kickLoop()
	return nil
}

// Close stops the control loop and waits for it. Attempts that are running
// keep running in the executor; a later Start recovers them. Close does not
// close the store or the executor: their owner does.
func (d *Daemon) Close() error {
	if !d.started {
		return nil
	}
	d.cancel()
	<-d.done
	d.bg.Wait()
	return nil
}

func (d *Daemon) kickLoop() {
	select {
	case d.kick <- struct{}{}:
	default:
	}
}

// post appends operations to the loop's inbox and wakes the loop.
func (d *Daemon) post(ops ...op) {
	d.mu.Lock()
	d.inbox = append(d.inbox, ops...)
	d.mu.Unlock()
	d.kickLoop()
}

// commit writes a change through the store, translating its failure into an
// internal error for the caller.
func (d *Daemon) commit(ctx context.Context, c *store.Change) error {
	t0 := time.Now()
	err := d.st.Commit(ctx, c)
	d.obs.StoreCommit(time.Since(t0), err)
	if err != nil {
		d.log.Error("store commit failed", "err", err)
		return &qshare.Error{Code: qshare.EINTERNAL, Message: "the change could not be saved, so it was not applied; retry the request"}
	}
	return nil
}

// jobIndex lists the jobs of one queue in (CreatedAt, ID) order, for
// ListServiceJobs.
type jobIndex struct {
	ids []jobKey
}

type jobKey struct {
	created int64 // UnixNano
	id      string
}

func (a jobKey) less(b jobKey) bool {
	if a.created != b.created {
		return a.created < b.created
	}
	return a.id < b.id
}

// add inserts a key; keys mostly arrive in order, so this is mostly an append.
func (x *jobIndex) add(k jobKey) {
	n := len(x.ids)
	if n == 0 || x.ids[n-1].less(k) {
		x.ids = append(x.ids, k)
		return
	}
	i := sort.Search(n, func(i int) bool { return k.less(x.ids[i]) })
	x.ids = append(x.ids, jobKey{})
	copy(x.ids[i+1:], x.ids[i:])
	x.ids[i] = k
}

// installJob makes j the current record of its job. Callers hold d.mu.
func (d *Daemon) installJob(j *qshare.Job) {
	if _, ok := d.jobs[j.ID]; !ok {
		x := d.byQueue[j.JobQueue]
		if x == nil {
			x = &jobIndex{}
			d.byQueue[j.JobQueue] = x
		}
		x.add(jobKey{j.CreatedAt.UnixNano(), j.ID})
	}
	d.setJob(j)
}

// cloneJob returns a copy of j that may be changed without touching j: the
// attempts and tags are copied; demand and retry strategy are never changed
// and are shared.
func cloneJob(j *qshare.Job) *qshare.Job {
	c := *j
	c.Attempts = append([]qshare.Attempt(nil), j.Attempts...)
	return &c
}

func cloneTags(t map[string]string) map[string]string {
	if t == nil {
		return nil
	}
	c := make(map[string]string, len(t))
	for k, v := range t {
		c[k] = v
	}
	return c
}

// infoLog reports whether info records are logged. The loop's records are
// built only then: at --log-level warn their arguments (a dozen values
// boxed into interfaces per transition, and strings formatted for them)
// were a few allocations per job change for nothing.
func (d *Daemon) infoLog() bool {
	return d.log.Enabled(context.Background(), slog.LevelInfo)
}

func (d *Daemon) setMeta(id string, m payloadMeta) {
	d.metaMu.Lock()
	d.meta[id] = m
	d.metaMu.Unlock()
}

func (d *Daemon) dropMeta(id string) {
	d.metaMu.Lock()
	delete(d.meta, id)
	d.metaMu.Unlock()
}
