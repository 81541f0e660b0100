package bench

import "testing"

// The faster half of bench e2e --with gets the jobs that make it last as
// long as the slower, within maxHalfJobs; the slower keeps its count.
func TestScaledJobs(t *testing.T) {
	for _, c := range []struct {
		n           int
		rate, other float64
		want        int
	}{
		{100, 3, 336, 100},          // the slower half
		{100, 336, 3, 11200},        // the faster: 100 × 112
		{100, 10, 10, 100},          // as fast
		{100, 5, 0, 100},            // the other's rate unknown
		{300, 1000, 3, maxHalfJobs}, // capped
		{30000, 2, 1, 30000},        // never below n
		{100, 12.5, 10, 125},        // rounded
	} {
		if got := scaledJobs(c.n, c.rate, c.other); got != c.want {
			t.Errorf("scaledJobs(%d, %v, %v) = %d, want %d", c.n, c.rate, c.other, got, c.want)
		}
	}
}
