// Package bench is qshare's benchmark harness: the workloads, the runners
// and the reports behind `qshare bench`. Each benchmark measures qshare
// against an anchor that anyone can check: Kueue's scheduler benchmark
// (published figures, and the ideal computed by the simulator), a local
// Slurm started side by side (package internal/bench/slurm), and the targets of the
// engine and server issues.
//
// A runner returns one result struct per run; Aggregate turns N runs into
// one JSON object whose fields are the medians, with the spread of each,
// and Table prints the same for people. Nothing here asserts a timing: the
// figures are reported, and docs/performance.md records them with the
// command that produced them.
package bench

import "qshare/internal/bench/stat"

// The statistics are package stat's, under the names the benchmarks use.

// Latency is a set of latency percentiles in milliseconds (stat.Latency).
type Latency = stat.Latency

var (
	// Percentile is stat.Percentile: the nearest-rank percentile.
	Percentile = stat.Percentile
	// Median is stat.Median.
	Median = stat.Median
	// Mean is stat.Mean.
	Mean = stat.Mean
	// Latencies is stat.Latencies: durations as percentiles in ms.
	Latencies = stat.Latencies
)

// round is stat.Round: x to d decimal places.
func round(x float64, d int) float64 { return stat.Round(x, d) }
