package kubernetes

import (
	"context"
	"encoding/json"
	"flag"
	"log/slog"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"qshare/data"
	"qshare/executor"
	"qshare/executor/executortest"
	"qshare/executor/kubernetes/kubetest"
	"qshare/internal/longtest"
)

// shared is the package's one control plane and played kubelet, started
// at the first use, with nodes of two types: two m5.large (no GPUs) and
// two g5.xlarge (1 GPU each).
var shared = kubetest.Shared{Setup: func(ctx context.Context, c *kubetest.Cluster) error {
	for _, n := range []struct {
		name, typ string
		gpus      int
	}{{"m5-a", "m5.large", 0}, {"m5-b", "m5.large", 0}, {"g5-a", "g5.xlarge", 1}, {"g5-b", "g5.xlarge", 1}} {
		if err := c.Kubelet.AddNode(ctx, n.name, n.typ, n.gpus); err != nil {
			return err
		}
	}
	return nil
}}

// TestMain: the tests that call t.Parallel (all but the unit tests) run
// together, eight at once (longtest.MinParallel), since they mostly
// wait on the API server and the played kubelet: each has a namespace of
// its own (newExecutor), and those that need nodes of their own add them
// with an instance type no other test uses (addNodes), or start a
// control plane of their own (TestAPIServerTrouble). Those that check a start
// timeout run side by side too: their timeouts (3 s and more) leave the
// pods that must run by then seconds to spare under the others' load.
func TestMain(m *testing.M) {
	// This binary stands for qshare in the pods: its init container's
	// program (`qshare data stage`) and the training container's data
	// wrapper (data_test.go).
	data.MaybeRun()
	if len(os.Args) > 2 && os.Args[1] == "data" && os.Args[2] == "stage" {
		os.Exit(StageMain(os.Args[3:], os.Stderr))
	}
	longtest.MinParallel(8) // parses the flags
	if f := flag.Lookup("test.run"); f != nil && f.Value.String() == "" {
		trouble.Prestart()
	}
	code := m.Run()
	shared.Close()
	trouble.Close()
	os.Exit(code)
}

type testCluster struct{ *kubetest.Cluster }

// trouble is TestAPIServerTrouble's control plane and played kubelet,
// with no nodes: TestMain starts it in the background when no -run picks
// tests, so that its start does not wait for the test's turn.
var trouble kubetest.Shared

func getCluster(t testing.TB) testCluster { return testCluster{shared.Get(t)} }

// namespace makes a namespace for a test directory: each executor of the
// conformance suite has its own, and a restart (New over the same dir)
// finds its attempts there.
func (c testCluster) namespace(t testing.TB, dir string) string {
	t.Helper()
	ns := "t-" + hash8(dir)
	_, err := c.Client().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return ns
}

// newExecutor returns an executor in the namespace of dir (unless o
// names one), over o.Client or else the cluster's client.
func (c testCluster) newExecutor(t testing.TB, dir string, o Options) *Executor {
	t.Helper()
	if o.Client == nil {
		o.Client = c.Client()
	}
	if o.Namespace == "" {
		o.Namespace = c.namespace(t, dir)
	}
	if o.Log == nil {
		o.Log = logOnFailure(t)
	}
	e, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func payload(p kubetest.Program, typ string, count int, env map[string]string) string {
	return p.Payload(typ, count, env)
}

func programOf(j executortest.Job) kubetest.Program {
	p := kubetest.Program{Run: j.Run, Exit: j.ExitCode, Checkpoint: j.CheckpointTime, Output: j.Output, Checkpoints: j.CheckpointConfig}
	switch j.OnStop {
	case executortest.StopCheckpoint:
		p.OnStop = "checkpoint"
	case executortest.StopIgnore:
		p.OnStop = "ignore"
	}
	return p
}

func TestConformance(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	executortest.Run(t, executortest.Harness{
		New: func(t testing.TB, dir string) executor.Executor { return c.newExecutor(t, dir, Options{}) },
		Payload: func(t testing.TB, j executortest.Job) string {
			return payload(programOf(j), "ml.m5.large", 1, j.Env)
		},
		Observed: func(t testing.TB, s executor.Spec, h executor.Handle) map[string]string {
			var st struct{ Namespace, Pod string }
			if err := json.Unmarshal(h.State, &st); err != nil {
				t.Fatal(err)
			}
			return c.Kubelet.Env(st.Namespace, st.Pod)
		},
		Slack:               30 * time.Second,
		Durable:             true,
		KeepsLogs:           true,
		CheckpointOnRequest: true,
	})
}

// logOnFailure is a logger for an executor of t's: what it logs goes to a
// file, shown only where t fails (a goroutine may log after t has ended,
// where t.Log would panic).
func logOnFailure(t testing.TB) *slog.Logger {
	f, err := os.CreateTemp(t.TempDir(), "executor-*.log")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		defer f.Close()
		if t.Failed() {
			b, _ := os.ReadFile(f.Name())
			t.Logf("the executor's log:\n%s", b)
		}
	})
	return slog.New(slog.NewTextHandler(f, &slog.HandlerOptions{Level: slog.LevelDebug}))
}
