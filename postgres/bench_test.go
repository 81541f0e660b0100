package postgres

import (
	"testing"

	"qshare/store"
	"qshare/store/storetest"
)

// The jobs, the parallel load and the figures are storetest's (bench.go),
// the same as sqlite/'s benchmarks.

func benchDB(b *testing.B) *DB { return mustOpen(b, newDB(b)) }

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
