// Package fanout runs numbered calls on a fixed number of goroutines, as
// many concurrent clients would, and stops them all at the first error:
// package data's downloads and uploads of a channel's objects, and the
// benchmarks' client phases (the end-to-end benchmark's qshare and Slurm
// submits, the Kueue benchmark's describes).
package fanout

import (
	"context"
	"sync"
	"sync/atomic"
)

// Each calls f(ctx, i) once for every i in [0, n), from workers goroutines
// that each take the next i in turn, and returns once all have returned.
// After the first call that fails, no new call starts and the ctx given to
// the calls is cancelled; Each returns that first error, or nil when none
// failed. It also stops starting calls once ctx is done (and says nothing
// of it: the caller's next use of ctx does). workers below 1 count as 1.
func Each(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	for range max(workers, 1) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(ctx, i); err != nil {
					once.Do(func() { first = err; cancel() })
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
