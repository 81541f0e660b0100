package storetest

import (
	"context"
	"fmt"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"qshare"
	"qshare/store"
	"qshare/store/groupcommit"
)

// The benchmarks every store runs from its own bench_test.go, so that their
// figures measure the same work: each operation of the Commit benchmarks is
// one durable Commit of one PutJobs of one job as SubmitServiceJob writes
// it.

// SubmitJob is a job as a SubmitServiceJob writes it: a random UUID, a
// realistic SageMaker payload, no attempts yet, created and runnable at now.
func SubmitJob(now time.Time) qshare.Job {
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

// BenchCommitParallel commits one SubmitJob per operation to s from 64
// goroutines and reports commits per second, the mean group-commit batch
// (from stats, the store's counters) and the p50/p99 latency of Commit.
func BenchCommitParallel(b *testing.B, s store.Store, stats func() groupcommit.Stats) {
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
			if err := s.Commit(ctx, &store.Change{PutJobs: []qshare.Job{SubmitJob(start)}}); err != nil {
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
	ReportCommits(b, stats(), lat)
}

// ReportCommits reports a Commit benchmark's figures: commits per second
// (b.N over the elapsed time), commits per transaction from s, and the
// p50/p99 of lat when it holds any latencies.
func ReportCommits(b *testing.B, s groupcommit.Stats, lat []time.Duration) {
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

// BenchLoad measures the start-up read of a store that holds n jobs, for n
// of 10,000 and 100,000, as sub-benchmarks jobs=N; open returns new, empty
// storage for one of them, which the caller closes (b.Cleanup).
func BenchLoad(b *testing.B, open func(b *testing.B) store.Store) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint("jobs=", n), func(b *testing.B) {
			d := open(b)
			ctx := context.Background()
			now := time.Now()
			for i := 0; i < n; i += 5000 {
				c := &store.Change{}
				for j := i; j < min(n, i+5000); j++ {
					c.PutJobs = append(c.PutJobs, SubmitJob(now.Add(time.Duration(j))))
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
