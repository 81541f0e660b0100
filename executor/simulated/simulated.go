// Package simulated is the executor that runs no process. An attempt "runs"
// for the duration its payload asks for and then "exits" with the code it
// asks for. The daemon drives it exactly like a real executor (Start, Stop,
// Wait, Recover), which makes it the executor of benchmarks, of the worked
// examples and of most daemon tests.
//
// What a payload controls, through its Environment:
//
//	QSHARE_SIM_DURATION     Go duration the attempt runs for (default 1s,
//	                        or Options.DefaultDuration)
//	QSHARE_SIM_EXIT_CODE    exit code when it ends on its own (default 0)
//	QSHARE_SIM_ON_STOP      what the attempt does on a stop (SIGTERM):
//	                        "die" (default): it dies of the signal at once;
//	                        "checkpoint": it traps the signal, checkpoints
//	                        for QSHARE_SIM_STOP_DELAY, and exits with code 0;
//	                        "ignore": it ignores the signal
//	QSHARE_SIM_STOP_DELAY   Go duration a "checkpoint" attempt takes (default 0)
//	QSHARE_STOP_GRACE       the job's grace period (Go duration or seconds)
//
// An attempt still running when the grace period ends (an "ignore" one, or a
// "checkpoint" one whose delay is longer than the grace) is "killed" with
// SIGKILL then. Each attempt costs one timer, not a goroutine, so tens of
// thousands of attempts run at once in real time.
//
// The attempt's whole plan (start time, duration, exit code, stop behaviour)
// is recorded in Handle.State, so a new Executor can Recover an attempt after
// a restart: it is still Running (for the time it has left) or it has Exited
// (with its code). A stop requested before the restart is not in the handle:
// the daemon, which persisted its decision to stop, stops it again.
package simulated

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/trainingjob"
)

// Environment keys the simulated executor reads from a payload.
const (
	EnvDuration  = "QSHARE_SIM_DURATION"
	EnvExitCode  = "QSHARE_SIM_EXIT_CODE"
	EnvOnStop    = "QSHARE_SIM_ON_STOP"
	EnvStopDelay = "QSHARE_SIM_STOP_DELAY"
	EnvStopGrace = "QSHARE_STOP_GRACE"
)

// DefaultDuration is how long an attempt runs when its payload does not say.
const DefaultDuration = time.Second

// DefaultStopGrace is the grace period of Stop when neither the caller, the
// job nor Options set one: every executor's (executor.DefaultStopGrace).
const DefaultStopGrace = executor.DefaultStopGrace

// Clock is the time source of the executor. The real clock is used unless
// Options.Clock gives another (a test's virtual clock).
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// AfterFunc calls f in its own goroutine after d and returns a function
	// that cancels the call (reporting whether it did), like time.AfterFunc.
	AfterFunc(d time.Duration, f func()) (stop func() bool)
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }
func (realClock) AfterFunc(d time.Duration, f func()) func() bool {
	return time.AfterFunc(d, f).Stop
}

// Options configure an Executor. The zero value is valid.
type Options struct {
	// StopGrace is the default grace period of Stop; 0 means DefaultStopGrace.
	StopGrace time.Duration
	// Clock replaces the real clock, for tests.
	Clock Clock
	// DefaultDuration is how long an attempt runs when its payload sets no
	// QSHARE_SIM_DURATION (qshare serve --sim-duration); 0 means
	// DefaultDuration. A job built by the SageMaker SDK's ModelTrainer
	// cannot set the variable, so this is how its run is lengthened.
	DefaultDuration time.Duration
}

// Executor is the simulated executor. It is safe for concurrent use.
type Executor struct {
	clock Clock
	grace time.Duration
	def   time.Duration // of an attempt whose payload names none

	mu       sync.Mutex
	attempts map[string]*attempt
}

var _ executor.Executor = (*Executor)(nil)

// New returns a simulated executor.
func New(o Options) *Executor {
	e := &Executor{clock: o.Clock, grace: o.StopGrace, def: o.DefaultDuration, attempts: map[string]*attempt{}}
	e.def = executor.OrDefault(e.def, DefaultDuration)
	if e.clock == nil {
		e.clock = realClock{}
	}
	e.grace = executor.OrDefault(e.grace, DefaultStopGrace)
	return e
}

// plan is what Handle.State records: enough to replay the attempt's end.
type plan struct {
	Start     time.Time     `json:"start"`
	Duration  time.Duration `json:"duration"`
	ExitCode  int           `json:"exitCode"`
	OnStop    string        `json:"onStop,omitempty"` // "", "checkpoint", "ignore"
	StopDelay time.Duration `json:"stopDelay,omitempty"`
	Grace     time.Duration `json:"grace,omitempty"` // the job's own grace, 0 if none
}

type attempt struct {
	id     string
	handle executor.Handle
	plan   plan
	// stopAt is when a Stop was requested (zero if none), and grace the
	// grace period it was given.
	stopAt time.Time
	grace  time.Duration
	// cancel stops the pending end timer.
	cancel func() bool
	done   chan struct{}
	exit   executor.Exit
	ended  bool
}

// Name returns "simulated".
func (e *Executor) Name() string { return "simulated" }

// Validate checks that the payload parses and that its QSHARE_SIM_* values
// are well formed.
func (e *Executor) Validate(payload string, demand qshare.Capacity) error {
	_, err := e.planOf(payload)
	return err
}

// ValidateRequest is Validate for a payload that the caller has already
// parsed with trainingjob.Parse (the daemon does, for the demand), so that a
// submit parses its payload once. It only reads req.
func (e *Executor) ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error {
	_, err := planOfRequest(req, e.def)
	return err
}

func (e *Executor) planOf(payload string) (plan, error) {
	req, err := trainingjob.Parse(payload)
	if err != nil {
		return plan{}, err
	}
	return planOfRequest(req, e.def)
}

// planOfRequest reads the plan of an attempt of req; def is its duration
// when the payload names none.
func planOfRequest(req *trainingjob.Request, def time.Duration) (plan, error) {
	p := plan{Duration: def}
	env := req.Environment
	if v, ok := env[EnvDuration]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return plan{}, qshare.Errorf(qshare.EINVALID, "Environment.%s is %q: give a non-negative Go duration such as 90s or 1h30m", EnvDuration, v)
		}
		p.Duration = d
	}
	if v, ok := env[EnvExitCode]; ok {
		c, err := strconv.Atoi(strings.TrimSpace(v))
		if err != nil || c < 0 || c > 255 {
			return plan{}, qshare.Errorf(qshare.EINVALID, "Environment.%s is %q: give an exit code from 0 to 255", EnvExitCode, v)
		}
		p.ExitCode = c
	}
	if v, ok := env[EnvStopDelay]; ok {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil || d < 0 {
			return plan{}, qshare.Errorf(qshare.EINVALID, "Environment.%s is %q: give a non-negative Go duration such as 5s", EnvStopDelay, v)
		}
		p.StopDelay = d
	}
	switch v := strings.TrimSpace(env[EnvOnStop]); v {
	case "", "die":
	case "checkpoint", "ignore":
		p.OnStop = v
	default:
		return plan{}, qshare.Errorf(qshare.EINVALID, "Environment.%s is %q: give die, checkpoint or ignore", EnvOnStop, v)
	}
	if v, ok := env[EnvStopGrace]; ok {
		g, err := ParseGrace(v)
		if err != nil {
			return plan{}, qshare.Errorf(qshare.EINVALID, "Environment.%s is %q: %v", EnvStopGrace, v, err)
		}
		p.Grace = g
	}
	return p, nil
}

// ParseGrace reads a grace period: a Go duration ("90s", "2m") or a whole
// number of seconds ("90"). It is the syntax of QSHARE_STOP_GRACE.
func ParseGrace(v string) (time.Duration, error) {
	v = strings.TrimSpace(v)
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		if n < 0 {
			return 0, fmt.Errorf("give a non-negative number of seconds or a Go duration such as 90s")
		}
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("give a non-negative number of seconds or a Go duration such as 90s")
	}
	return d, nil
}

// Start "launches" the attempt: it arms one timer for its end. Starting an
// attempt ID again returns the first handle.
func (e *Executor) Start(ctx context.Context, s executor.Spec) (executor.Handle, error) {
	if s.AttemptID == "" {
		return executor.Handle{}, qshare.Errorf(qshare.EINVALID, "executor: attempt ID is empty")
	}
	p, err := e.planOf(s.Payload)
	if err != nil {
		return executor.Handle{}, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.attempts[s.AttemptID]; ok {
		return a.handle, nil
	}
	p.Start = e.clock.Now()
	a := &attempt{id: s.AttemptID, plan: p, done: make(chan struct{})}
	a.handle = executor.Handle{AttemptID: s.AttemptID, StartedAt: p.Start, State: a.state()}
	e.attempts[s.AttemptID] = a
	e.armLocked(a, p.Start)
	return a.handle, nil
}

func (a *attempt) state() []byte {
	b, _ := json.Marshal(a.plan)
	return b
}

// outcome computes when and how the attempt ends, given its plan and the
// stop request (if any), and the grace the stop was given.
func (a *attempt) outcome(grace time.Duration) (time.Time, executor.Exit) {
	p := a.plan
	natural := p.Start.Add(p.Duration)
	x := executor.Exit{AttemptID: a.id}
	if a.stopAt.IsZero() || !a.stopAt.Before(natural) {
		x.ExitCode, x.Reason, x.At = p.ExitCode, fmt.Sprintf("Essential process exited with code %d", p.ExitCode), natural
		return natural, x
	}
	x.Stopped = true
	exited := func(at time.Time, code int) (time.Time, executor.Exit) {
		x.ExitCode, x.Reason, x.At = code, fmt.Sprintf("Essential process exited with code %d", code), at
		return at, x
	}
	killed := func(at time.Time, sig, reason string) (time.Time, executor.Exit) {
		x.ExitCode, x.Signal, x.Reason, x.At = -1, sig, reason, at
		return at, x
	}
	kill := a.stopAt.Add(grace)
	switch {
	case p.OnStop == "":
		return killed(a.stopAt, "SIGTERM", "Essential process terminated by signal SIGTERM")
	case p.OnStop == "checkpoint" && p.StopDelay <= grace:
		if end := a.stopAt.Add(p.StopDelay); end.Before(natural) {
			return exited(end, 0)
		}
		return exited(natural, p.ExitCode)
	case natural.Before(kill):
		return exited(natural, p.ExitCode)
	}
	return killed(kill, "SIGKILL", "Essential process killed by signal SIGKILL at the end of the stop grace period")
}

// armLocked (re)arms the end timer of a for its planned end, or ends it now
// if that is already past.
func (e *Executor) armLocked(a *attempt, now time.Time) {
	if a.cancel != nil {
		a.cancel()
		a.cancel = nil
	}
	end, x := a.outcome(e.graceFor(a, a.grace))
	d := end.Sub(now)
	if d <= 0 {
		e.finishLocked(a, x)
		return
	}
	a.cancel = e.clock.AfterFunc(d, func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		// Recompute: a Stop may have changed the end since the timer was armed.
		end, x := a.outcome(e.graceFor(a, a.grace))
		if now := e.clock.Now(); end.After(now) {
			e.armLocked(a, now)
			return
		}
		e.finishLocked(a, x)
	})
}

func (e *Executor) finishLocked(a *attempt, x executor.Exit) {
	if a.ended {
		return
	}
	a.ended = true
	a.exit = x
	a.cancel = nil
	close(a.done)
}

// graceFor returns the grace period that applies to a stop of a: the job's
// QSHARE_STOP_GRACE if it sets one (the job knows how long its checkpoint
// takes), else the caller's if non-zero (the server's setting), else the
// executor's default.
func (e *Executor) graceFor(a *attempt, caller time.Duration) time.Duration {
	switch {
	case a.plan.Grace > 0:
		return a.plan.Grace
	case caller > 0:
		return caller
	}
	return e.grace
}

// Stop asks the attempt to stop. It ends at once unless its payload asks for
// a stop delay or to ignore the stop; then it ends after the delay, or at the
// end of the grace period. A second Stop, or a Stop of an ended attempt, is
// a no-op.
func (e *Executor) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	a, ok := e.attempts[attemptID]
	if !ok {
		return executor.ErrUnknownAttempt
	}
	if a.ended || !a.stopAt.IsZero() {
		return nil
	}
	now := e.clock.Now()
	a.stopAt = now
	a.grace = e.graceFor(a, grace)
	e.armLocked(a, now)
	return nil
}

// Wait blocks until the attempt has ended or ctx is done.
func (e *Executor) Wait(ctx context.Context, attemptID string) (executor.Exit, error) {
	e.mu.Lock()
	a, ok := e.attempts[attemptID]
	e.mu.Unlock()
	if !ok {
		return executor.Exit{}, executor.ErrUnknownAttempt
	}
	return executor.AwaitExit(ctx, a.done, &a.exit)
}

// Recover re-creates an attempt from its handle: Running if its planned end
// is still ahead (a timer is armed for the time it has left), Exited if it
// is past. A handle whose State cannot be read is Lost.
func (e *Executor) Recover(ctx context.Context, h executor.Handle) (executor.Recovery, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.attempts[h.AttemptID]; ok {
		if a.ended {
			return executor.Exited, nil
		}
		return executor.Running, nil
	}
	var p plan
	if h.AttemptID == "" || json.Unmarshal(h.State, &p) != nil || p.Start.IsZero() {
		return executor.Lost, nil
	}
	a := &attempt{id: h.AttemptID, handle: h, plan: p, done: make(chan struct{})}
	e.attempts[h.AttemptID] = a
	e.armLocked(a, e.clock.Now())
	if a.ended {
		return executor.Exited, nil
	}
	return executor.Running, nil
}

// Forget drops an ended attempt from memory, once the daemon has recorded
// its end, so that a long benchmark does not accumulate them. After Forget,
// Wait and Stop of the attempt return ErrUnknownAttempt; the simulated
// executor keeps nothing on disk, so a Start of the same ID would run it
// again: do not start a forgotten attempt. Forgetting an attempt that has
// not ended is a no-op.
func (e *Executor) Forget(attemptID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if a, ok := e.attempts[attemptID]; ok && a.ended {
		delete(e.attempts, attemptID)
	}
}

// Logs returns executor.ErrNoLog: a simulated attempt runs no process and
// writes no output (the log endpoint says so to whoever asks).
func (e *Executor) Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error) {
	return nil, executor.ErrNoLog
}

// Close stops every pending timer. Attempts are forgotten, as a real
// executor's processes would outlive it; a new Executor recovers them.
func (e *Executor) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, a := range e.attempts {
		if a.cancel != nil {
			a.cancel()
			a.cancel = nil
		}
	}
	e.attempts = map[string]*attempt{}
	return nil
}
