package container_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"qshare/executor"
	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/executor/executortest"
	"qshare/internal/longtest"
)

func TestMain(m *testing.M) {
	// The tests mostly wait on the engine, each over a data directory of
	// its own: more of them at once than go test's default of one per
	// core, but not so many that the engine, loaded with the starts of
	// eight at once, took more than the conformance suite's second to
	// learn that a followed attempt had ended (CI on the slower kind of
	// machine, 6 December 2026).
	longtest.MinParallel(4)
	code := m.Run()
	containertest.StopPodman()
	os.Exit(code)
}

// harness describes the container executor on the engine at host to the
// conformance suite; every data directory it made is checked, at the end,
// to have left no container behind.
func harness(t *testing.T, host string) executortest.Harness {
	img := containertest.Image(t, host)
	var mu sync.Mutex
	var dirs []string
	t.Cleanup(func() {
		mu.Lock()
		defer mu.Unlock()
		for _, d := range dirs {
			if left := containertest.Leftovers(t, host, d); len(left) > 0 {
				t.Errorf("containers left behind: %v", left)
			}
		}
	})
	return executortest.Harness{
		New: func(t testing.TB, dir string) executor.Executor {
			mu.Lock()
			dirs = append(dirs, dir)
			mu.Unlock()
			e, err := container.New(context.Background(), container.Options{DataDir: dir, Host: host, Pull: container.PullNever, GPUs: []string{"none"}})
			if err != nil {
				t.Fatal(err)
			}
			return e
		},
		Payload:          func(t testing.TB, j executortest.Job) string { return containertest.Payload(img, j) },
		NetworkIsolation: true,
		Observed: func(t testing.TB, s executor.Spec, h executor.Handle) map[string]string {
			return executortest.ReadEnv(t, h.LogPath)
		},
		Ready: func(t testing.TB, s executor.Spec, h executor.Handle) {
			deadline := time.Now().Add(60 * time.Second)
			for time.Now().Before(deadline) {
				if b, err := os.ReadFile(h.LogPath); err == nil && strings.Contains(string(b), "ready\n") {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
			t.Fatalf("attempt %s did not say ready: %s", s.AttemptID, filepath.Base(h.LogPath))
		},
		Slack:     60 * time.Second,
		Durable:   true,
		KeepsLogs: true,
	}
}

// TestConformanceDocker runs the conformance suite against Docker Engine.
// It is in the long set (QSHARE_LONG=1, .ci/run's long step, beside the
// same suite against Podman): its 80 containers cost 42 s of CPU on the
// slower kind of 2-core machine (7 December 2026), where the README's
// command was over its five minutes. In that command, this package's own
// tests run the container executor on Docker Engine (the training
// contract, several instances, network isolation, a sweep, an engine
// fault, a restart while an attempt ends, the data contract and a stop's
// upload), and test/processe2e runs container jobs through the server,
// with a kill -9 of the server and the worked example's checkpoint and
// resume.
func TestConformanceDocker(t *testing.T) {
	longtest.Only(t, "the conformance suite's 80 containers; in the README's command this package's other tests run the container executor on Docker Engine")
	t.Parallel() // beside TestRegistryPullDocker, which mostly waits on its throttled registry
	executortest.Run(t, harness(t, containertest.Docker(t)))
}

// TestConformancePodman takes a minute (Podman starts containers more
// slowly than Docker Engine): it runs where QSHARE_PODMAN_TESTS=1, as
// .ci/run sets.
func TestConformancePodman(t *testing.T) {
	if os.Getenv("QSHARE_PODMAN_TESTS") != "1" {
		t.Skip("set QSHARE_PODMAN_TESTS=1 to run the conformance suite against Podman (about a minute; .ci/run does)")
	}
	executortest.Run(t, harness(t, containertest.Podman(t)))
}
