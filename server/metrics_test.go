package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"qshare/auth"
	"qshare/event"
	"qshare/internal/batchclient"
	"qshare/sqlite"
	"qshare/store"
	"qshare/web"
)

// serveAt runs qshare serve in this process on s until the test ends and
// returns its address.
func serveAt(t *testing.T, s Settings) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	found := make(chan string, 1)
	go func() { done <- RunReady(ctx, s, io.Discard, func(a string) { found <- a }) }()
	select {
	case a := <-found:
		t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
		return a
	case err := <-done:
		cancel()
		t.Fatalf("serve stopped before listening: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("serve did not listen within 30 s")
	}
	return ""
}

func simServeSettings(t *testing.T) Settings {
	s := DefaultSettings()
	s.Addr = "127.0.0.1:0"
	s.DataDir = filepath.Join(t.TempDir(), "data")
	s.Executor = "simulated"
	s.LogLevel = "error"
	return s
}

// scrape GETs /metrics and parses it.
func scrape(t *testing.T, addr string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("GET /metrics is not the Prometheus text format: %v", err)
	}
	return fams
}

// sample returns the value of the sample of family name whose labels
// include want, and whether there is one.
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// waitSample polls /metrics until the sample has the value, or fails t.
func waitSample(t *testing.T, addr, name string, labels map[string]string, want float64) map[string]*dto.MetricFamily {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		fams := scrape(t, addr)
		v, ok := sample(fams, name, labels)
		if ok && v == want {
			return fams
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s%v = %v (present %v), want %v", name, labels, v, ok, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

const g5 = "ml.g5.xlarge"

// simPayload is a CreateTrainingJob request for one ml.g5.xlarge that runs
// for dur in the simulated executor.
func simPayload(dur time.Duration) string {
	b, _ := json.Marshal(map[string]any{
		"TrainingJobName":        "train",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "TrainingInputMode": "File"},
		"ResourceConfig":         map[string]any{"InstanceType": g5, "InstanceCount": 1, "VolumeSizeInGB": 1},
		"StoppingCondition":      map[string]any{"MaxRuntimeInSeconds": 86400},
		"Environment":            map[string]string{"QSHARE_SIM_DURATION": dur.String()},
	})
	return string(b)
}

// fifoQueue creates the FIFO scheduling policy policy, the service
// environment env of capacity ml.g5.xlarge instances and the job queue
// queue, with that policy, in front of env: what every test here sets up
// before its quota shares.
func fifoQueue(t *testing.T, c *batch.Client, policy, env string, capacity int32, queue string) {
	t.Helper()
	ctx := context.Background()
	pol, err := c.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String(policy),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	serveMust(t, err)
	_, err = c.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(env),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(capacity)}}})
	serveMust(t, err)
	_, err = c.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String(queue), Priority: aws.Int32(1), SchedulingPolicyArn: pol.Arn,
		JobQueueType:            types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(env)}}})
	serveMust(t, err)
}

// threeShares creates the spec's worked example (§6.10,
// examples/three-shares.yaml): an environment of three ml.g5.xlarge and a
// queue "training" with QS1 (LEND_AND_BORROW, in-share preemption), QS2
// (LEND) and QS3 (RESERVE), one instance each.
func threeShares(t *testing.T, c *batch.Client) {
	t.Helper()
	ctx := context.Background()
	fifoQueue(t, c, "qm", "gpu-pool", 3, "training")
	for _, sh := range []struct {
		name     string
		strategy types.QuotaShareResourceSharingStrategy
		borrow   *int32
		inShare  types.QuotaShareInSharePreemptionState
	}{
		{"QS1", types.QuotaShareResourceSharingStrategyLendAndBorrow, aws.Int32(200), types.QuotaShareInSharePreemptionStateEnabled},
		{"QS2", types.QuotaShareResourceSharingStrategyLend, nil, types.QuotaShareInSharePreemptionStateDisabled},
		{"QS3", types.QuotaShareResourceSharingStrategyReserve, nil, types.QuotaShareInSharePreemptionStateDisabled},
	} {
		_, err := c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh.name), JobQueue: aws.String("training"),
			CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}},
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: sh.strategy, BorrowLimit: sh.borrow},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: sh.inShare}})
		serveMust(t, err)
	}
}

func submitTo(t *testing.T, c *batch.Client, share, name string, prio int32, dur time.Duration) string {
	t.Helper()
	out, err := c.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String(name), JobQueue: aws.String("training"),
		QuotaShareName: aws.String(share), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
		ServiceRequestPayload: aws.String(simPayload(dur)), SchedulingPriority: aws.Int32(prio)})
	serveMust(t, err)
	return *out.JobId
}

// TestMetricsWorkedExample plays the spec's worked example against a real
// qshare serve (in this process, simulated executor, the request guard in
// front) and reads each step back from GET /metrics: QS1 borrows QS2's
// instance (qshare_lent), QS2 reclaims it (a cross-share preemption of QS1
// by QS2), and a higher-priority QS1 job takes its share's own instance (an
// in-share preemption). It then checks that the families /metrics exposes
// are exactly those docs/metrics.md lists.
func TestMetricsWorkedExample(t *testing.T) {
	addr := serveAt(t, simServeSettings(t))
	c := serveClient("http://" + addr)
	for _, p := range []string{"/healthz", "/readyz"} {
		resp, err := http.Get("http://" + addr + p)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %s %q, want 200", p, resp.Status, b)
		}
	}
	threeShares(t, c)
	q := map[string]string{"queue": "training", "instance_type": g5}
	with := func(m map[string]string, kv ...string) map[string]string {
		out := map[string]string{}
		for k, v := range m {
			out[k] = v
		}
		for i := 0; i < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}

	// Step 1: QS1 runs two jobs; the second borrows QS2's idle instance
	// (QS3 is RESERVE and keeps its own).
	submitTo(t, c, "QS1", "a", 1, time.Hour)
	submitTo(t, c, "QS1", "b", 1, time.Hour)
	waitSample(t, addr, "qshare_lent", with(q, "lender", "QS2", "borrower", "QS1"), 1)
	// The engine's state (lent, in use) is read at scrape time and shows a
	// start at once; a job's wait is observed once its start is durable,
	// a moment later: wait for both waits before reading the rest.
	fams := waitSample(t, addr, "qshare_job_wait_seconds", map[string]string{"queue": "training", "share": "QS1"}, 2)
	step1 := fams
	for _, x := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"qshare_share_own_use", with(q, "share", "QS1"), 1},
		{"qshare_share_borrowed", with(q, "share", "QS1"), 1},
		{"qshare_share_lent", with(q, "share", "QS2"), 1},
		{"qshare_share_idle", with(q, "share", "QS3"), 1},
		{"qshare_share_capacity", with(q, "share", "QS1"), 1},
		{"qshare_share_borrow_limit", with(q, "share", "QS2"), 0},
		{"qshare_environment_capacity", map[string]string{"service_environment": "gpu-pool", "instance_type": g5}, 3},
		{"qshare_environment_in_use", map[string]string{"service_environment": "gpu-pool", "instance_type": g5}, 2},
		{"qshare_job_wait_seconds", map[string]string{"queue": "training", "share": "QS1"}, 2},
	} {
		if v, ok := sample(fams, x.name, x.labels); !ok || v != x.want {
			t.Errorf("after step 1, %s%v = %v (present %v), want %v", x.name, x.labels, v, ok, x.want)
		}
	}
	if _, ok := sample(fams, "qshare_lent", with(q, "lender", "QS3")); ok {
		t.Errorf("after step 1, the RESERVE share QS3 lends: %v", fams["qshare_lent"])
	}

	// Step 2: QS2 submits; QS2 reclaims its instance from QS1's borrower.
	submitTo(t, c, "QS2", "c", 1, time.Hour)
	fams = waitSample(t, addr, "qshare_preemptions_total",
		map[string]string{"queue": "training", "kind": "cross-share", "preempting_share": "QS2", "preempted_share": "QS1"}, 1)
	waitSample(t, addr, "qshare_share_in_use", with(q, "share", "QS2"), 1)
	fams = waitSample(t, addr, "qshare_runnable_jobs", map[string]string{"queue": "training", "share": "QS1", "reason": "capacity"}, 1)
	if _, ok := sample(fams, "qshare_lent", with(q, "lender", "QS2")); ok {
		t.Errorf("after step 2, QS2 still lends: %v", fams["qshare_lent"])
	}

	// Step 3: a higher-priority QS1 job preempts its share's running job.
	submitTo(t, c, "QS1", "d", 10, time.Hour)
	fams = waitSample(t, addr, "qshare_preemptions_total",
		map[string]string{"queue": "training", "kind": "in-share", "preempting_share": "QS1", "preempted_share": "QS1"}, 1)
	if v, _ := sample(fams, "qshare_preemptions_total", map[string]string{"kind": "cross-share"}); v != 1 {
		t.Errorf("after step 3, cross-share preemptions = %v, want still 1", v)
	}
	fams = waitSample(t, addr, "qshare_jobs", map[string]string{"queue": "training", "share": "QS1", "status": "RUNNING"}, 1)
	if v, _ := sample(fams, "qshare_jobs", map[string]string{"queue": "training", "share": "QS1", "status": "RUNNABLE"}); v != 2 {
		t.Errorf("after step 3, QS1 has %v RUNNABLE jobs, want 2 (both preempted)", v)
	}

	// A rejected request is counted with its outcome.
	_, err := c.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String("no-such-job")})
	if err == nil {
		t.Fatal("DescribeServiceJob of an unknown job succeeded")
	}
	fams = waitSample(t, addr, "qshare_api_request_seconds", map[string]string{"operation": "describeservicejob", "outcome": "ClientException"}, 1)
	if v, _ := sample(fams, "qshare_api_request_seconds", map[string]string{"operation": "submitservicejob", "outcome": "success"}); v != 4 {
		t.Errorf("submitservicejob successes = %v, want 4", v)
	}

	// Beside the example, a queue whose share borrows capacity that no
	// share owns: an environment of 2, one share of 1.
	ctx := context.Background()
	fifoQueue(t, c, "spot-policy", "spare", 2, "spot")
	_, err = c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String("S"), JobQueue: aws.String("spot"),
		CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(1)}},
		ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, BorrowLimit: aws.Int32(-1)},
		PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
	serveMust(t, err)
	for _, n := range []string{"e", "f"} {
		_, err := c.SubmitServiceJob(ctx, &batch.SubmitServiceJobInput{JobName: aws.String(n), JobQueue: aws.String("spot"),
			QuotaShareName: aws.String("S"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(simPayload(time.Hour))})
		serveMust(t, err)
	}
	fams = waitSample(t, addr, "qshare_borrowed_unowned", map[string]string{"queue": "spot", "share": "S", "instance_type": g5}, 1)
	if v, _ := sample(fams, "qshare_share_borrow_limit", map[string]string{"queue": "spot", "share": "S"}); !math.IsInf(v, 1) {
		t.Errorf("an unbounded borrow limit reads %v, want +Inf", v)
	}

	// Every family, each seen with samples at some step, is documented.
	all := map[string]*dto.MetricFamily{}
	for _, f := range []map[string]*dto.MetricFamily{step1, fams} {
		for k, v := range f {
			all[k] = v
		}
	}
	checkDocumented(t, all)
}

// documentedMetrics reads the metric names of docs/metrics.md: the first
// cell of each table row that names one in backquotes.
func documentedMetrics(t testing.TB) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\|")
	var names []string
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		names = append(names, m[1])
	}
	sort.Strings(names)
	return names
}

// checkDocumented fails t unless the qshare_ families of fams are exactly
// those docs/metrics.md lists, and the Go runtime and process collectors
// (go_*, process_*) are there as the page says.
func checkDocumented(t *testing.T, fams map[string]*dto.MetricFamily) {
	t.Helper()
	var exposed []string
	goSeen, procSeen := false, false
	for name := range fams {
		switch {
		case strings.HasPrefix(name, "qshare_"):
			exposed = append(exposed, name)
		case strings.HasPrefix(name, "go_"):
			goSeen = true
		case strings.HasPrefix(name, "process_"):
			procSeen = true
		}
	}
	// qshare_training_metric needs a job's log, which the simulated executor
	// keeps none of: go test ./metrics -run TestTrainingMetric scrapes it,
	// and test/dashboard's TestFinalMetrics shows its values.
	if fams["qshare_training_metric"] == nil {
		exposed = append(exposed, "qshare_training_metric")
	}
	sort.Strings(exposed)
	documented := documentedMetrics(t)
	if fmt.Sprint(exposed) != fmt.Sprint(documented) {
		t.Errorf("/metrics exposes\n  %v\ndocs/metrics.md lists\n  %v", exposed, documented)
	}
	if !goSeen || !procSeen {
		t.Errorf("the Go runtime (%v) or process (%v) collector is missing", goSeen, procSeen)
	}
}

// TestMetricsGuardedAndOff checks that /metrics and the probes go through
// the request guard (a request naming a foreign Host is refused, as on the
// API), and that --metrics off serves no /metrics while the probes stay.
func TestMetricsGuardedAndOff(t *testing.T) {
	addr := serveAt(t, simServeSettings(t))
	for _, p := range []string{"/metrics", "/healthz", "/readyz"} {
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+p, nil)
		req.Host = "evil.example"
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("GET %s with Host evil.example = %s, want 403 from the guard", p, resp.Status)
		}
	}
	s := simServeSettings(t)
	s.Metrics = "off"
	off := serveAt(t, s)
	resp, err := http.Get("http://" + off + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Errorf("GET /metrics with --metrics off = %s, want an error", resp.Status)
	}
	resp, err = http.Get("http://" + off + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /readyz with --metrics off = %s, want 200", resp.Status)
	}
	bad := simServeSettings(t)
	bad.Metrics = "maybe"
	if err := Run(context.Background(), bad, io.Discard); err == nil || !strings.Contains(err.Error(), "--metrics") {
		t.Errorf("--metrics maybe: %v, want an error naming --metrics", err)
	}
}

// slowStore is an SQLite store whose Load waits until release is closed, so
// that a test sees the server before it is ready.
type slowStore struct {
	store.Store
	release chan struct{}
}

func (s *slowStore) Load(ctx context.Context) (*store.State, error) {
	select {
	case <-s.release:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	return s.Store.Load(ctx)
}

// TestReadyzAfterRecovery runs qshare serve on a store whose Load is held
// back, and checks that meanwhile /healthz is 200, /readyz is 503 with the
// reason, and the API answers 503 ServerException (which the AWS SDKs
// retry); once the store is loaded and recovery has finished, /readyz is
// 200 and the API serves.
func TestReadyzAfterRecovery(t *testing.T) {
	release := make(chan struct{})
	// A registry of its own for this test, so that the other tests' list
	// of stores stays as qshare has it.
	saved := stores
	stores = newStoreRegistry()
	t.Cleanup(func() { stores = saved })
	stores.Register("slowtest", func(ctx context.Context, u *url.URL) (store.Store, error) {
		db, err := sqlite.Open(filepath.Join(u.Path, "qshare.db"))
		if err != nil {
			return nil, err
		}
		return &slowStore{Store: db, release: release}, nil
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	s := simServeSettings(t)
	s.Addr = addr
	s.Store = "slowtest://" + t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	ready := make(chan struct{})
	go func() { done <- RunReady(ctx, s, io.Discard, func(string) { close(ready) }) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	}()
	getBody := func(method, path string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader("{}")
		}
		req, _ := http.NewRequest(method, "http://"+addr+path, body)
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// Wait until it listens (it does so before touching the store).
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if code, _ := getBody(http.MethodGet, "/healthz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			code, body := getBody(http.MethodGet, "/healthz")
			t.Fatalf("serve did not answer /healthz while loading: %d %s", code, body)
		}
	}
	if code, body := getBody(http.MethodGet, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "loading the store") {
		t.Errorf("GET /readyz while loading = %d %q, want 503 with the reason", code, body)
	}
	if code, body := getBody(http.MethodPost, "/v1/describejobqueues"); code != http.StatusServiceUnavailable || !strings.Contains(body, `"__type":"ServerException"`) {
		t.Errorf("the API while loading = %d %q, want a 503 ServerException", code, body)
	}
	if code, _ := getBody(http.MethodGet, "/metrics"); code != http.StatusOK {
		t.Errorf("GET /metrics while loading = %d, want 200", code)
	}
	close(release)
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("serve stopped: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not become ready")
	}
	if code, body := getBody(http.MethodGet, "/readyz"); code != http.StatusOK || body != "ready\n" {
		t.Errorf("GET /readyz after recovery = %d %q, want 200", code, body)
	}
	if code, body := getBody(http.MethodPost, "/v1/describejobqueues"); code != http.StatusOK {
		t.Errorf("the API after recovery = %d %q, want 200", code, body)
	}
}

// TestMetricsLimitChange lowers the limit of a share whose jobs started
// within it, and checks that the preemption that returns the capacity to
// the other share is counted as limit-change, not as a reclaim of
// borrowed capacity.
func TestMetricsLimitChange(t *testing.T) {
	addr := serveAt(t, simServeSettings(t))
	c := serveClient("http://" + addr)
	ctx := context.Background()
	fifoQueue(t, c, "qm", "gpu-pool", 3, "training")
	arns := map[string]*string{}
	for _, sh := range []struct {
		name  string
		limit int32
	}{{"A", 2}, {"B", 1}} {
		out, err := c.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh.name), JobQueue: aws.String("training"),
			CapacityLimits:               []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(sh.limit)}},
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: types.QuotaShareResourceSharingStrategyLend},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: types.QuotaShareInSharePreemptionStateDisabled}})
		serveMust(t, err)
		arns[sh.name] = out.QuotaShareArn
	}
	submitTo(t, c, "A", "a1", 1, time.Hour)
	submitTo(t, c, "A", "a2", 1, time.Hour)
	submitTo(t, c, "B", "b1", 1, time.Hour)
	waitSample(t, addr, "qshare_environment_in_use", map[string]string{"service_environment": "gpu-pool"}, 3)
	// A's limit goes down to 1 and B's up to 2: A's second job, started
	// within A's old limit, must go when B's second job comes.
	for name, limit := range map[string]int32{"A": 1, "B": 2} {
		_, err := c.UpdateQuotaShare(ctx, &batch.UpdateQuotaShareInput{QuotaShareArn: arns[name],
			CapacityLimits: []types.QuotaShareCapacityLimit{{CapacityUnit: aws.String(g5), MaxCapacity: aws.Int32(limit)}}})
		serveMust(t, err)
	}
	waitSample(t, addr, "qshare_share_capacity", map[string]string{"queue": "training", "share": "B"}, 2)
	submitTo(t, c, "B", "b2", 1, time.Hour)
	fams := waitSample(t, addr, "qshare_preemptions_total",
		map[string]string{"queue": "training", "kind": "limit-change", "preempting_share": "B", "preempted_share": "A"}, 1)
	if v, ok := sample(fams, "qshare_preemptions_total", map[string]string{"kind": "cross-share"}); ok {
		t.Errorf("a limit change was counted as %v cross-share preemptions", v)
	}
}

// TestEventsNameOnlyReadableJobs: with --auth, the timeline (GET
// /qshare/v1/events) of a principal that may describe QS1's jobs alone
// shows the preemption of its job by QS2's reclaim, and the ID of the job
// it was preempted for (as its statusReason does), but not that job's
// name: the name is read from a job it may not describe.
func TestEventsNameOnlyReadableJobs(t *testing.T) {
	s := simServeSettings(t)
	dir := t.TempDir()
	s.Events, s.Guard.Auth = filepath.Join(dir, "events.jsonl"), filepath.Join(dir, "auth.yaml")
	alice, err := auth.NewKey()
	serveMust(t, err)
	admin, err := auth.NewKey()
	serveMust(t, err)
	serveMust(t, os.WriteFile(s.Guard.Auth, []byte(`principals:
  - {name: alice, accessKeys: [{id: `+alice.ID+`, secret: "`+alice.Secret+`"}], policies: [qs1]}
  - {name: admin, accessKeys: [{id: `+admin.ID+`, secret: "`+admin.Secret+`"}], policies: [all]}
policies:
  qs1:
    Version: "2012-10-17"
    Statement:
      - {Effect: Allow, Action: batch:GetEvents, Resource: "*"}
      - {Effect: Allow, Action: [batch:SubmitServiceJob, batch:DescribeServiceJob], Resource: "arn:aws:batch:*:*:job-queue/training/quota-share/QS1"}
  all: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "batch:*", Resource: "*"}]}
`), 0o600))
	url := "http://" + serveAt(t, s)
	creds := func(k auth.AccessKey) credentials.StaticCredentialsProvider {
		return credentials.NewStaticCredentialsProvider(k.ID, k.Secret, "")
	}
	adminC := batchclient.NewSigned(url, "us-east-1", creds(admin), nil, batchclient.NoRetry)
	aliceC := batchclient.NewSigned(url, "us-east-1", creds(alice), nil, batchclient.NoRetry)
	threeShares(t, adminC)
	submitTo(t, aliceC, "QS1", "alice-own", 1, time.Hour)
	submitTo(t, aliceC, "QS1", "alice-borrows", 1, time.Hour)
	events := func(k auth.AccessKey) []web.Event {
		t.Helper()
		resp, err := batchclient.SignedHTTPClient(nil, creds(k), "us-east-1").Get(url + web.EventsPath)
		serveMust(t, err)
		defer resp.Body.Close()
		var out web.EventsResponse
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s %v", web.EventsPath, resp.Status, err)
		}
		return out.Events
	}
	preemptFor := func(k auth.AccessKey, job string) *web.Event {
		for _, e := range events(k) {
			if e.Event.Event == event.Preempt && e.For == job {
				return &e
			}
		}
		return nil
	}
	deadline := time.Now().Add(15 * time.Second)
	waitFor := func(what string, done func() bool) {
		t.Helper()
		for !done() {
			if time.Now().After(deadline) {
				t.Fatalf("%s within 15 s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("alice's two jobs did not start", func() bool {
		n := 0
		for _, e := range events(admin) {
			if e.Event.Event == event.Start {
				n++
			}
		}
		return n == 2
	})
	bob := submitTo(t, adminC, "QS2", "bobs-secret-project", 1, time.Hour)
	waitFor("QS2's job did not preempt alice's borrowing job", func() bool { return preemptFor(admin, bob) != nil })
	if e := preemptFor(admin, bob); e.ForName != "bobs-secret-project" || e.JobName != "alice-borrows" {
		t.Errorf("admin's timeline: %+v, want alice-borrows preempted for bobs-secret-project", e)
	}
	e := preemptFor(alice, bob)
	if e == nil || e.JobName != "alice-borrows" {
		t.Fatalf("alice's timeline has no preemption of her job for %s: %+v", bob, e)
	}
	if e.ForName != "" {
		t.Errorf("alice's timeline names the QS2 job her job was preempted for, %q, which she may not describe", e.ForName)
	}
}
