package postgres

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/uuid"

	"qshare"
	"qshare/store"
)

// submitJob is a job as a SubmitServiceJob writes it (the same as
// sqlite/'s benchmarks): a random UUID, a realistic SageMaker payload, no
// attempts yet.
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
		Version:       1,
	}
}

func benchDB(b *testing.B) *DB {
	b.Helper()
	if srv == nil {
		b.Skip(skipWhy)
	}
	loc, err := srv.NewDatabase(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	d, err := Open(context.Background(), loc)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { d.Close() })
	return d
}

// BenchmarkCommitParallel: 64 callers, each committing one submitted job
// per operation, durably, through group commit.
func BenchmarkCommitParallel(b *testing.B) {
	d := benchDB(b)
	ctx := context.Background()
	b.SetParallelism(max(1, 64/runtime.GOMAXPROCS(0))) // 64 callers
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := d.Commit(ctx, &store.Change{PutJobs: []qshare.Job{submitJob(time.Now())}}); err != nil {
				b.Error(err)
				return
			}
		}
	})
	b.StopTimer()
	st := d.Stats()
	b.ReportMetric(float64(st.Commits)/b.Elapsed().Seconds(), "commits/s")
	if st.Batches > 0 {
		b.ReportMetric(float64(st.Commits)/float64(st.Batches), "commits/txn")
	}
}

// BenchmarkLoad measures the start-up read of a store of n jobs.
func BenchmarkLoad(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint("jobs=", n), func(b *testing.B) {
			d := benchDB(b)
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
