package longtest

import "testing"

func TestPick(t *testing.T) {
	for _, c := range []struct {
		env  string
		want int
	}{{"", 1}, {"0", 1}, {"1", 10}, {"yes", 10}} {
		t.Setenv(Env, c.env)
		if got := Pick(1, 10); got != c.want || On() != (c.want == 10) {
			t.Errorf("%s=%q: Pick(1, 10) = %d, On() = %v; want %d", Env, c.env, got, On(), c.want)
		}
	}
}
