package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/api"
	"qshare/auth"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/internal/batchclient"
	"qshare/sqlite"
)

// server is a real qshare server (SQLite store, simulated executor, the
// API handler) on a loopback port, and an AWS SDK client pointed at it.
type server struct {
	t      testing.TB
	c      *batch.Client
	d      *daemon.Daemon
	db     *sqlite.DB
	ex     *simulated.Executor
	url    string
	closed bool
	dir    string
	srv    *httptest.Server
}

type serverOption func(*daemon.Config)

func newServer(t testing.TB, opts ...serverOption) *server {
	t.Helper()
	return startServer(t, t.TempDir(), opts...)
}

func startServer(t testing.TB, dir string, opts ...serverOption) *server {
	t.Helper()
	return startGuardedServer(t, dir, auth.Config{SameUserOnly: true}, opts...)
}

// startGuardedServer is startServer behind a request guard of gcfg (its
// Addr, WriteError and Log are the server's).
func startGuardedServer(t testing.TB, dir string, gcfg auth.Config, opts ...serverOption) *server {
	t.Helper()
	level := slog.LevelWarn
	if os.Getenv("QSHARE_TEST_LOG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	db, ex, d := startDaemon(t, dir, log, opts)
	// The API behind the request guard, as qshare serve runs it, so that
	// every test's AWS SDK client also shows the guard lets it through.
	srv := httptest.NewUnstartedServer(api.New(d, log))
	gcfg.Addr, gcfg.WriteError, gcfg.Log = srv.Listener.Addr().String(), api.WriteError, log
	guard, err := auth.New(gcfg)
	if err != nil {
		t.Fatal(err)
	}
	guard.Install(srv.Config)
	srv.Start()
	s := &server{t: t, d: d, db: db, ex: ex, url: srv.URL, dir: dir, srv: srv}
	s.c = newClient(srv.URL)
	t.Cleanup(s.close)
	return s
}

// startDaemon opens (or creates) the SQLite store dir/qshare.db and starts
// a daemon on it with the simulated executor, the logger log, a 20 ms tick
// and opts; the caller closes all three.
func startDaemon(t testing.TB, dir string, log *slog.Logger, opts []serverOption) (*sqlite.DB, *simulated.Executor, *daemon.Daemon) {
	t.Helper()
	db, err := sqlite.Open(filepath.Join(dir, "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	ex := simulated.New(simulated.Options{})
	cfg := daemon.Config{Store: db, Executor: ex, Logger: log, Tick: 20 * time.Millisecond}
	for _, o := range opts {
		o(&cfg)
	}
	d, err := daemon.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	return db, ex, d
}

func (s *server) close() {
	if s.closed {
		return
	}
	s.closed = true
	s.srv.Close()
	s.d.Close()
	s.ex.Close()
	s.db.Close()
}

func newClient(url string) *batch.Client {
	return batchclient.New(url, "us-east-1")
}

var ctx = context.Background()

// payload returns a CreateTrainingJob request for count instances of typ
// that runs for dur in the simulated executor and exits with code.
func payload(typ string, count int, dur time.Duration, code int) string {
	p := map[string]any{
		"TrainingJobName":        "train",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "TrainingInputMode": "File"},
		"ResourceConfig":         map[string]any{"InstanceType": typ, "InstanceCount": count, "VolumeSizeInGB": 1},
		"StoppingCondition":      map[string]any{"MaxRuntimeInSeconds": 86400},
		"Environment":            map[string]string{"QSHARE_SIM_DURATION": dur.String(), "QSHARE_SIM_EXIT_CODE": fmt.Sprint(code)},
	}
	b, _ := json.Marshal(p)
	return string(b)
}

const g5 = "ml.g5.xlarge"

// shareSpec is a quota share of ml.g5.xlarge for setup and createShare.
type shareSpec struct {
	name     string
	limit    int32
	strategy types.QuotaShareResourceSharingStrategy
	borrow   *int32
	inShare  bool
}

// setup creates the worked example's resources: a FIFO quota-share policy,
// a service environment with envCap ml.g5.xlarge, a queue, and shares.
func (s *server) setup(queue string, envCap int32, shares ...shareSpec) (queueARN string) {
	s.t.Helper()
	pol := s.createPolicy(queue + "-policy")
	env := s.createEnv(queue+"-env", envCap)
	q := s.createQueue(queue, pol, env)
	for _, sh := range shares {
		s.createShare(q, sh)
	}
	s.waitSettled(queue, shares...) // as the reference client does, before using them
	return *q
}

// createPolicy creates a quota-share scheduling policy (FIFO) and returns
// its ARN.
func (s *server) createPolicy(name string) *string {
	s.t.Helper()
	pol, err := s.c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{
		Name:             aws.String(name),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo},
	})
	must(s.t, err)
	return pol.Arn
}

// createEnv creates a SAGEMAKER_TRAINING service environment of n
// ml.g5.xlarge and returns its ARN.
func (s *server) createEnv(name string, n int32) *string {
	s.t.Helper()
	env, err := s.c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{
		ServiceEnvironmentName: aws.String(name),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(n)}},
	})
	must(s.t, err)
	return env.ServiceEnvironmentArn
}

// createQueue creates a SAGEMAKER_TRAINING job queue of priority 1 on the
// environment env, under the scheduling policy pol (nil: a FIFO queue, with
// no quota shares), and returns its ARN.
func (s *server) createQueue(name string, pol, env *string) *string {
	s.t.Helper()
	q, err := s.c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{
		JobQueueName:            aws.String(name),
		Priority:                aws.Int32(1),
		JobQueueType:            types.JobQueueTypeSagemakerTraining,
		SchedulingPolicyArn:     pol,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: env}},
	})
	must(s.t, err)
	return q.JobQueueArn
}

// createShare creates the quota share sh of ml.g5.xlarge in the job queue
// (a name or an ARN) and returns its ARN.
func (s *server) createShare(queue *string, sh shareSpec) string {
	s.t.Helper()
	inShare := types.QuotaShareInSharePreemptionStateDisabled
	if sh.inShare {
		inShare = types.QuotaShareInSharePreemptionStateEnabled
	}
	out, err := s.c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{
		QuotaShareName: aws.String(sh.name),
		JobQueue:       queue,
		CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(sh.limit)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{
			Strategy: sh.strategy, BorrowLimit: sh.borrow},
		PreemptionConfiguration: &types.QuotaSharePreemptionConfiguration{InSharePreemption: inShare},
	})
	must(s.t, err)
	return aws.ToString(out.QuotaShareArn)
}

// reserved creates queue "q" on an environment of n ml.g5.xlarge, with one
// RESERVE share "A" of n: the set-up of the tests about one share's jobs.
func (s *server) reserved(n int32) (queueARN string) {
	s.t.Helper()
	return s.setup("q", n, shareSpec{name: "A", limit: n, strategy: types.QuotaShareResourceSharingStrategyReserve})
}

// clock is a daemon clock that a test moves forward (pass its option to
// newServer or startServer); the executor's clock stays real.
type clock struct{ skew atomic.Int64 }

// option makes the daemon read its time from c.
func (c *clock) option() serverOption {
	return func(cfg *daemon.Config) {
		cfg.Now = func() time.Time { return time.Now().Add(time.Duration(c.skew.Load())) }
	}
}

// setAhead puts the daemon's clock d ahead of the real one.
func (c *clock) setAhead(d time.Duration) { c.skew.Store(int64(d)) }

func (s *server) submit(queue, share, name string, prio int32, p string) string {
	s.t.Helper()
	in := &batch.SubmitServiceJobInput{
		JobName: aws.String(name), JobQueue: aws.String(queue), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(p), SchedulingPriority: aws.Int32(prio),
	}
	if share != "" {
		in.QuotaShareName = aws.String(share)
	}
	out, err := s.c.SubmitServiceJob(ctx, in)
	must(s.t, err)
	return *out.JobId
}

// post sends body as a raw JSON request to path (/v1/OPERATION) of the
// server, not through the SDK, and returns the response, its body read.
func (s *server) post(path, body string) (*http.Response, []byte) {
	s.t.Helper()
	resp, err := http.Post(s.url+path, "application/json", strings.NewReader(body))
	must(s.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	must(s.t, err)
	return resp, b
}

func (s *server) describe(id string) *batch.DescribeServiceJobOutput {
	s.t.Helper()
	out, err := s.c.DescribeServiceJob(ctx, &batch.DescribeServiceJobInput{JobId: aws.String(id)})
	must(s.t, err)
	return out
}

// waitStatus polls until the job has one of the statuses, or fails the test.
func (s *server) waitStatus(id string, want ...types.ServiceJobStatus) *batch.DescribeServiceJobOutput {
	s.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		out := s.describe(id)
		for _, w := range want {
			if out.Status == w {
				return out
			}
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("job %s (%s) is %s (%s), want %v", id, aws.ToString(out.JobName), out.Status, aws.ToString(out.StatusReason), want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// clientErr asserts that err is a ClientException whose message contains
// every one of the fragments.
func clientErr(t *testing.T, err error, fragments ...string) {
	t.Helper()
	var ce *types.ClientException
	if !errors.As(err, &ce) {
		t.Fatalf("err = %v (%T), want *types.ClientException", err, err)
	}
	for _, f := range fragments {
		if !strings.Contains(ce.ErrorMessage(), f) {
			t.Fatalf("ClientException message %q does not contain %q", ce.ErrorMessage(), f)
		}
	}
}

type daemonConfig = daemon.Config
