package sagemaker_test

import (
	"context"
	"errors"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sm "github.com/aws/aws-sdk-go-v2/service/sagemaker"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/google/uuid"

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

// storedServer is a SageMaker client of a server whose daemon loaded, from
// a SQLite store, n finished jobs of one attempt each, named by name(job
// ID); it returns the names.
func storedServer(tb testing.TB, n int, name func(id string) string) (*sm.Client, []string) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(tb.TempDir(), "qshare.db"))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	now := time.Now()
	names := make([]string, 0, n)
	c := &store.Change{}
	for range n {
		j := storetest.SubmitJob(now)
		name := name(j.ID)
		names = append(names, name)
		j.Status, j.StartedAt, j.StoppedAt, j.ScheduledAt = qshare.JobSucceeded, now, now.Add(time.Minute), now
		j.Attempts = []qshare.Attempt{{N: 1, ID: j.ID + "-1", ResourceARN: trainingjob.AttemptARN("us-east-1", "000000000000", name),
			ScheduledAt: now, StartedAt: now, StoppedAt: now.Add(time.Minute), ExitCode: new(int)}}
		c.PutJobs = append(c.PutJobs, j)
	}
	if err := db.Commit(ctx, c); err != nil {
		tb.Fatal(err)
	}
	ex := simulated.New(simulated.Options{})
	tb.Cleanup(func() { ex.Close() })
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		tb.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { d.Close() })
	srv := httptest.NewServer(sagemaker.New(d, ex.Logs, nil))
	tb.Cleanup(srv.Close)
	return sm.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: batchclient.Placeholder, HTTPClient: batchclient.BufferedDoer{Client: &http.Client{}}},
		func(o *sm.Options) { o.BaseEndpoint = aws.String(srv.URL) }), names
}

// TestLegacyNames: a training job named as qshare named attempts before
// trainingjob.AttemptName ("awsbatch" + name + 32 random hex digits), as a
// store written then still holds, is found by its name.
func TestLegacyNames(t *testing.T) {
	cl, names := storedServer(t, 3, func(string) string { return unknownLegacy() })
	for _, name := range names {
		out, err := cl.DescribeTrainingJob(context.Background(), &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		if err != nil || out.TrainingJobStatus != types.TrainingJobStatusCompleted {
			t.Fatalf("describe of the stored %s: %v", name, err)
		}
	}
	// SageMaker compares names without case; a name of the older form that
	// no attempt has is ResourceNotFound, found so through the index.
	if _, err := cl.DescribeTrainingJob(context.Background(), &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(strings.ToUpper(names[0]))}); err != nil {
		t.Errorf("describe of %s in upper case: %v", names[0], err)
	}
	var nf *types.ResourceNotFound
	if _, err := cl.DescribeTrainingJob(context.Background(), &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(unknownLegacy())}); !errors.As(err, &nf) {
		t.Errorf("describe of an unknown name of the older form = %v, want ResourceNotFound", err)
	}
}

// unknownLegacy is a training job name of the older form that no attempt has.
func unknownLegacy() string {
	return "awsbatchtrain-resnet" + strings.ReplaceAll(uuid.NewString(), "-", "")
}

// BenchmarkDescribeTrainingJob100k times DescribeTrainingJob through the AWS
// SDK for Go's client and the endpoint's HTTP handler, on a daemon that
// loaded 100,000 finished jobs of one attempt each from a SQLite store, and
// reports the p50 and p99 of one call; and, beside each, one call with a
// name of the older form (trainingjob.LegacyAttemptName) that no attempt
// has, which is ResourceNotFound (unknown-p50-µs, unknown-p99-µs):
//
//	go test ./aws/sagemaker -run '^$' -bench DescribeTrainingJob100k -benchtime 2000x
func BenchmarkDescribeTrainingJob100k(b *testing.B) {
	const n = 100_000
	ctx := context.Background()
	cl, names := storedServer(b, n, func(id string) string { return trainingjob.AttemptName("train-resnet", id, 1) })
	lat := make([]time.Duration, 0, b.N)
	unknown := make([]time.Duration, 0, b.N)
	var nf *types.ResourceNotFound
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		name := names[rand.IntN(n)]
		t0 := time.Now()
		out, err := cl.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		lat = append(lat, time.Since(t0))
		if err != nil || aws.ToString(out.TrainingJobName) != name {
			b.Fatalf("describe %s: %v", name, err)
		}
		name = unknownLegacy()
		t0 = time.Now()
		_, err = cl.DescribeTrainingJob(ctx, &sm.DescribeTrainingJobInput{TrainingJobName: aws.String(name)})
		unknown = append(unknown, time.Since(t0))
		if !errors.As(err, &nf) {
			b.Fatalf("describe of the unknown %s = %v, want ResourceNotFound", name, err)
		}
	}
	b.StopTimer()
	for _, l := range []struct {
		lat    []time.Duration
		prefix string
	}{{lat, ""}, {unknown, "unknown-"}} {
		slices.Sort(l.lat)
		b.ReportMetric(float64(l.lat[len(l.lat)/2].Microseconds()), l.prefix+"p50-µs")
		b.ReportMetric(float64(l.lat[len(l.lat)*99/100].Microseconds()), l.prefix+"p99-µs")
	}
}

// BenchmarkListTrainingJobs100k times the first page of ListTrainingJobs
// (newest first, ten entries) over 100,000 stored attempts: each call looks
// at every attempt, so it grows with the store.
//
//	go test ./aws/sagemaker -run '^$' -bench ListTrainingJobs100k -benchtime 20x
func BenchmarkListTrainingJobs100k(b *testing.B) {
	cl, _ := storedServer(b, 100_000, func(id string) string { return trainingjob.AttemptName("train-resnet", id, 1) })
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		out, err := cl.ListTrainingJobs(context.Background(), &sm.ListTrainingJobsInput{})
		if err != nil || len(out.TrainingJobSummaries) != 10 {
			b.Fatal(err)
		}
	}
}
