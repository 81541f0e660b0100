package sagemaker_test

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"

	"qshare"
	"qshare/aws/sagemaker"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/internal/batchclient"
	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
	"qshare/trainingjob"
)

// BenchmarkDescribeTrainingJob100k times DescribeTrainingJob through the AWS
// SDK for Go's client and the endpoint's HTTP handler, on a daemon that
// loaded 100,000 finished jobs of one attempt each from a SQLite store, and
// reports the p50 and p99 of one call:
//
//	go test ./aws/sagemaker -run '^$' -bench DescribeTrainingJob100k -benchtime 2000x
func BenchmarkDescribeTrainingJob100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(b.TempDir(), "qshare.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	now := time.Now()
	names := make([]string, 0, n)
	c := &store.Change{}
	for range n {
		j := storetest.SubmitJob(now)
		name := trainingjob.AttemptName("train-resnet", j.ID, 1)
		names = append(names, name)
		j.Status, j.StartedAt, j.StoppedAt, j.ScheduledAt = qshare.JobSucceeded, now, now.Add(time.Minute), now
		j.Attempts = []qshare.Attempt{{N: 1, ID: j.ID + "-1", ResourceARN: trainingjob.AttemptARN("us-east-1", "000000000000", name),
			ScheduledAt: now, StartedAt: now, StoppedAt: now.Add(time.Minute), ExitCode: new(int)}}
		c.PutJobs = append(c.PutJobs, j)
	}
	if err := db.Commit(ctx, c); err != nil {
		b.Fatal(err)
	}
	ex := simulated.New(simulated.Options{})
	defer ex.Close()
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(sagemaker.New(d, ex.Logs, nil))
	defer srv.Close()
	cl := sm.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: batchclient.Placeholder, HTTPClient: batchclient.BufferedDoer{Client: &http.Client{}}},
		func(o *sm.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := names[rand.IntN(n)]
		t0 := time.Now()
		out, err := cl.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		lat = append(lat, time.Since(t0))
		if err != nil || aws.ToString(out.TrainingJobName) != name {
			b.Fatalf("describe %s: %v", name, err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
}
