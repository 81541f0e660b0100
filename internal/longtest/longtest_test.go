package longtest

import (
	"flag"
	"testing"
)

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

func TestMinParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	old := f.Value.String()
	defer f.Value.Set(old)
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if given {
		t.Skip("-parallel is on the command line, which MinParallel leaves as it is")
	}
	f.Value.Set("2")
	MinParallel(6)
	if got := f.Value.String(); got != "6" {
		t.Errorf("MinParallel(6) over 2: -parallel %s, want 6", got)
	}
	MinParallel(3)
	if got := f.Value.String(); got != "6" {
		t.Errorf("MinParallel(3) over 6: -parallel %s, want 6 (it only raises)", got)
	}
}

// rapidChecks stands for the flag that rapid registers in a test binary
// that imports it (this one does not).
var rapidChecks = flag.Int("rapid.checks", 100, "rapid's number of cases, as rapid registers it")

func TestRapidChecks(t *testing.T) {
	defer func() { *rapidChecks = 100 }()
	t.Setenv(Env, "")
	RapidChecks(20)
	if *rapidChecks != 20 {
		t.Errorf("RapidChecks(20) without %s: -rapid.checks %d, want 20", Env, *rapidChecks)
	}
	*rapidChecks = 100
	t.Setenv(Env, "1")
	RapidChecks(20)
	if *rapidChecks != 100 {
		t.Errorf("RapidChecks(20) with %s=1: -rapid.checks %d, want rapid's 100", Env, *rapidChecks)
	}
}

func TestRapidChecksIn(t *testing.T) {
	defer func() { *rapidChecks = 100 }()
	t.Setenv(Env, "")
	t.Run("short", func(t *testing.T) {
		RapidChecksIn(t, 20)
		if *rapidChecks != 20 {
			t.Errorf("RapidChecksIn(t, 20) without %s: -rapid.checks %d, want 20", Env, *rapidChecks)
		}
	})
	if *rapidChecks != 100 {
		t.Errorf("after the test that called RapidChecksIn(t, 20): -rapid.checks %d, want rapid's 100 back", *rapidChecks)
	}
	t.Setenv(Env, "1")
	RapidChecksIn(t, 20)
	if *rapidChecks != 100 {
		t.Errorf("RapidChecksIn(t, 20) with %s=1: -rapid.checks %d, want rapid's 100", Env, *rapidChecks)
	}
}

func TestOnly(t *testing.T) {
	for _, env := range []string{"", "1"} {
		t.Setenv(Env, env)
		ran := false
		t.Run("env="+env, func(t *testing.T) {
			Only(t, "why")
			ran = true
		})
		if ran != (env == "1") {
			t.Errorf("%s=%q: the test ran: %v", Env, env, ran)
		}
	}
}
