package longtest

import (
	"flag"
	"strconv"
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
	if !flag.Parsed() {
		flag.Parse()
	}
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	f := flag.Lookup("test.parallel")
	if given || f == nil {
		return
	}
	if cur, err := strconv.Atoi(f.Value.String()); err == nil && cur < n {
		_ = f.Value.Set(strconv.Itoa(n))
	}
}
