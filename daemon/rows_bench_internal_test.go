package daemon

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"qshare"
	"qshare/executor/simulated"
	"qshare/sqlite"
)

// BenchmarkRowsPerJob counts the store's durable rows and transactions per
// job: 3,000 jobs of 20 ms from 32 submitters into one share of 64
// instances, with the simulated executor, each op a fresh daemon and
// database. A job is written at its submit, then SCHEDULED, STARTING,
// RUNNING and its end; the control loop's committer writes SCHEDULED and
// STARTING as one row when they fall into the same commit.
//
//	go test ./daemon -run '^$' -bench RowsPerJob -benchtime 3x
func BenchmarkRowsPerJob(b *testing.B) {
	var rows, batches, jobs int64
	for range b.N {
		r, t, n := rowsPerJobRun(b)
		rows, batches, jobs = rows+r, batches+t, jobs+n
	}
	b.ReportMetric(float64(rows)/float64(jobs), "rows/job")
	b.ReportMetric(float64(batches)/float64(jobs), "transactions/job")
}

func rowsPerJobRun(b *testing.B) (rows, batches, jobs int64) {
	b.Helper()
	b.StopTimer()
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "qshare.db"))
	if err != nil {
		b.Fatal(err)
	}
	ex := simulated.New(simulated.Options{})
	d, err := New(Config{Store: db, Executor: ex, Tick: 10 * time.Millisecond})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { d.Close(); ex.Close(); db.Close() }()
	must := func(err error) {
		if err != nil {
			b.Fatal(err)
		}
	}
	g5 := []qshare.CapacityLimit{{CapacityUnit: "ml.g5.xlarge", MaxCapacity: 64}}
	_, err = d.CreatePolicy(ctx, PolicyInput{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	must(err)
	_, err = d.CreateEnvironment(ctx, EnvironmentInput{Name: "e", Type: "SAGEMAKER_TRAINING", CapacityLimits: g5})
	must(err)
	_, err = d.CreateQueue(ctx, QueueInput{Name: "q", SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
		ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: "e"}}})
	must(err)
	s, err := d.CreateShare(ctx, ShareInput{Name: "A", Queue: "q", Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled, CapacityLimits: g5})
	must(err)
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if sh, _ := d.Share(s.ARN); sh.Status == qshare.StatusValid {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the share did not become VALID")
		}
	}
	const n, workers = 3000, 32
	before := db.Stats()
	b.StartTimer()
	var wg sync.WaitGroup
	ids := make(chan string, n)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				j, err := d.Submit(ctx, SubmitInput{Name: fmt.Sprintf("j%d", i), Queue: "q", QuotaShare: "A", ServiceJobType: serviceTypeSageMaker,
					Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"20ms"}}`})
				if err != nil {
					b.Error(err)
					return
				}
				ids <- j.ID
			}
		}()
	}
	wg.Wait()
	close(ids)
	for id := range ids {
		for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
			if j, _ := d.Job(id); j.Status.Terminal() {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("job %s did not finish", id)
			}
		}
	}
	b.StopTimer()
	after := db.Stats()
	return after.Rows - before.Rows, after.Batches - before.Batches, n
}
