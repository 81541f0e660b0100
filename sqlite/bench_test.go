package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"qshare"
	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// The jobs, the parallel load and the figures are storetest's (bench.go),
// the same as the PostgreSQL store's benchmarks.

func openBench(b *testing.B, opts ...sqlite.Option) *sqlite.DB {
	d, err := sqlite.Open(filepath.Join(b.TempDir(), "qshare.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// benchParallel commits one submit per operation from 64 goroutines and
// reports commits per second, the mean group-commit batch and the p50/p99
// latency of Commit.
func benchParallel(b *testing.B, opts ...sqlite.Option) {
	d := openBench(b, opts...)
	storetest.BenchCommitParallel(b, d, d.Stats)
}

// BenchmarkCommitParallel is the submit path under load: 64 concurrent
// callers, each Commit one PutJobs of one job, durable (synchronous=FULL).
func BenchmarkCommitParallel(b *testing.B) { benchParallel(b) }

// BenchmarkCommitParallelNoGroup is the same load with group commit turned
// off (one transaction and one fsync per Commit), for the ratio.
func BenchmarkCommitParallelNoGroup(b *testing.B) { benchParallel(b, sqlite.WithMaxBatch(1)) }

// BenchmarkCommitSequential is one caller committing one submit at a time:
// every Commit pays its own fsync.
func BenchmarkCommitSequential(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{storetest.SubmitJob(start)}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	storetest.ReportCommits(b, d.Stats(), lat)
}

// BenchmarkLoad measures the start-up read of a store that holds n jobs.
func BenchmarkLoad(b *testing.B) {
	storetest.BenchLoad(b, func(b *testing.B) store.Store { return openBench(b) })
}
