package longtest

import (
	"flag"
	"os"
	"strconv"
	"testing"
)

// MinParallel raises go test's -parallel, the number of t.Parallel tests
// of a package that run at once, to at least n, unless the command line
// sets it. Its default is GOMAXPROCS, 2 on the two-core machines the
// README's figure is measured on, which suits tests that compute; the
// end-to-end packages' tests mostly wait (on a server's child processes,
// on Slurm's scheduler, on timeouts), so more of them at once shorten
// the run without contending for the cores. Call it from TestMain before
// m.Run.
func MinParallel(n int) {
	f := notGiven("test.parallel")
	if f == nil {
		return
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur < n {
		_ = f.Value.Set(strconv.Itoa(n))
	}
}

// RapidChecks sets rapid's -rapid.checks, how many random cases each
// rapid.Check of the test binary tries (100 by default), to n, unless the
// long scenarios run (On) or the command line sets it: for a package
// whose every case is costly (a store on a PostgreSQL server), a short
// instance of the same properties. Call it from TestMain before m.Run.
func RapidChecks(n int) {
	if On() {
		return
	}
	if f := notGiven("rapid.checks"); f != nil {
		_ = f.Value.Set(strconv.Itoa(n))
	}
}

// RapidChecksIn is RapidChecks for one test: it sets -rapid.checks to n
// until t ends (t.Cleanup puts the value back), for a property whose
// every case is costly in a package whose other properties are cheap.
// The test must not run beside another rapid test of its binary
// (t.Parallel), which would see n too.
func RapidChecksIn(t interface{ Cleanup(func()) }, n int) {
	if On() {
		return
	}
	if f := notGiven("rapid.checks"); f != nil {
		old := f.Value.String()
		_ = f.Value.Set(strconv.Itoa(n))
		t.Cleanup(func() { _ = f.Value.Set(old) })
	}
}

// notGiven returns the test binary's flag name, parsing the command line
// first if need be, or nil when the command line gives it or there is no
// such flag.
func notGiven(name string) *flag.Flag {
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	if given {
		return nil
	}
	return flag.Lookup(name)
}

// Main is a TestMain for a package whose tests need nothing before they
// run but more of them at once: MinParallel(n), then the tests, then exit
// with their status.
func Main(m *testing.M, n int) {
	MinParallel(n)
	os.Exit(m.Run())
}
