package slurm

import (
	"context"
	"encoding/json"
	"flag"
	"os"
	"sync"
	"testing"
	"time"

	"qshare/executor"
	"qshare/executor/executortest"
	"qshare/executor/slurm/slurmtest"
	"qshare/internal/longtest"
)

// TestMain: the tests whose jobs share the nodes (ml.m5.large, a CPU
// each) call t.Parallel, and run together, four at once at least
// (longtest.MinParallel), since they mostly wait on Slurm's scheduler.
// Those that take whole nodes run one at a time, as the subtests of
// TestWholeNodes, on a cluster of their own (wholeNodes), and those that
// stop slurmctld, set a node DOWN or wait for Slurm to forget jobs, as
// the subtests of TestOutages, on another (outages), beside the others.
// (Six at once made the conformance suite's JobGraceFromEnvironment fail
// once in two runs on a loaded machine, not yet understood; four passed
// at load averages of 30 to 50.) The executors poll squeue at the
// default interval (250 ms): each squeue costs some 13 ms of the
// client's CPU, and at 100 ms the polls took much of the package's.
func TestMain(m *testing.M) {
	MaybeStep()
	flag.Parse()
	longtest.MinParallel(4)
	// The cluster with accounting (MariaDB and slurmdbd) takes the
	// longest to start and serves one of the parallel tests, and
	// TestWholeNodes' and TestOutages' clusters serve the other tests'
	// neighbours: they start while the first tests run, unless -run
	// picks some tests.
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" && !testing.Short() {
		if slurmtest.AccountingAvailable() == nil {
			go withAccounting.once.Do(withAccounting.start)
		}
		if slurmtest.Available() == nil {
			go wholeNodes.once.Do(wholeNodes.start)
			go outages.once.Do(outages.start)
		}
	}
	code := m.Run()
	for _, l := range []*lazyCluster{plain, withAccounting, wholeNodes, outages} {
		l.once.Do(func() {}) // waits for a start under way
		l.c.Close()
	}
	os.Exit(code)
}

// lazyCluster is a Slurm cluster of the package's tests, started at its
// first use and stopped by TestMain.
type lazyCluster struct {
	opt  slurmtest.Options
	once sync.Once
	c    *slurmtest.Cluster
	err  error
}

// Both forget finished jobs after 2 s (MinJobAge), Slurm's least, so
// that what the tests see after a restart is the executor's own records
// of exits (and, with accounting, sacct's); and both schedule a submitted
// job within a second (Prompt), where Slurm's default lets 3 s pass.
var (
	plain          = &lazyCluster{opt: slurmtest.Options{Nodes: 2, CPUs: 64, GPUs: 2, Partition: "qs", MinJobAge: 2, Prompt: true}}
	withAccounting = &lazyCluster{opt: slurmtest.Options{Nodes: 2, CPUs: 64, Partition: "qs", MinJobAge: 2, Accounting: true, Prompt: true}}
	// wholeNodes and outages are plain's twins, for TestWholeNodes and
	// TestOutages.
	wholeNodes = &lazyCluster{opt: plain.opt}
	outages    = &lazyCluster{opt: plain.opt}
)

func (l *lazyCluster) start() {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l.c, l.err = slurmtest.Start(ctx, l.opt)
}

// get starts the cluster at the first call and returns it; it skips the
// test where its programs are not installed.
func (l *lazyCluster) get(t testing.TB) *slurmtest.Cluster {
	t.Helper()
	slurmtest.SkipUnavailable(t, l.opt)
	l.once.Do(l.start)
	if l.err != nil {
		t.Fatalf("starting a Slurm cluster: %v", l.err)
	}
	return l.c
}

// testCluster is the package's main Slurm cluster: two nodes of 64 CPU
// slots and 2 fake GPUs each, without accounting (sacct answers that it
// is disabled).
func testCluster(t testing.TB) *slurmtest.Cluster { return plain.get(t) }

// accountingCluster is a cluster of two nodes of 64 CPU slots (no GPUs)
// that keeps accounting: slurmdbd over a MariaDB of its own.
func accountingCluster(t testing.TB) *slurmtest.Cluster { return withAccounting.get(t) }

func testConfig(dir string) Config {
	return Config{SharedDir: dir, InstanceTypes: map[string]InstanceType{
		"ml.m5.large":     {Partition: "qs", CPUs: 1, Memory: "64M", ShareNodes: true},
		"ml.g5.12xlarge":  {Partition: "qs", Gres: "gpu:2", CPUs: 64, Memory: "4000M"},
		"ml.p4d.24xlarge": {Partition: "qs", Gres: "gpu:2"},
	}}
}

func newTestExecutor(t testing.TB, dir string) *Executor {
	t.Helper()
	return newExecutorOn(t, testCluster(t), dir)
}

// newExecutorOn is an executor over the cluster c and the shared
// directory dir.
func newExecutorOn(t testing.TB, c *slurmtest.Cluster, dir string) *Executor {
	t.Helper()
	e, err := New(context.Background(), Options{Config: testConfig(dir), Env: c.Env(), Step: []string{os.Args[0]}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func payloadOf(script string, typ string, count int, env map[string]string) string {
	p := map[string]any{
		"TrainingJobName": "t",
		"AlgorithmSpecification": map[string]any{
			"TrainingImage":       "recorded-not-pulled:latest",
			"ContainerEntrypoint": []string{"/bin/sh", "-c", script},
		},
		"ResourceConfig": map[string]any{"InstanceType": typ, "InstanceCount": count},
		"Environment":    env,
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// waitForLog waits until the file at path contains s.
func waitForLog(t testing.TB, path, s string, d time.Duration) {
	t.Helper()
	executortest.WaitForLog(t, path, s, d)
}

func TestConformance(t *testing.T) {
	t.Parallel() // its jobs share nodes (see TestMain)
	testCluster(t)
	executortest.Run(t, executortest.Harness{
		New: func(t testing.TB, dir string) executor.Executor { return newTestExecutor(t, dir) },
		Payload: func(t testing.TB, j executortest.Job) string {
			return payloadOf(executortest.Script(j), "ml.m5.large", 1, j.Env)
		},
		Ready: func(t testing.TB, s executor.Spec, h executor.Handle) {
			waitForLog(t, h.LogPath, "ready\n", time.Minute)
		},
		Observed: func(t testing.TB, s executor.Spec, h executor.Handle) map[string]string {
			return executortest.ReadEnv(t, h.LogPath)
		},
		Slack: 60 * time.Second,
		// 16 batch jobs at once, each a slurmstepd and a step runner, were
		// some 4 s of the suite's CPU on the slower kind of 2-core machine
		// (7 December 2026): the README's command races 4, the long step
		// (QSHARE_LONG=1) 16.
		Concurrent: longtest.Pick(4, 16),
		Durable:    true,
		KeepsLogs:  true,
	})
}

// TestWholeNodes runs, one after the other, the tests that take whole
// nodes, on a cluster of their own (wholeNodes), in parallel with the
// tests whose jobs share the main cluster's nodes (on one cluster the
// others would have to wait for them) and with TestOutages.
func TestWholeNodes(t *testing.T) {
	t.Parallel()
	runOn(t, wholeNodes, []clusterTest{
		{"TwoNodeJob", twoNodeJob},
		{"TwoNodeJobStagesItsShare", twoNodeJobStagesItsShare},
		{"PreemptionResumesFromCheckpoint", preemptionResumesFromCheckpoint},
		{"StopUploadsAfterTheKill", twoNodeStopUploadsAfterTheKill},
		{"PendingReason", pendingReason},
	})
}

// TestOutages runs, one after the other, the tests that set a node DOWN,
// keep the executor away until Slurm forgets its jobs, or stop
// slurmctld, on a cluster of their own (outages), beside TestWholeNodes
// and the others: a node or a controller down would fail their jobs.
func TestOutages(t *testing.T) {
	t.Parallel()
	runOn(t, outages, []clusterTest{
		{"NodeFailure", nodeFailure},
		{"ExitAfterSlurmForgot", exitAfterSlurmForgot},
		{"ControllerDown", controllerStopped},
	})
}

// clusterTest is a subtest of TestWholeNodes or TestOutages.
type clusterTest struct {
	name string
	run  func(*testing.T, *slurmtest.Cluster)
}

// runOn runs tests one after the other as subtests of t, on the cluster l.
func runOn(t *testing.T, l *lazyCluster, tests []clusterTest) {
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, l.get(t)) })
	}
}
