package bench

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/internal/longtest"
	"qshare/internal/serveproc"
	"qshare/sim"
)

// buildQshare builds the qshare binary once for the tests that start a
// real server.
func buildQshare(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and starts a real server; skipped with -short")
	}
	bin, err := serveproc.Build(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestHarnessAgainstRealServer runs each server benchmark at a tiny scale
// against a real `qshare serve` and checks that the figures are complete
// and consistent with each other, and that the server and its directory
// are gone afterwards. It asserts nothing about speed. It checks the
// measuring tool, not qshare's behaviour, and loads the machine for
// seconds on purpose, so it runs where the long scenarios do.
func TestHarnessAgainstRealServer(t *testing.T) {
	longtest.Only(t, "each server benchmark at a tiny scale against a real qshare serve; the README's command checks the harness's start, stop and a server's death against a stand-in server (TestStartServerAndClose and its neighbours)")
	t.Parallel() // a server (and API server) of its own; the two longest, side by side
	bin := buildQshare(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	t.Run("server", func(t *testing.T) {
		srv, err := StartServer(ctx, ServerOptions{Binary: bin, Executor: "simulated"})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(srv.DataDir)
		if err := srv.Close(); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("Close left %s behind", dir)
		}
	})

	t.Run("submit", func(t *testing.T) {
		r, err := RunSubmit(ctx, SubmitOptions{Server: ServerOptions{Binary: bin}, Clients: 4, Duration: time.Second, Warmup: 200 * time.Millisecond, LatencyJobs: 5})
		if err != nil {
			t.Fatal(err)
		}
		if r.Submits == 0 || r.Errors != 0 || r.SubmitsPerS <= 0 {
			t.Errorf("submits %d, errors %d, %v/s", r.Submits, r.Errors, r.SubmitsPerS)
		}
		if !(r.P50 <= r.P90 && r.P90 <= r.P99 && r.P99 <= r.Max) {
			t.Errorf("latency percentiles out of order: %+v", r.Latency)
		}
		if r.ScheduleP50Ms == nil || r.ScheduleP99Ms == nil || *r.ScheduleP50Ms < 0 || *r.ScheduleP99Ms < *r.ScheduleP50Ms {
			t.Errorf("schedule latency p50 %v, p99 %v", r.ScheduleP50Ms, r.ScheduleP99Ms)
		}
	})

	t.Run("e2e", func(t *testing.T) {
		r, err := RunE2E(ctx, E2EOptions{Server: ServerOptions{Binary: bin, Executor: "simulated"}, Jobs: 30, Clients: 3})
		if err != nil {
			t.Fatal(err)
		}
		if r.Jobs != 30 || r.WallS <= 0 || r.JobsPerS <= 0 || r.Ratio != 0 {
			t.Errorf("result %+v", r)
		}
		// wall_s is rounded to the millisecond, which matters on a run of a
		// few tens of milliseconds: jobs_per_s must lie between jobs over
		// the largest and the smallest wall that rounds to wall_s.
		lo, hi := float64(r.Jobs)/(r.WallS+0.0005), float64(r.Jobs)/max(r.WallS-0.0005, 1e-9)
		if r.JobsPerS < lo*0.999 || r.JobsPerS > hi*1.001 {
			t.Errorf("jobs_per_s %v is not jobs over wall_s %v (%v to %v)", r.JobsPerS, r.WallS, lo, hi)
		}
	})

	t.Run("e2e-job-seconds", func(t *testing.T) {
		// Four jobs that hold one of two instances for half a second each
		// take two waves: at least a second, where jobs that exit at once
		// take milliseconds.
		r, err := RunE2E(ctx, E2EOptions{Server: ServerOptions{Binary: bin, Executor: "simulated"}, Jobs: 4, Clients: 2, Capacity: 2, JobSeconds: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		if r.JobSeconds != 0.5 || r.WallS < 1 {
			t.Errorf("4 jobs of 0.5 s on 2 instances: job_seconds %v, wall %v s, want at least 1 s", r.JobSeconds, r.WallS)
		}
		for _, o := range []E2EOptions{{JobSeconds: -1}, {JobSeconds: 3601}, {JobSeconds: 1, VsSlurm: true}, {JobSeconds: 1, With: "container"}} {
			o.Server, o.Jobs, o.Clients = ServerOptions{Binary: bin, Executor: "simulated"}, 1, 1
			if _, err := RunE2E(ctx, o); err == nil || !strings.Contains(err.Error(), "--job-seconds") {
				t.Errorf("%+v: %v, want a refusal that names --job-seconds", o, err)
			}
		}
	})

	t.Run("e2e-with", func(t *testing.T) {
		// Each executor alone, then both behind one server (--executors):
		// every job of the combined run succeeds, on both environments.
		r, err := RunE2E(ctx, E2EOptions{Server: ServerOptions{Binary: bin, Executor: "process"}, With: "simulated", Jobs: 20, Clients: 3})
		if err != nil {
			t.Fatal(err)
		}
		if r.With != "simulated" || r.JobsPerS <= 0 || r.WithJobsPerS <= 0 || r.CombinedJobsPerS <= 0 || r.CombinedVsSum <= 0 || r.CombinedVsSlowest <= 0 ||
			r.HalfJobsPerS <= 0 || r.WithHalfJobsPerS <= 0 || r.CPUPerJobMs <= 0 || r.BothCPUPerJobMs <= 0 || r.HalvesOverlap <= 0 || r.HalvesOverlap > 1 ||
			r.Jobs < 20 || r.WithJobs < 20 || (r.Jobs != 20 && r.WithJobs != 20) {
			t.Errorf("result %+v", r)
		}
		if _, err := RunE2E(ctx, E2EOptions{Server: ServerOptions{Binary: bin, Executor: "simulated"}, With: "kubernetes", Jobs: 1, Clients: 1}); err == nil {
			t.Error("--with kubernetes was not refused")
		}
	})

	t.Run("kueue", func(t *testing.T) {
		w := (sim.KueueShape{Name: "tiny-kueue", Cohorts: 1, QueuesPerCohort: 2, NominalQuota: 4, BorrowingPercent: 500,
			Classes: []sim.KueueClass{
				{Name: "small", Count: 6, Size: 1, Runtime: 100 * time.Millisecond, Priority: 50, Every: 50 * time.Millisecond},
				{Name: "large", Count: 2, Size: 4, Runtime: 200 * time.Millisecond, Priority: 200, Every: 150 * time.Millisecond},
			}}).Workload()
		r, err := RunKueue(ctx, KueueOptions{Server: ServerOptions{Binary: bin}, Workload: w, Submitters: 4})
		if err != nil {
			t.Fatal(err)
		}
		if r.Jobs != 16 || r.Shares != 2 {
			t.Errorf("jobs %d, shares %d; want 16, 2", r.Jobs, r.Shares)
		}
		if r.IdealS <= 0 || r.WallS <= 0 {
			t.Errorf("wall %v s, ideal %v s", r.WallS, r.IdealS)
		}
		// Every share carries 6×0.1 + 2×4×0.2 = 2.2 instance-seconds, so
		// its usage over any wall of a few seconds is positive and at most
		// what a share could hold (its own plus 500% borrowed).
		if r.MinShareUsage <= 0 || r.MinShareUsage > r.Usage || r.Usage > 600 {
			t.Errorf("usage %v%%, min share %v%%", r.Usage, r.MinShareUsage)
		}
		if r.SubmitSpanS <= 0 || r.SubmitSpanS > r.WallS || r.SubmitsPerS <= 0 {
			t.Errorf("submit span %v s (wall %v s), %v submits/s", r.SubmitSpanS, r.WallS, r.SubmitsPerS)
		}
		// The server is a child process, so its CPU is known; the run's
		// interval holds the submits' interval.
		if r.CPU.ServerSubmitS == nil || r.CPU.ServerRunS == nil || r.CPU.ServerUsPerJob == nil {
			t.Fatalf("server CPU missing for a child server: %+v", r.CPU)
		}
		if r.CPU.HarnessSubmitS == nil || r.CPU.HarnessUsPerSubmit == nil {
			t.Fatalf("harness CPU missing: %+v", r.CPU)
		}
		if *r.CPU.ServerRunS < *r.CPU.ServerSubmitS || *r.CPU.HarnessSubmitS < 0 {
			t.Errorf("CPU %+v: server run %v s < server submit %v s", r.CPU, *r.CPU.ServerRunS, *r.CPU.ServerSubmitS)
		}
		for _, c := range []string{"small", "large"} {
			if a, ok := r.MeanAdmissionS[c]; !ok || a < 0 {
				t.Errorf("mean admission of %s = %v, %v", c, a, ok)
			}
		}
	})
}

// TestEndpointNobodyListens runs a benchmark against an --endpoint where
// nothing listens: the error says so and what to do, not only the
// connection's failure.
func TestEndpointNobodyListens(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	endpoint := "http://" + l.Addr().String()
	l.Close() // the port is now free: nothing listens there
	_, err = RunSubmit(context.Background(), SubmitOptions{Endpoint: endpoint, Clients: 1, Duration: time.Second})
	if err == nil {
		t.Fatal("a benchmark against a closed port succeeded")
	}
	if !strings.Contains(err.Error(), "nothing listens at "+endpoint) || !strings.Contains(err.Error(), "leave out --endpoint") {
		t.Errorf("error %q does not say that nothing listens there and what to do", err)
	}
}
