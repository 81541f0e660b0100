package executor

import (
	"context"
	"sync"
)

// Slot is the part of an executor's own record of an attempt that every
// executor keeping its attempts in a map by ID under one mutex (process,
// slurm) handles alike; the record embeds it, and the executor's mutex
// guards its fields but Done. Lookup, WaitFor and BeginStop are what Stop
// and Wait of such an executor share.
type Slot struct {
	// Ready is closed once Start or Recover has set the attempt up;
	// StartErr then says why it could not be, or is nil.
	Ready    chan struct{}
	StartErr error
	// Ended is true once the attempt's end is known; Stopping once a
	// stop has begun.
	Ended    bool
	Stopping bool
	// Done is closed once the attempt has ended, and Exit set before.
	Done chan struct{}
	Exit Exit
}

// NewSlot returns the Slot of an attempt being set up.
func NewSlot() Slot { return Slot{Ready: make(chan struct{}), Done: make(chan struct{})} }

func (s *Slot) slot() *Slot { return s }

// AwaitReady blocks until the attempt is set up and returns StartErr, or
// ctx's error when ctx ends first: a second Start or a Recover of an
// attempt that a first one is still setting up waits for it with this.
func (s *Slot) AwaitReady(ctx context.Context) error {
	select {
	case <-s.Ready:
		return s.StartErr
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Recovered is Recover of such an executor for an attempt that it has
// started or recovered already, whose Slot s the caller found under mu:
// once the attempt is set up, Lost if that failed, Exited once its end is
// known, else Running; ctx's error when ctx ends first.
func Recovered(ctx context.Context, mu *sync.Mutex, s *Slot) (Recovery, error) {
	select {
	case <-s.Ready:
		if s.StartErr != nil {
			return Lost, nil
		}
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	mu.Lock()
	ended := s.Ended
	mu.Unlock()
	select {
	case <-s.Done:
		ended = true
	default:
	}
	if ended {
		return Exited, nil
	}
	return Running, nil
}

// Attempt is an executor's record of an attempt that embeds a Slot.
type Attempt interface{ slot() *Slot }

// Lookup returns the attempt id of attempts once it is set up; mu guards
// attempts. It returns ErrUnknownAttempt when attempts does not hold id or
// its Start failed, and ctx's error when ctx ends first.
func Lookup[A Attempt](ctx context.Context, mu *sync.Mutex, attempts map[string]A, id string) (A, error) {
	var zero A
	mu.Lock()
	a, ok := attempts[id]
	mu.Unlock()
	if !ok {
		return zero, ErrUnknownAttempt
	}
	s := a.slot()
	select {
	case <-s.Ready:
	case <-ctx.Done():
		return zero, ctx.Err()
	}
	if s.StartErr != nil {
		return zero, ErrUnknownAttempt
	}
	return a, nil
}

// WaitFor is Wait of such an executor: the Exit of the attempt id of
// attempts once it has ended (Lookup's errors, or ctx's).
func WaitFor[A Attempt](ctx context.Context, mu *sync.Mutex, attempts map[string]A, id string) (Exit, error) {
	a, err := Lookup(ctx, mu, attempts, id)
	if err != nil {
		return Exit{}, err
	}
	s := a.slot()
	return AwaitExit(ctx, s.Done, &s.Exit)
}

// BeginStop is the start of Stop of such an executor: it looks the
// attempt id up (Lookup's errors) and reports, under mu, whether the stop
// is to be carried out: not for an attempt that has ended or is being
// stopped already (a second Stop is a no-op); otherwise it marks it
// stopping.
func BeginStop[A Attempt](ctx context.Context, mu *sync.Mutex, attempts map[string]A, id string) (A, bool, error) {
	a, err := Lookup(ctx, mu, attempts, id)
	if err != nil {
		return a, false, err
	}
	mu.Lock()
	defer mu.Unlock()
	s := a.slot()
	if s.Ended || s.Stopping {
		return a, false, nil
	}
	s.Stopping = true
	return a, true, nil
}
