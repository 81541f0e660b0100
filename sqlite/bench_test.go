package sqlite_test

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"qshare"
	"qshare/sqlite"
	"qshare/store"
)

// submitJob is a job as a SubmitServiceJob writes it: a random UUID, a
// realistic SageMaker payload, no attempts yet.
func submitJob(now time.Time) qshare.Job {
	id := uuid.NewString()
	return qshare.Job{
		ID:             id,
		ARN:            "arn:aws:batch:us-east-1:000000000000:service-job/" + id,
		Name:           "train-resnet",
		JobQueue:       "ml-queue",
		QuotaShare:     "research",
		ServiceJobType: "SAGEMAKER_TRAINING",
		Priority:       10,
		Status:         qshare.JobSubmitted,
		Payload: `{"TrainingJobName":"train-resnet","RoleArn":"arn:aws:iam::000000000000:role/SageMaker",` +
			`"AlgorithmSpecification":{"TrainingImage":"000000000000.dkr.ecr.us-east-1.amazonaws.com/resnet:latest","TrainingInputMode":"File"},` +
			`"ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":50},` +
			`"OutputDataConfig":{"S3OutputPath":"s3://bucket/output"},"StoppingCondition":{"MaxRuntimeInSeconds":86400}}`,
		Demand:        qshare.Capacity{"ml.g5.xlarge": 1},
		RetryStrategy: &qshare.RetryStrategy{Attempts: 3},
		Tags:          map[string]string{"team": "vision"},
		ClientToken:   uuid.NewString(),
		CreatedAt:     now,
		RunnableSince: now,
		Version:       1,
	}
}

func openBench(b *testing.B, opts ...sqlite.Option) *sqlite.DB {
	d, err := sqlite.Open(filepath.Join(b.TempDir(), "qshare.db"), opts...)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// benchParallel commits one submit per operation from 64 goroutines and
// reports commits per second, the mean group-commit batch and the p50/p99
// latency of Commit.
func benchParallel(b *testing.B, opts ...sqlite.Option) {
	d := openBench(b, opts...)
	ctx := context.Background()
	var mu sync.Mutex
	var lat []time.Duration
	// RunParallel starts parallelism*GOMAXPROCS goroutines: make it 64.
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0)))
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		var mine []time.Duration
		for pb.Next() {
			start := time.Now()
			if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{submitJob(start)}}); err != nil {
				b.Error(err)
				return
			}
			mine = append(mine, time.Since(start))
		}
		mu.Lock()
		lat = append(lat, mine...)
		mu.Unlock()
	})
	b.StopTimer()
	reportCommits(b, d, lat)
}

func reportCommits(b *testing.B, d *sqlite.DB, lat []time.Duration) {
	s := d.Stats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "commits/s")
	if s.Batches > 0 {
		b.ReportMetric(float64(s.Commits)/float64(s.Batches), "commits/txn")
	}
	if len(lat) > 0 {
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
	}
}

// BenchmarkCommitParallel is the submit path under load: 64 concurrent
// callers, each Commit one PutJobs of one job, durable (synchronous=FULL).
func BenchmarkCommitParallel(b *testing.B) { benchParallel(b) }

// BenchmarkCommitParallelNoGroup is the same load with group commit turned
// off (one transaction and one fsync per Commit), for the ratio.
func BenchmarkCommitParallelNoGroup(b *testing.B) { benchParallel(b, sqlite.WithMaxBatch(1)) }

// BenchmarkCommitSequential is one caller committing one submit at a time:
// every Commit pays its own fsync.
func BenchmarkCommitSequential(b *testing.B) {
	d := openBench(b)
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for range b.N {
		start := time.Now()
		if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{submitJob(start)}}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportCommits(b, d, lat)
}

// BenchmarkLoad measures the start-up read of a store that holds n jobs.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint("jobs=", n), func(b *testing.B) {
			d := openBench(b)
			ctx := context.Background()
			now := time.Now()
			for i := 0; i < n; i += 5000 {
				c := &store.Change{}
				for j := i; j < min(n, i+5000); j++ {
					c.PutJobs = append(c.PutJobs, submitJob(now.Add(time.Duration(j))))
				}
				if err := d.Commit(ctx, c); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for range b.N {
				st, err := d.Load(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if len(st.Jobs) != n {
					b.Fatalf("%d jobs", len(st.Jobs))
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
		})
	}
}
