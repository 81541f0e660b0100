package metrics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"qshare"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/metrics"
	"qshare/sqlite"
	"qshare/store"
)

const g5 = "ml.g5.xlarge"

// fleet is a daemon over a store that a test or benchmark filled.
type fleet struct {
	d  *daemon.Daemon
	m  *metrics.Metrics
	db *sqlite.DB
	// jobs is what the store held at the restart: counts per queue, share
	// and status, as MetricsState.Jobs should say.
	jobs []daemon.JobCount
}

func simPayload() string {
	return `{"TrainingJobName":"train","AlgorithmSpecification":{"TrainingImage":"img","TrainingInputMode":"File"},` +
		`"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":1},` +
		`"StoppingCondition":{"MaxRuntimeInSeconds":86400},"Environment":{"QSHARE_SIM_DURATION":"1h"}}`
}

// newFleet creates, through a first daemon, queues job queues of
// sharesPer quota shares each (every queue with its own environment of
// 2*sharesPer ml.g5.xlarge, each share owning 2 and lending and borrowing),
// then writes jobs job records straight into the store, the first
// unfinished of them RUNNABLE and the rest SUCCEEDED, spread over the
// shares, and starts a second daemon on it that recovers them and starts
// what fits (the simulated executor runs each for an hour).
func newFleet(tb testing.TB, queues, sharesPer, jobs, unfinished int) *fleet {
	tb.Helper()
	ctx := context.Background()
	path := filepath.Join(tb.TempDir(), "qshare.db")
	db, err := sqlite.Open(path)
	if err != nil {
		tb.Fatal(err)
	}
	ex := simulated.New(simulated.Options{})
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Tick: 10 * time.Millisecond})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	must := func(err error) {
		if err != nil {
			tb.Helper()
			tb.Fatal(err)
		}
	}
	_, err = d.CreatePolicy(ctx, daemon.PolicyInput{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	must(err)
	var last []string
	for q := range queues {
		env, queue := fmt.Sprintf("env-%03d", q), fmt.Sprintf("q-%03d", q)
		_, err = d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: env, Type: "SAGEMAKER_TRAINING",
			CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: g5, MaxCapacity: int64(2 * sharesPer)}}})
		must(err)
		_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: queue, SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
			ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: env}}})
		must(err)
		for s := range sharesPer {
			sh, err := d.CreateShare(ctx, daemon.ShareInput{Name: fmt.Sprintf("s-%02d", s), Queue: queue, Strategy: qshare.StrategyLendAndBorrow,
				InSharePreemption: qshare.Disabled, CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: g5, MaxCapacity: 2}}})
			must(err)
			last = append(last, sh.ARN)
		}
	}
	for _, arn := range last {
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if sh, _ := d.Share(arn); sh.Status == qshare.StatusValid {
				break
			}
			if time.Now().After(deadline) {
				tb.Fatalf("share %s did not become VALID", arn)
			}
		}
	}
	must(d.Close())

	t0 := time.Now().Add(-2 * time.Hour)
	counts := map[[3]string]int{}
	var put []qshare.Job
	for i := range jobs {
		q, s := i%queues, (i/queues)%sharesPer
		j := qshare.Job{ID: fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i), Name: fmt.Sprintf("j%d", i),
			JobQueue: fmt.Sprintf("q-%03d", q), QuotaShare: fmt.Sprintf("s-%02d", s), ServiceJobType: "SAGEMAKER_TRAINING",
			Priority: 1, Status: qshare.JobRunnable, Payload: simPayload(), Demand: qshare.Capacity{g5: 1},
			CreatedAt: t0.Add(time.Duration(i) * time.Millisecond), Version: 1}
		j.ARN = d.JobARN(j.ID)
		j.RunnableSince = j.CreatedAt
		if i >= unfinished {
			j.Status = qshare.JobSucceeded
			j.ScheduledAt, j.StartedAt, j.StoppedAt = j.CreatedAt, j.CreatedAt, j.CreatedAt.Add(time.Minute)
			j.StatusReason = "Essential container in task exited"
		}
		counts[[3]string{j.JobQueue, j.QuotaShare, string(j.Status)}]++
		put = append(put, j)
		if len(put) == 10000 {
			must(db.Commit(ctx, &store.Change{PutJobs: put}))
			put = nil
		}
	}
	if len(put) > 0 {
		must(db.Commit(ctx, &store.Change{PutJobs: put}))
	}
	f := &fleet{db: db, m: metrics.New()}
	for k, n := range counts {
		f.jobs = append(f.jobs, daemon.JobCount{Queue: k[0], Share: k[1], Status: qshare.JobStatus(k[2]), N: n})
	}
	sortCounts(f.jobs)
	f.d, err = daemon.New(daemon.Config{Store: db, Executor: ex, Observer: f.m})
	must(err)
	must(f.d.Start(ctx))
	f.m.Watch(f.d)
	tb.Cleanup(func() { f.d.Close(); ex.Close(); db.Close() })
	return f
}

func sortCounts(c []daemon.JobCount) {
	sort.Slice(c, func(i, j int) bool {
		a, b := c[i], c[j]
		if a.Queue != b.Queue {
			return a.Queue < b.Queue
		}
		if a.Share != b.Share {
			return a.Share < b.Share
		}
		return a.Status < b.Status
	})
}

// settle waits until the daemon has started every job that fits: the
// environment's capacity is in use in every queue.
func (f *fleet) settle(tb testing.TB, running int) {
	tb.Helper()
	for deadline := time.Now().Add(120 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n := 0
		for _, c := range f.d.MetricsState().Jobs {
			if c.Status == qshare.JobRunning {
				n += c.N
			}
		}
		if n == running {
			return
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%d jobs RUNNING, want %d", n, running)
		}
	}
}

// TestJobCountsFollowJobs checks that the per-share counts a scrape reads
// (kept incrementally as jobs change) equal the jobs: after a restart that
// recovers them, and after the daemon has started what fits.
func TestJobCountsFollowJobs(t *testing.T) {
	const queues, shares = 3, 4
	f := newFleet(t, queues, shares, 600, 200)
	f.settle(t, queues*shares*2)
	got := f.d.MetricsState().Jobs
	// Walk every job, through the API's own listing, and count.
	want := map[[3]string]int{}
	for q := range queues {
		for _, st := range qshare.JobStatuses {
			next := ""
			for {
				js, tok, err := f.d.ListJobs(daemon.ListJobsInput{Queue: fmt.Sprintf("q-%03d", q), Status: st, NextToken: next, MaxResults: 100})
				if err != nil {
					t.Fatal(err)
				}
				for _, j := range js {
					want[[3]string{j.JobQueue, j.QuotaShare, string(j.Status)}]++
				}
				if tok == "" {
					break
				}
				next = tok
			}
		}
	}
	var w []daemon.JobCount
	for k, n := range want {
		w = append(w, daemon.JobCount{Queue: k[0], Share: k[1], Status: qshare.JobStatus(k[2]), N: n})
	}
	sortCounts(w)
	if fmt.Sprint(got) != fmt.Sprint(w) {
		t.Fatalf("MetricsState().Jobs =\n%v\na walk over the jobs says\n%v", got, w)
	}
	// Every job the store held is counted once: the totals agree.
	total := func(cs []daemon.JobCount) (n int) {
		for _, c := range cs {
			n += c.N
		}
		return n
	}
	if total(got) != total(f.jobs) {
		t.Fatalf("MetricsState counts %d jobs, the store held %d", total(got), total(f.jobs))
	}
}

// BenchmarkScrape measures one GET /metrics of a server with 100,000 jobs
// (10,000 unfinished: 2,000 RUNNING, 8,000 RUNNABLE) in 1,000 quota shares
// (50 queues of 20): the time per scrape, the whole process's CPU time per
// scrape (getrusage, so the daemon's idle loop and the GC are in it), and
// the bytes of the answer, plain and gzipped as Prometheus asks for it.
//
//	go test ./metrics -run '^$' -bench Scrape -benchtime 20x
func BenchmarkScrape(b *testing.B) {
	const queues, shares = 50, 20
	f := newFleet(b, queues, shares, 100000, 10000)
	f.settle(b, queues*shares*2)
	h := f.m.Handler()
	for _, enc := range []string{"plain", "gzip"} {
		b.Run(enc, func(b *testing.B) {
			var bytes int
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			b.ResetTimer()
			for range b.N {
				rec := httptest.NewRecorder()
				req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
				if enc == "gzip" {
					req.Header.Set("Accept-Encoding", "gzip")
				}
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK {
					b.Fatalf("GET /metrics = %d", rec.Code)
				}
				bytes = rec.Body.Len()
			}
			b.StopTimer()
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/scrape")
			b.ReportMetric(float64(bytes), "bytes/scrape")
		})
	}
}

// BenchmarkObservePerSubmit measures what metrics add to one submit on the
// server's side: the API request's histogram and the submit's store-commit
// histogram, each with the clock reads around it. Compare it with a
// submit's own cost (qshare bench submit) for the overhead of --metrics on
// that a loaded machine's noise hides.
//
//	go test ./metrics -run '^$' -bench ObservePerSubmit
func BenchmarkObservePerSubmit(b *testing.B) {
	m := metrics.New()
	obs := m.API()
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			t0 := time.Now()
			m.StoreCommit(time.Since(t0), nil)
			t1 := time.Now()
			obs("submitservicejob", "success", time.Since(t1))
		}
	})
}
