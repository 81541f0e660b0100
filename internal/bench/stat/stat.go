// Package stat is the statistics of qshare's benchmark reports:
// percentiles by the nearest-rank method, medians, means and latency
// summaries. It is a package of its own, beside internal/bench, so that
// the Go benchmarks of other packages (api) report their latencies as
// qshare bench does without linking the benchmarks' harnesses (a
// Kubernetes client, Slurm, containers) into their test binaries.
package stat

import (
	"math"
	"slices"
	"time"
)

// Percentile returns the p-th percentile (0 < p <= 100) of xs by the
// nearest-rank method: the smallest value such that at least p% of the
// values are at or below it. It returns NaN for an empty slice. xs need not
// be sorted and is not modified.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return percentileSorted(s, p)
}

func percentileSorted(s []float64, p float64) float64 {
	if p <= 0 {
		return s[0]
	}
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = max(1, min(rank, len(s)))
	return s[rank-1]
}

// Median returns the middle value of xs (the mean of the two middle values
// for an even count), or NaN for an empty slice.
func Median(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// Mean returns the arithmetic mean of xs, or NaN for an empty slice.
func Mean(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// Latency is a set of latency percentiles in milliseconds.
type Latency struct {
	P50 float64 `json:"p50_ms"`
	P90 float64 `json:"p90_ms"`
	P99 float64 `json:"p99_ms"`
	Max float64 `json:"max_ms"`
}

// Latencies summarises durations as percentiles in milliseconds.
func Latencies(ds []time.Duration) Latency {
	if len(ds) == 0 {
		return Latency{}
	}
	ms := make([]float64, len(ds))
	for i, d := range ds {
		ms[i] = float64(d) / float64(time.Millisecond)
	}
	slices.Sort(ms)
	return Latency{
		P50: Round(percentileSorted(ms, 50), 3),
		P90: Round(percentileSorted(ms, 90), 3),
		P99: Round(percentileSorted(ms, 99), 3),
		Max: Round(ms[len(ms)-1], 3),
	}
}

// Round rounds x to d decimal places, so that reports do not pretend to a
// precision the measurement does not have.
func Round(x float64, d int) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	p := math.Pow10(d)
	return math.Round(x*p) / p
}
