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
	d, stop := startDaemon(b, db, simulated.New(simulated.Options{}))
	defer stop()
	ctx := context.Background()
	s := createReserved(b, d, 64, 64)
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
		wg.Go(func() {
			for i := w; i < n; i += workers {
				j, err := d.Submit(ctx, SubmitInput{Name: fmt.Sprintf("j%d", i), Queue: "q", QuotaShare: "A", ServiceJobType: serviceTypeSageMaker,
					Payload: `{"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"20ms"}}`})
				if err != nil {
					b.Error(err)
					return
				}
				ids <- j.ID
			}
		})
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
