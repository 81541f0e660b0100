package container_test

import (
	"context"
	"os"
	"testing"
	"time"

	"qshare"
	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/executor/executortest"
)

// TestEngineDown kills the engine (a Podman service of the test's own)
// while an attempt runs: Health says so, the container runs on (conmon's
// child), and once the service is back the executor learns the attempt's
// end and Health clears. It runs where QSHARE_PODMAN_TESTS=1.
func TestEngineDown(t *testing.T) {
	if os.Getenv("QSHARE_PODMAN_TESTS") != "1" {
		t.Skip("set QSHARE_PODMAN_TESTS=1 to run the engine-down test against a Podman service of its own (.ci/run does)")
	}
	svc := containertest.PodmanServiceT(t)
	img := containertest.Image(t, svc.Host)
	dir := t.TempDir()
	e, err := container.New(context.Background(), container.Options{DataDir: dir, Host: svc.Host, Pull: container.PullNever, GPUs: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	p := map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"}, "ContainerArguments": []string{"-run=6s", "-exit=4"}},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	s := spec("down", qshare.Capacity{"ml.m5.large": 1}, p)
	executortest.Start(t, e, s, 60*time.Second)
	svc.Kill()
	deadline := time.Now().Add(30 * time.Second)
	for e.Health() == "" {
		if time.Now().After(deadline) {
			t.Fatal("Health() is still empty 30s after the engine died")
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("Health while the engine is down: %s", e.Health())
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	if _, err := e.Wait(ctx, s.AttemptID); err == nil {
		t.Errorf("Wait returned while the engine was down and the job runs")
	}
	cancel()
	if err := svc.Start(); err != nil {
		t.Fatal(err)
	}
	x := waitExit(t, e, s.AttemptID)
	if x.ExitCode != 4 || x.Lost {
		t.Errorf("exit after the engine came back = %+v, want code 4", x)
	}
	if h := e.Health(); h != "" {
		t.Errorf("Health() = %q once the engine is back", h)
	}
	if left := containertest.Leftovers(t, svc.Host, dir); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}
