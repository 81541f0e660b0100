package executor

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"
)

// TestRecovered: Recover of an attempt an executor holds waits for its
// set-up (the caller's context bounds the wait), then answers Lost if the
// set-up failed, Exited once its end is known (Ended, or Done closed),
// else Running.
func TestRecovered(t *testing.T) {
	var mu sync.Mutex
	ctx := context.Background()

	s := NewSlot()
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if r, err := Recovered(short, &mu, &s); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("an attempt still being set up, the context ending: %v, %v; want the context's error", r, err)
	}
	go func() {
		time.Sleep(10 * time.Millisecond)
		close(s.Ready)
	}()
	if r, err := Recovered(ctx, &mu, &s); err != nil || r != Running {
		t.Errorf("set up meanwhile: %v, %v; want Running", r, err)
	}
	mu.Lock()
	s.Ended = true
	mu.Unlock()
	if r, err := Recovered(ctx, &mu, &s); err != nil || r != Exited {
		t.Errorf("its end known: %v, %v; want Exited", r, err)
	}
	done := NewSlot()
	close(done.Ready)
	close(done.Done)
	if r, err := Recovered(ctx, &mu, &done); err != nil || r != Exited {
		t.Errorf("done: %v, %v; want Exited", r, err)
	}
	failed := NewSlot()
	failed.StartErr = ErrUnknownAttempt
	close(failed.Ready)
	if r, err := Recovered(ctx, &mu, &failed); err != nil || r != Lost {
		t.Errorf("set-up failed: %v, %v; want Lost", r, err)
	}
}
