package postgres

import (
	"context"
	"testing"

	"qshare/store"
	"qshare/store/storetest"
)

// The jobs, the parallel load and the figures are storetest's (bench.go),
// the same as sqlite/'s benchmarks.

func benchDB(b *testing.B) *DB {
	b.Helper()
	if srv == nil {
		b.Skip(skipWhy)
	}
	loc, err := srv.NewDatabase(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	d, err := Open(context.Background(), loc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// BenchmarkCommitParallel: 64 callers, each committing one submitted job
// per operation, durably, through group commit; commits per second, per
// transaction, and the p50/p99 latency of Commit.
func BenchmarkCommitParallel(b *testing.B) {
	d := benchDB(b)
	storetest.BenchCommitParallel(b, d, d.Stats)
}

// BenchmarkLoad measures the start-up read of a store of n jobs.
func BenchmarkLoad(b *testing.B) {
	storetest.BenchLoad(b, func(b *testing.B) store.Store { return benchDB(b) })
}
