package process

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/executor/executortest"
	"qshare/internal/python"
)

// example returns the absolute path of a script under examples/training.
func example(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", "training", name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); err != nil {
		t.Fatal(err)
	}
	return p
}

// waitForLog polls an attempt's log until it contains s.
func waitForLog(t testing.TB, path, s string, d time.Duration) string {
	t.Helper()
	return executortest.WaitForLog(t, path, s, d)
}

// preemptAndResume runs attempt 1 of a job until its log shows progress,
// stops it as a preemption would, then runs attempt 2 to the end. It returns
// both attempts' logs.
func preemptAndResume(t *testing.T, e *Executor, job string, demand qshare.Capacity, payload, progress string, limit time.Duration) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	s1 := spec(job, 1, payload)
	s1.Demand = demand
	h1, err := e.Start(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, h1.LogPath, progress, limit)
	if err := e.Stop(ctx, s1.AttemptID, 0); err != nil { // the job's QSHARE_STOP_GRACE applies
		t.Fatal(err)
	}
	x1, err := e.Wait(ctx, s1.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if !x1.Stopped || x1.ExitCode != 0 || x1.Signal != "" {
		b, _ := os.ReadFile(h1.LogPath)
		t.Fatalf("attempt 1: %+v; want stopped, exit code 0 (it saved a checkpoint and exited); log:\n%s", x1, b)
	}
	s2 := spec(job, 2, payload)
	s2.Demand = demand
	h2, err := e.Start(ctx, s2)
	if err != nil {
		t.Fatal(err)
	}
	x2, err := e.Wait(ctx, s2.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	log1, _ := os.ReadFile(h1.LogPath)
	log2, _ := os.ReadFile(h2.LogPath)
	if !x2.Succeeded() {
		t.Fatalf("attempt 2: %+v; log:\n%s", x2, log2)
	}
	return string(log1), string(log2)
}

func TestExampleShellCheckpointsAndResumes(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, t.TempDir(), nil)
	defer e.Close()
	p := payloadOf([]string{example(t, "train.sh")}, func(p map[string]any) {
		p["HyperParameters"] = map[string]string{"steps": "40", "step_seconds": "0.05"}
		p["Environment"] = map[string]string{"QSHARE_STOP_GRACE": "20"}
	})
	log1, log2 := preemptAndResume(t, e, "shell-train", qshare.Capacity{"ml.m5.large": 1}, p, "step 10", time.Minute)
	if !strings.Contains(log1, "starting from scratch") || !strings.Contains(log1, "checkpoint saved") {
		t.Errorf("attempt 1 log:\n%s", log1)
	}
	if !strings.Contains(log2, "resuming from step") || !strings.Contains(log2, "done: 40 steps") {
		t.Errorf("attempt 2 log:\n%s", log2)
	}
	b, _ := os.ReadFile(filepath.Join(e.o.DataDir, "jobs/shell-train/model/model.txt"))
	if string(b) != "trained 40 steps\n" {
		t.Errorf("model.txt = %q", b)
	}
}

// TestExamplePyTorch runs examples/training/train.py: preempted (SIGTERM,
// checkpoint), then resumed. It needs python3 with torch, and skips without.
// On a host with NVIDIA GPUs it also checks that the job sees exactly the
// one GPU of an ml.g5.xlarge, the one the executor assigned.
func TestExamplePyTorch(t *testing.T) {
	py, err := python.Program("python3")
	if err != nil {
		t.Skip("no python3")
	}
	// Without torch, at least the script must compile.
	if out, err := exec.Command(py, "-c", "import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])", example(t, "train.py")).CombinedOutput(); err != nil {
		t.Fatalf("train.py does not compile: %v\n%s", err, out)
	}
	if _, ok := python.With("torch"); !ok {
		t.Skip("python3 with torch is not installed")
	}
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.GPUs = nil })
	defer e.Close()
	p := payloadOf([]string{py, example(t, "train.py")}, func(p map[string]any) {
		p["HyperParameters"] = map[string]string{"steps": "1500", "step_seconds": "0.002"}
		p["Environment"] = map[string]string{"QSHARE_STOP_GRACE": "60"}
	})
	log1, log2 := preemptAndResume(t, e, "torch-train", qshare.Capacity{"ml.g5.xlarge": 1}, p, "step 200 ", 5*time.Minute)
	t.Logf("attempt 1:\n%s\nattempt 2:\n%s", log1, log2)
	if !strings.Contains(log1, "checkpoint saved") || !strings.Contains(log2, "resumed from step") || !strings.Contains(log2, "done at step 1500") {
		t.Errorf("no checkpoint-and-resume in the logs")
	}
	var info struct {
		Device  string `json:"device"`
		Visible string `json:"CUDA_VISIBLE_DEVICES"`
		Count   int    `json:"cuda_device_count"`
		UUID    string `json:"gpu_uuid"`
	}
	line := log2[strings.Index(log2, "qshare-job ")+len("qshare-job "):]
	line = line[:strings.IndexByte(line, '\n')]
	if err := json.Unmarshal([]byte(line), &info); err != nil {
		t.Fatal(err)
	}
	gs := e.GPUs()
	if len(gs) == 0 {
		if info.Device != "cpu" {
			t.Errorf("no GPU assigned, yet the job ran on %s", info.Device)
		}
		return
	}
	if info.Device != "cuda" || info.Count != 1 {
		t.Errorf("the job saw %d CUDA devices on %q; want exactly its 1 GPU", info.Count, info.Device)
	}
	if info.Visible != gs[0].UUID || (info.UUID != "" && info.UUID != gs[0].UUID) {
		t.Errorf("the job saw GPU %q (CUDA_VISIBLE_DEVICES=%q); the executor assigned %s", info.UUID, info.Visible, gs[0].UUID)
	}
}
