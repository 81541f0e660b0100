package executor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"time"

	"qshare"
	"qshare/trainingjob"
)

// DefaultName names the executor of `qshare serve --executor KIND` alone,
// and the executor of every service environment and attempt that names
// none (environments created, and attempts stored, before executors had
// names).
const DefaultName = "default"

// validName is what an executor's name may be: it is a tag's value
// (qshare:executor=NAME), a metric's label and a word in status reasons.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// ValidName reports whether name may name an executor: 1 to 63 letters,
// digits, '-', '_' or '.', beginning with a letter or digit.
func ValidName(name string) bool { return validName.MatchString(name) }

// Set is the named executors of one server: a service environment names
// the one that runs its jobs (the tag qshare:executor), and each attempt
// records the one that ran it. Every method is safe for concurrent use;
// the set does not change once made.
type Set struct {
	byName map[string]Executor
	names  []string
}

// NewSet returns the set of the named executors. It needs at least one,
// and every name must be ValidName.
func NewSet(named map[string]Executor) (*Set, error) {
	if len(named) == 0 {
		return nil, errors.New("executor: a set needs at least one executor")
	}
	s := &Set{byName: make(map[string]Executor, len(named))}
	for n, ex := range named {
		if !ValidName(n) {
			return nil, fmt.Errorf("executor: %q is not a valid executor name: use 1 to 63 letters, digits, '-', '_' or '.', beginning with a letter or digit", n)
		}
		if ex == nil {
			return nil, fmt.Errorf("executor: executor %s is nil", n)
		}
		s.byName[n] = ex
		s.names = append(s.names, n)
	}
	sort.Strings(s.names)
	return s, nil
}

// Single is the set of one executor, named DefaultName: what a server or
// a test with one executor has.
func Single(ex Executor) *Set {
	return &Set{byName: map[string]Executor{DefaultName: ex}, names: []string{DefaultName}}
}

// Names returns the executors' names, sorted.
func (s *Set) Names() []string { return append([]string(nil), s.names...) }

// Has reports whether the set has an executor of that name ("" is
// DefaultName).
func (s *Set) Has(name string) bool {
	_, ok := s.byName[orDefault(name)]
	return ok
}

// Get returns the executor of that name ("" is DefaultName). For a name
// the set does not have, it returns an executor that runs nothing: its
// Start and Recover fail, and Wait, Stop and Logs answer
// ErrUnknownAttempt, each saying that no executor has the name, so that a
// caller never runs an attempt somewhere else than where it was meant to.
func (s *Set) Get(name string) Executor {
	if ex, ok := s.byName[orDefault(name)]; ok {
		return ex
	}
	return absent(orDefault(name))
}

// Each calls f with each executor and its name, in name order.
func (s *Set) Each(f func(name string, ex Executor)) {
	for _, n := range s.names {
		f(n, s.byName[n])
	}
}

// Close closes every executor and returns their errors joined.
func (s *Set) Close() error {
	var errs []error
	for _, n := range s.names {
		if err := s.byName[n].Close(); err != nil {
			errs = append(errs, fmt.Errorf("executor %s: %w", n, err))
		}
	}
	return errors.Join(errs...)
}

func orDefault(name string) string {
	if name == "" {
		return DefaultName
	}
	return name
}

// ByAttempt is the set seen as one Executor by whoever knows attempts only
// by their ID (the log endpoints): of returns the name of the executor that
// ran an attempt (the daemon's record), and each call about an attempt
// goes to it. Start goes to the executor that Spec.Executor names;
// Validate and ValidateRequest, which know no environment, to DefaultName's
// executor. The view implements InstanceLogger: for an executor without
// instance logs, instance 0 is Logs and any other is EINVALID.
func (s *Set) ByAttempt(of func(attemptID string) string) Executor {
	return &routed{set: s, of: of}
}

type routed struct {
	set *Set
	of  func(attemptID string) string
}

var (
	_ Executor       = (*routed)(nil)
	_ InstanceLogger = (*routed)(nil)
)

func (r *routed) at(attemptID string) Executor { return r.set.Get(r.of(attemptID)) }

func (r *routed) Name() string { return "set" }

func (r *routed) Validate(payload string, demand qshare.Capacity) error {
	return r.set.Get(DefaultName).Validate(payload, demand)
}

func (r *routed) ValidateRequest(req *trainingjob.Request, demand qshare.Capacity) error {
	return r.set.Get(DefaultName).ValidateRequest(req, demand)
}

func (r *routed) Start(ctx context.Context, sp Spec) (Handle, error) {
	return r.set.Get(sp.Executor).Start(ctx, sp)
}

func (r *routed) Stop(ctx context.Context, attemptID string, grace time.Duration) error {
	return r.at(attemptID).Stop(ctx, attemptID, grace)
}

func (r *routed) Wait(ctx context.Context, attemptID string) (Exit, error) {
	return r.at(attemptID).Wait(ctx, attemptID)
}

func (r *routed) Recover(ctx context.Context, h Handle) (Recovery, error) {
	return r.at(h.AttemptID).Recover(ctx, h)
}

func (r *routed) Forget(attemptID string) { r.at(attemptID).Forget(attemptID) }

func (r *routed) Logs(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error) {
	return r.at(attemptID).Logs(ctx, attemptID, follow)
}

func (r *routed) InstanceLogs(ctx context.Context, attemptID string, instance int, follow bool) (io.ReadCloser, error) {
	ex := r.at(attemptID)
	if il, ok := ex.(InstanceLogger); ok {
		return il.InstanceLogs(ctx, attemptID, instance, follow)
	}
	if instance != 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "instance %d is not valid: the attempt's executor runs one log per attempt; ask for instance 0", instance)
	}
	return ex.Logs(ctx, attemptID, follow)
}

// Close does nothing: the set's owner closes the set.
func (r *routed) Close() error { return nil }

// absent is Get's answer for a name the set does not have.
type absent string

func (a absent) err() error {
	return fmt.Errorf("no executor is named %q on this server: its executors file (qshare serve --executors) does not define it", string(a))
}

func (a absent) Name() string { return string(a) }
func (a absent) Validate(string, qshare.Capacity) error {
	return qshare.Errorf(qshare.EINVALID, "%s", a.err())
}
func (a absent) ValidateRequest(*trainingjob.Request, qshare.Capacity) error {
	return qshare.Errorf(qshare.EINVALID, "%s", a.err())
}
func (a absent) Start(context.Context, Spec) (Handle, error) { return Handle{}, a.err() }
func (a absent) Stop(context.Context, string, time.Duration) error {
	return fmt.Errorf("%w: %w", ErrUnknownAttempt, a.err())
}
func (a absent) Wait(context.Context, string) (Exit, error) {
	return Exit{}, fmt.Errorf("%w: %w", ErrUnknownAttempt, a.err())
}
func (a absent) Recover(context.Context, Handle) (Recovery, error) { return 0, a.err() }
func (a absent) Forget(string)                                     {}
func (a absent) Logs(context.Context, string, bool) (io.ReadCloser, error) {
	return nil, fmt.Errorf("%w: %w", ErrUnknownAttempt, a.err())
}
func (a absent) Close() error { return nil }
