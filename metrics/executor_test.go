package metrics_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"qshare"
	"qshare/daemon"
	"qshare/executor"
	"qshare/executor/simulated"
	"qshare/metrics"
	"qshare/sqlite"
)

// ailing is a simulated executor whose health a test sets, as the Slurm
// executor's says when slurmctld stops answering.
type ailing struct {
	*simulated.Executor
	mu     sync.Mutex
	health string
}

func (a *ailing) Health() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.health
}

var _ executor.HealthReporter = (*ailing)(nil)

// TestMetricsByExecutor: on a server with two named executors, the
// environment gauges, the attempts' starts and ends and each executor's
// health are labelled by executor, as a scrape of /metrics reads them; an
// executor that is down reads 0 while the other reads 1; and the label
// adds no series to the environment gauges (one environment, one
// executor).
func TestMetricsByExecutor(t *testing.T) {
	ctx := context.Background()
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "qshare.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	hpc := &ailing{Executor: simulated.New(simulated.Options{})}
	set, err := executor.NewSet(map[string]executor.Executor{"default": simulated.New(simulated.Options{}), "hpc": hpc})
	if err != nil {
		t.Fatal(err)
	}
	defer set.Close()
	m := metrics.New()
	d, err := daemon.New(daemon.Config{Store: db, Executors: set, Observer: m, Tick: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(d)
	if err := d.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err = d.CreatePolicy(ctx, daemon.PolicyInput{Name: "p", QuotaSharePolicy: &qshare.QuotaSharePolicy{IdleResourceAssignmentStrategy: "FIFO"}})
	must(err)
	for _, env := range []struct{ name, exec string }{{"env-default", ""}, {"env-hpc", "hpc"}} {
		var tags map[string]string
		if env.exec != "" {
			tags = map[string]string{qshare.TagExecutor: env.exec}
		}
		_, err = d.CreateEnvironment(ctx, daemon.EnvironmentInput{Name: env.name, Type: "SAGEMAKER_TRAINING", Tags: tags,
			CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: g5, MaxCapacity: 2}}})
		must(err)
		q := "q-" + strings.TrimPrefix(env.name, "env-")
		_, err = d.CreateQueue(ctx, daemon.QueueInput{Name: q, SchedulingPolicyARN: d.PolicyARN("p"), Priority: 1,
			ServiceEnvironmentOrder: []qshare.ServiceEnvironmentOrder{{Order: 1, ServiceEnvironment: env.name}}})
		must(err)
		_, err = d.CreateShare(ctx, daemon.ShareInput{Name: "A", Queue: q, Strategy: qshare.StrategyReserve, InSharePreemption: qshare.Disabled,
			CapacityLimits: []qshare.CapacityLimit{{CapacityUnit: g5, MaxCapacity: 2}}})
		must(err)
	}
	prio := int64(0)
	submit := func(queue, name, duration, exit string) {
		t.Helper()
		_, err := d.Submit(ctx, daemon.SubmitInput{Name: name, Queue: queue, QuotaShare: "A", ServiceJobType: "SAGEMAKER_TRAINING", Priority: &prio,
			Payload: fmt.Sprintf(`{"ResourceConfig":{"InstanceType":%q},"Environment":{"QSHARE_SIM_DURATION":%q,"QSHARE_SIM_EXIT_CODE":%q}}`, g5, duration, exit)})
		must(err)
	}
	// Two quick jobs on each executor (on hpc one fails), and one that
	// runs on, holding an instance of each environment.
	submit("q-default", "ok", "0s", "0")
	submit("q-hpc", "ok", "0s", "0")
	submit("q-hpc", "bad", "0s", "3")
	submit("q-default", "long", "1h", "0")
	submit("q-hpc", "long", "1h", "0")

	srv := httptest.NewServer(m.Handler())
	defer srv.Close()
	type key struct{ name, labels string }
	read := func() map[key]float64 {
		t.Helper()
		resp, err := srv.Client().Get(srv.URL)
		must(err)
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		must(err)
		out := map[key]float64{}
		for name, f := range fams {
			for _, s := range f.GetMetric() {
				var ls []string
				for _, l := range s.GetLabel() {
					ls = append(ls, l.GetName()+"="+l.GetValue())
				}
				v := s.GetGauge().GetValue() + s.GetCounter().GetValue() + float64(s.GetHistogram().GetSampleCount())
				out[key{name, strings.Join(ls, ",")}] = v
			}
		}
		return out
	}
	want := map[key]float64{
		{"qshare_environment_in_use", "executor=default,instance_type=" + g5 + ",service_environment=env-default"}: 1,
		{"qshare_environment_in_use", "executor=hpc,instance_type=" + g5 + ",service_environment=env-hpc"}:         1,
		{"qshare_environment_capacity", "executor=hpc,instance_type=" + g5 + ",service_environment=env-hpc"}:       2,
		{"qshare_attempts_ended_total", "executor=default,outcome=succeeded"}:                                      1,
		{"qshare_attempts_ended_total", "executor=hpc,outcome=succeeded"}:                                          1,
		{"qshare_attempts_ended_total", "executor=hpc,outcome=failed"}:                                             1,
		{"qshare_executor_start_seconds", "executor=default,outcome=success"}:                                      2,
		{"qshare_executor_start_seconds", "executor=hpc,outcome=success"}:                                          3,
		{"qshare_executor_up", "executor=default"}:                                                                 1,
		{"qshare_executor_up", "executor=hpc"}:                                                                     1,
	}
	var got map[key]float64
	check := func(when string) {
		t.Helper()
		var missing []string
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			got, missing = read(), nil
			for k, v := range want {
				if got[k] != v {
					missing = append(missing, fmt.Sprintf("%s{%s} = %v, want %v", k.name, k.labels, got[k], v))
				}
			}
			if len(missing) == 0 || time.Now().After(deadline) {
				break
			}
		}
		if len(missing) > 0 {
			t.Fatalf("%s:\n%s", when, strings.Join(missing, "\n"))
		}
	}
	check("both executors up")
	// One series per environment and type: the executor label adds none.
	n := 0
	for k := range got {
		if k.name == "qshare_environment_capacity" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("qshare_environment_capacity has %d series, want 2 (one per environment)", n)
	}

	hpc.mu.Lock()
	hpc.health = "slurmctld does not answer"
	hpc.mu.Unlock()
	want[key{"qshare_executor_up", "executor=hpc"}] = 0
	check("hpc down")
	ls, err := d.Lending("")
	must(err)
	for _, l := range ls {
		if wantExec := strings.TrimPrefix(l.JobQueue, "q-"); l.Executor != wantExec || (l.ExecutorHealth != "") != (wantExec == "hpc") {
			t.Errorf("lending of %s names executor %q, health %q: want %s, down only for hpc", l.JobQueue, l.Executor, l.ExecutorHealth, wantExec)
		}
	}
}
