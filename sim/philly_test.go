package sim

import (
	"bytes"
	"context"
	"io"
	"os"
	"testing"

	"qshare/config/configtest"
)

// phillyTrace is where the shared Philly trace lives, relative to this
// package; tests and benchmarks that need it skip when it is not there.
const phillyTrace = "../../shared/data/philly/philly_vc_labeled.csv"

func readPhilly(tb testing.TB, limit int) []Job {
	tb.Helper()
	data, err := os.ReadFile(phillyTrace)
	if err != nil {
		tb.Skipf("the Philly trace is not here: %v", err)
	}
	cfg := configtest.Load(tb, "../examples/philly/philly.yaml")
	jobs, _, err := ReadPhilly(bytes.NewReader(data), cfg, PhillyOptions{TraceOptions: TraceOptions{Name: "philly"}})
	if err != nil {
		tb.Fatal(err)
	}
	if limit > 0 && limit < len(jobs) {
		jobs = jobs[:limit]
	}
	return jobs
}

// TestPhillyPrefixClean replays the first 5,000 jobs of the Philly trace and
// checks its event log: the engine must keep every guarantee on a real
// multi-tenant workload. (The whole trace is replayed by
// BenchmarkPhilly and by the command in docs/simulator.md.)
func TestPhillyPrefixClean(t *testing.T) {
	jobs := readPhilly(t, 5000)
	cfg := configtest.Load(t, "../examples/philly/philly.yaml")
	var events bytes.Buffer
	rep, err := Run(context.Background(), cfg, jobs, Options{Events: &events, verify: true})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Jobs.Completed != len(jobs) {
		t.Errorf("%d of %d jobs completed", rep.Jobs.Completed, len(jobs))
	}
	sum := checkEvents(t, cfg, &events)
	if sum.Starts < len(jobs) {
		t.Errorf("summary %+v", sum)
	}
}

// BenchmarkPhilly replays the whole Philly trace (111,549 jobs) with the
// event log written to io.Discard. Run it with
//
//	go test ./sim -run '^$' -bench Philly -benchtime 1x -benchmem
func BenchmarkPhilly(b *testing.B) {
	jobs := readPhilly(b, 0)
	cfg := configtest.Load(b, "../examples/philly/philly.yaml")
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		in := append([]Job(nil), jobs...)
		rep, err := Run(context.Background(), cfg, in, Options{Events: io.Discard})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportMetric(float64(rep.Engine.Decisions), "decisions")
	}
}
