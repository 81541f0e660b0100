// Package sdkenv is a real qshare server for the tests of the endpoints
// that the SageMaker SDK calls beside Batch (aws/sagemaker, aws/logs): a
// daemon on a SQLite store in a temporary directory, an executor, the Batch
// API and those endpoints on one loopback port, routed by X-Amz-Target as
// the server's router routes them, and a service environment of four
// ml.g5.xlarge with a job queue "q" to submit to.
package sdkenv

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	btypes "github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/api"
	"qshare/auth"
	"qshare/aws/logs"
	"qshare/aws/sagemaker"
	"qshare/daemon"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/internal/batchclient"
	"qshare/sqlite"
	"qshare/trainingjob"
)

// Env is a running server.
type Env struct {
	// URL is the server's endpoint; Batch a Batch client of it.
	URL   string
	Batch *batch.Client
	D     *daemon.Daemon
	// Principal, when set, is the caller of every request, as the
	// server's authentication would find it.
	Principal atomic.Pointer[auth.Principal]
}

// New starts a server on ex (nil: the simulated executor); t's cleanup
// stops it.
func New(t testing.TB, ex executor.Executor) *Env {
	t.Helper()
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	if ex == nil {
		ex = simulated.New(simulated.Options{})
	}
	log := slog.New(slog.DiscardHandler)
	d, err := daemon.New(daemon.Config{Store: db, Executor: ex, Logger: log, Tick: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	e := &Env{D: d}
	lc := logs.Config{Jobs: d, Logs: ex.Logs, Log: log}
	if il, ok := ex.(executor.InstanceLogger); ok {
		lc.InstanceLogs = il.InstanceLogs
	}
	routes := map[string]http.Handler{sagemaker.TargetPrefix: sagemaker.New(d, ex.Logs, log), logs.TargetPrefix: logs.New(lc)}
	batchAPI := api.New(d, log)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := e.Principal.Load(); p != nil {
			r = r.WithContext(auth.WithPrincipal(r.Context(), p))
		}
		prefix, _, _ := strings.Cut(r.Header.Get("X-Amz-Target"), ".")
		if h, ok := routes[prefix]; ok {
			h.ServeHTTP(w, r)
			return
		}
		batchAPI.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		d.Close()
		ex.Close()
		db.Close()
	})
	e.URL = srv.URL
	e.Batch = batchclient.New(srv.URL, "us-east-1")
	if _, err := e.Batch.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("se"),
		ServiceEnvironmentType: btypes.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []btypes.CapacityLimit{{CapacityUnit: aws.String("ml.g5.xlarge"), MaxCapacity: aws.Int32(4)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Batch.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("q"), JobQueueType: btypes.JobQueueTypeSagemakerTraining,
		Priority: aws.Int32(1), ServiceEnvironmentOrder: []btypes.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("se")}}}); err != nil {
		t.Fatal(err)
	}
	return e
}

// Config is an AWS SDK configuration for the server: its region, the
// placeholder credentials, no retries, and the whole-body reads of
// batchclient.BufferedDoer. Give a client BaseEndpoint: e.URL.
func (e *Env) Config() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: batchclient.Placeholder, Retryer: func() aws.Retryer { return aws.NopRetryer{} },
		HTTPClient: batchclient.BufferedDoer{Client: &http.Client{}}}
}

// Submit submits a job of payload to queue q with the tag team=a, waits
// until it is in one of the statuses with an attempt, and returns its ID
// and its latest attempt's training job name.
func (e *Env) Submit(t testing.TB, name, payload string, until ...btypes.ServiceJobStatus) (string, string) {
	t.Helper()
	out, err := e.Batch.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("q"),
		ServiceJobType: btypes.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(payload), Tags: map[string]string{"team": "a"}})
	if err != nil {
		t.Fatal(err)
	}
	d := batchclient.Await(t, e.Batch, aws.ToString(out.JobId), fmt.Sprint(until), 20*time.Second, func(d *batch.DescribeServiceJobOutput) bool {
		for _, s := range until {
			if d.Status == s && d.LatestAttempt != nil {
				return true
			}
		}
		return false
	})
	return aws.ToString(out.JobId), trainingjob.NameOfARN(aws.ToString(d.LatestAttempt.ServiceResourceId.Value))
}
