package periodic

import (
	"sync/atomic"
	"testing"
	"time"
)

// TestRun: f runs at the period until either stop channel closes, and
// not after Run has returned.
func TestRun(t *testing.T) {
	for _, second := range []bool{false, true} {
		stop, other := make(chan struct{}), make(chan struct{})
		var n atomic.Int64
		ticked := make(chan struct{}, 100)
		done := make(chan struct{})
		go func() {
			defer close(done)
			f := func() { n.Add(1); ticked <- struct{}{} }
			if second {
				Run(time.Millisecond, f, stop, other)
			} else {
				Run(time.Millisecond, f, stop)
			}
		}()
		for range 3 {
			<-ticked
		}
		if second {
			close(other)
		} else {
			close(stop)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("Run did not return after its stop channel closed (two channels: %v)", second)
		}
		after := n.Load()
		time.Sleep(20 * time.Millisecond)
		if n.Load() != after || after < 3 {
			t.Fatalf("f ran %d times, then %d after Run returned", after, n.Load()-after)
		}
	}
}

// TestRunNeedsAStop: Run without a stop channel would never return.
func TestRunNeedsAStop(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("Run with no stop channel did not panic")
		}
	}()
	Run(time.Millisecond, func() {})
}
