package fanout

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
)

// Every index is called once, from at most workers goroutines at a time.
func TestEachCallsEveryIndexOnce(t *testing.T) {
	const n, workers = 1000, 7
	var calls [n]atomic.Int32
	var running, most atomic.Int32
	err := Each(context.Background(), workers, n, func(_ context.Context, i int) error {
		r := running.Add(1)
		for {
			m := most.Load()
			if r <= m || most.CompareAndSwap(m, r) {
				break
			}
		}
		calls[i].Add(1)
		running.Add(-1)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for i := range calls {
		if c := calls[i].Load(); c != 1 {
			t.Fatalf("index %d called %d times", i, c)
		}
	}
	if m := most.Load(); m > workers {
		t.Fatalf("%d calls at once, want at most %d", m, workers)
	}
	if err := Each(context.Background(), 0, 3, func(context.Context, int) error { return nil }); err != nil {
		t.Fatalf("workers 0: %v", err)
	}
}

// The first error is returned, the calls' context is cancelled, and no
// call starts after it.
func TestEachStopsAtTheFirstError(t *testing.T) {
	boom := errors.New("boom")
	var after atomic.Int32
	var failed atomic.Bool
	err := Each(context.Background(), 1, 100, func(ctx context.Context, i int) error {
		if failed.Load() {
			after.Add(1)
		}
		if i == 10 {
			failed.Store(true)
			return boom
		}
		return nil
	})
	if !errors.Is(err, boom) {
		t.Fatalf("got %v, want boom", err)
	}
	if a := after.Load(); a != 0 {
		t.Fatalf("%d calls started after the failure", a)
	}
	// Index 1 waits until index 0 runs, and index 0 fails once index 1
	// waits on the context: index 1 returns only when it is cancelled.
	var cancelled atomic.Bool
	waiting := make(chan struct{})
	Each(context.Background(), 2, 2, func(ctx context.Context, i int) error {
		if i == 0 {
			<-waiting
			return boom
		}
		close(waiting)
		<-ctx.Done()
		cancelled.Store(true)
		return nil
	})
	if !cancelled.Load() {
		t.Fatal("the other call's context was not cancelled")
	}
}

// A done context starts nothing.
func TestEachDoneContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var calls atomic.Int32
	if err := Each(ctx, 4, 10, func(context.Context, int) error { calls.Add(1); return nil }); err != nil || calls.Load() != 0 {
		t.Fatalf("err %v, %d calls", err, calls.Load())
	}
}
