package stat

import (
	"math"
	"testing"
	"time"
)

func TestPercentileNearestRank(t *testing.T) {
	xs := []float64{15, 20, 35, 40, 50} // the textbook nearest-rank example
	for _, tc := range []struct{ p, want float64 }{
		{5, 15}, {30, 20}, {40, 20}, {50, 35}, {100, 50}, {0, 15},
	} {
		if got := Percentile(xs, tc.p); got != tc.want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, tc.p, got, tc.want)
		}
	}
	// 1..100: the p-th percentile is p.
	var hundred []float64
	for i := 100; i >= 1; i-- {
		hundred = append(hundred, float64(i))
	}
	for _, p := range []float64{1, 50, 90, 99, 100} {
		if got := Percentile(hundred, p); got != p {
			t.Errorf("Percentile(1..100, %v) = %v", p, got)
		}
	}
	if hundred[0] != 100 {
		t.Error("Percentile sorted its input in place")
	}
	if !math.IsNaN(Percentile(nil, 50)) {
		t.Error("Percentile of nothing is not NaN")
	}
}

func TestMedianAndMean(t *testing.T) {
	if got := Median([]float64{3, 1, 2}); got != 2 {
		t.Errorf("Median odd = %v", got)
	}
	if got := Median([]float64{4, 1, 3, 2}); got != 2.5 {
		t.Errorf("Median even = %v", got)
	}
	if got := Mean([]float64{1, 2, 6}); got != 3 {
		t.Errorf("Mean = %v", got)
	}
}

func TestLatencies(t *testing.T) {
	var ds []time.Duration
	for i := 1; i <= 200; i++ {
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	got := Latencies(ds)
	want := Latency{P50: 100, P90: 180, P99: 198, Max: 200}
	if got != want {
		t.Errorf("Latencies = %+v, want %+v", got, want)
	}
}
