package container_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/container"
	"qshare/executor/container/containertest"
	"qshare/executor/executortest"
	"qshare/trainingjob"
)

// newDocker returns an executor on this machine's Docker Engine over a
// data directory of its own, and the test image.
func newDocker(t *testing.T) (*container.Executor, string, string) {
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	dir := t.TempDir()
	e := openAt(t, dir, host)
	t.Cleanup(func() { closeClean(t, e, host, dir) })
	return e, img, dir
}

// openAt returns an executor over the data directory dir on the engine at
// host, which pulls nothing and gives no GPUs.
func openAt(t *testing.T, dir, host string) *container.Executor {
	t.Helper()
	e, err := container.New(context.Background(), container.Options{DataDir: dir, Host: host, Pull: container.PullNever, GPUs: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// closeClean closes e and fails t if containers of the data directory dir
// are left on the engine at host.
func closeClean(t *testing.T, e *container.Executor, host, dir string) {
	t.Helper()
	e.Close()
	if left := containertest.Leftovers(t, host, dir); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

func spec(id string, demand qshare.Capacity, payload map[string]any) executor.Spec {
	b, _ := json.Marshal(payload)
	return executor.Spec{JobID: "job-" + id, JobName: "train-" + id, AttemptID: "job-" + id + "-attempt-1", Attempt: 1,
		Queue: "q", Share: "team-a", Demand: demand, Payload: string(b)}
}

func waitExit(t *testing.T, e executor.Executor, id string) executor.Exit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	x, err := e.Wait(ctx, id)
	if err != nil {
		t.Fatalf("Wait(%s): %v", id, err)
	}
	return x
}

// TestContract runs SageMaker's container contract for real: the job's
// directories at /opt/ml, written by the job's user (nobody, as the server
// runs as root with no user given); the environment of the payload and
// SageMaker, nothing of the server's; the failure file's first line as
// the reason; the same checkpoint directory on the next attempt.
func TestContract(t *testing.T) {
	t.Parallel() // the variable below is the server's; no other test reads it
	e, img, dir := newDocker(t)
	os.Setenv("QSHARE_TEST_SERVER_SECRET", "must-not-leak")
	defer os.Unsetenv("QSHARE_TEST_SERVER_SECRET")
	p := map[string]any{
		"TrainingJobName": "train-contract",
		"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
			"ContainerArguments": []string{"-run=0s", "-exit=2", "-env", "-failure=AlgorithmError: lr too high",
				"-write=/opt/ml/model/model.bin,/opt/ml/checkpoints/ckpt,/opt/ml/output/data/out"}},
		"HyperParameters": map[string]string{"lr": "0.1", "epochs": "3"},
		"ResourceConfig":  map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1},
		"Environment":     map[string]string{"MY_SETTING": "a b=c"},
	}
	s := spec("contract", qshare.Capacity{"ml.m5.large": 1}, p)
	h := executortest.Start(t, e, s, 60*time.Second)
	x := waitExit(t, e, s.AttemptID)
	if x.ExitCode != 2 || x.Reason != "AlgorithmError: lr too high" {
		t.Errorf("exit = %+v, want code 2 with the failure file's first line as the reason", x)
	}
	env := executortest.ReadEnv(t, h.LogPath)
	executortest.CheckEnv(t, env, map[string]string{
		"MY_SETTING": "a b=c", "SM_HP_LR": "0.1", "SM_HP_EPOCHS": "3", "SM_CURRENT_HOST": "algo-1", "SM_HOSTS": `["algo-1"]`,
		"SM_MODEL_DIR": "/opt/ml/model", "SM_CHECKPOINT_DIR": "/opt/ml/checkpoints", "SM_INPUT_CONFIG_DIR": "/opt/ml/input/config",
		"TRAINING_JOB_NAME": trainingjob.AttemptName(s.JobName, s.JobID, 1), "QSHARE_JOB_ID": s.JobID, "SM_NUM_GPUS": "0", "CUDA_VISIBLE_DEVICES": "", "NVIDIA_VISIBLE_DEVICES": "void",
		"SM_CURRENT_INSTANCE_TYPE": "ml.m5.large", "QSHARE_TEST_SERVER_SECRET": "",
	})
	if env["TRAINING_JOB_ARN"] != trainingjob.AttemptARN("us-east-1", "000000000000", env["TRAINING_JOB_NAME"]) {
		t.Errorf("TRAINING_JOB_ARN = %q", env["TRAINING_JOB_ARN"])
	}
	job := filepath.Join(dir, "jobs", s.JobID)
	for _, f := range []string{"model/model.bin", "checkpoints/ckpt", "output/data/out"} {
		b, err := os.ReadFile(filepath.Join(job, f))
		if err != nil {
			t.Errorf("the job's %s is not in its directory on the host: %v", f, err)
			continue
		}
		if want := "65534:65534\n"; os.Geteuid() == 0 && string(b) != want {
			t.Errorf("%s was written as %q, want nobody (%q): a root server with no user runs containers as nobody", f, b, want)
		}
	}
	var rc struct {
		Current string   `json:"current_host"`
		Hosts   []string `json:"hosts"`
	}
	if b, err := os.ReadFile(filepath.Join(job, "input", "config", "hyperparameters.json")); err != nil || !strings.Contains(string(b), `"lr":"0.1"`) {
		t.Errorf("hyperparameters.json = %s, %v", b, err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "attempts", s.AttemptID, "resourceconfig-algo-1.json"))
	if json.Unmarshal(b, &rc); rc.Current != "algo-1" {
		t.Errorf("resourceconfig.json = %s", b)
	}
	// The next attempt finds the checkpoint.
	s2 := s
	s2.Attempt, s2.AttemptID = 2, s.JobID+"-attempt-2"
	p["AlgorithmSpecification"].(map[string]any)["ContainerArguments"] = []string{"-run=0s", "-write=/opt/ml/checkpoints/ckpt2"}
	b, _ = json.Marshal(p)
	s2.Payload = string(b)
	executortest.Start(t, e, s2, 60*time.Second)
	if x := waitExit(t, e, s2.AttemptID); !x.Succeeded() {
		t.Fatalf("attempt 2: %+v", x)
	}
	for _, f := range []string{"ckpt", "ckpt2"} {
		if _, err := os.Stat(filepath.Join(job, "checkpoints", f)); err != nil {
			t.Errorf("checkpoints/%s after attempt 2: %v", f, err)
		}
	}
}

// TestMultiInstance runs a job of two instances: algo-1 and algo-2 on a
// private network resolve each other by name, each sees itself as its
// current host, and a stop stops both.
func TestMultiInstance(t *testing.T) {
	t.Parallel()
	e, img, dir := newDocker(t)
	p := map[string]any{
		"TrainingJobName": "train-multi",
		"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
			"ContainerArguments": []string{"-run=1h", "-env", "-resolve=algo-1,algo-2"}},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 2},
	}
	s := spec("multi", qshare.Capacity{"ml.m5.large": 2}, p)
	executortest.Start(t, e, s, 60*time.Second)
	logOf := func(k int) string {
		rc, err := e.InstanceLogs(context.Background(), s.AttemptID, k, false)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	// Both run until stopped: each has resolved both names once it says
	// ready (or failed, and the attempt has ended).
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(logOf(0), "ready\n") || !strings.Contains(logOf(1), "ready\n") {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		_, err := e.Wait(ctx, s.AttemptID)
		cancel()
		if err == nil || time.Now().After(deadline) {
			break
		}
	}
	for k, host := range []string{"algo-1", "algo-2"} {
		b := logOf(k)
		if !strings.Contains(b, "SM_CURRENT_HOST="+host+"\x00") || !strings.Contains(b, `SM_HOSTS=["algo-1","algo-2"]`) {
			t.Errorf("instance %d's environment does not name it %s: %q", k, host, b)
		}
		for _, other := range []string{"algo-1", "algo-2"} {
			if !strings.Contains(b, other+" resolves to") {
				t.Errorf("%s did not resolve %s: %q", host, other, b)
			}
		}
		var rcf struct {
			Current string `json:"current_host"`
		}
		cb, _ := os.ReadFile(filepath.Join(dir, "attempts", s.AttemptID, "resourceconfig-"+host+".json"))
		if json.Unmarshal(cb, &rcf); rcf.Current != host {
			t.Errorf("%s's resourceconfig.json = %s", host, cb)
		}
	}
	if err := e.Stop(context.Background(), s.AttemptID, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, e, s.AttemptID); !x.Stopped || x.Signal != "SIGTERM" {
		t.Errorf("exit = %+v, want both stopped by SIGTERM", x)
	}
	if _, err := e.InstanceLogs(context.Background(), s.AttemptID, 2, false); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("InstanceLogs(2) of a 2-instance attempt = %v, want EINVALID", err)
	}
}

// TestNetworkIsolation: EnableNetworkIsolation, as on SageMaker. A job
// on the engine's default network reaches a listener on this machine by
// its default route's gateway (the control: where it does not, isolation
// cannot be told apart, and the test skips). With isolation, one host has
// the loopback interface alone, and two hosts reach each other by name on
// a network of their own, but not this machine by that address, nor, on
// Docker Engine, by their network's gateway address (its bridge has none:
// without inhibit_ipv4, both answered). Podman refuses the option; there
// the gateway address answers (docs/container.md says so).
func TestNetworkIsolation(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	networkIsolation(t, host, false)
}

// TestNetworkIsolationPodman runs where QSHARE_PODMAN_TESTS=1, as .ci/run
// sets (TestConformancePodman says why).
func TestNetworkIsolationPodman(t *testing.T) {
	if os.Getenv("QSHARE_PODMAN_TESTS") != "1" {
		t.Skip("set QSHARE_PODMAN_TESTS=1 to run it against Podman (.ci/run does)")
	}
	networkIsolation(t, containertest.Podman(t), true)
}

func networkIsolation(t *testing.T, host string, podman bool) {
	img := containertest.Image(t, host)
	dir := t.TempDir()
	e := openAt(t, dir, host)
	t.Cleanup(func() { closeClean(t, e, host, dir) })
	ln, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	port := ln.Addr().(*net.TCPAddr).Port
	// begin starts an attempt of n hosts; end waits for each host's dial
	// line, stops the attempt and returns the hosts' logs.
	begin := func(id string, n int, isolated bool, dial string, args ...string) executor.Spec {
		t.Helper()
		p := map[string]any{
			"TrainingJobName": "train-" + id,
			"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
				"ContainerArguments": append([]string{"-run=1h", "-ifaces", "-dial=" + dial}, args...)},
			"ResourceConfig":         map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": n},
			"EnableNetworkIsolation": isolated,
		}
		s := spec(id, qshare.Capacity{"ml.m5.large": int64(n)}, p)
		executortest.Start(t, e, s, 60*time.Second)
		return s
	}
	end := func(s executor.Spec) []string {
		t.Helper()
		logs := make([]string, s.Demand["ml.m5.large"])
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(100 * time.Millisecond) {
			done := 0
			for k := range logs {
				rc, err := e.InstanceLogs(context.Background(), s.AttemptID, k, false)
				if err != nil {
					t.Fatal(err)
				}
				b, _ := io.ReadAll(rc)
				rc.Close()
				if logs[k] = string(b); strings.Contains(logs[k], "dial ") {
					done++
				}
			}
			if done == len(logs) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no dial line from every host within 60 s: %q", s.JobName, logs)
			}
		}
		if err := e.Stop(context.Background(), s.AttemptID, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
		waitExit(t, e, s.AttemptID)
		return logs
	}
	control := end(begin("netopen", 1, false, fmt.Sprintf("gateway:%d", port)))[0]
	var gw string
	if _, err := fmt.Sscanf(control[strings.Index(control, "dial "):], "dial %s", &gw); err != nil || !strings.Contains(control, ": ok\n") {
		t.Skipf("a container on the engine's default network does not reach this machine at its gateway, so isolation cannot be told apart: %q", control)
	}
	gw = strings.TrimSuffix(gw, ":")
	// An unreachable address takes the job's whole dial timeout (2 s), and
	// a lookup of a host not started yet 5 s (docs/container.md): the
	// isolated attempts run side by side.
	one := begin("netnone", 1, true, gw)
	peers := begin("netpeers", 2, true, gw, "-resolve=algo-1,algo-2")
	var gateway executor.Spec
	if !podman {
		gateway = begin("netgateway", 2, true, fmt.Sprintf("gateway:%d", port))
	}
	if l := end(one)[0]; !strings.Contains(l, "interfaces: lo\n") || strings.Contains(l, ": ok\n") {
		t.Errorf("one isolated host: %q, want the loopback interface alone and %s unreachable", l, gw)
	}
	for k, l := range end(peers) {
		if !strings.Contains(l, "algo-1 resolves to") || !strings.Contains(l, "algo-2 resolves to") || strings.Contains(l, ": ok\n") {
			t.Errorf("isolated host %d of 2: %q, want both hosts resolved and %s unreachable", k, l, gw)
		}
	}
	if podman {
		return
	}
	for k, l := range end(gateway) {
		if strings.Contains(l, ": ok\n") {
			t.Errorf("isolated host %d of 2 reaches its network's gateway: %q", k, l)
		}
	}
}

// TestMultiInstanceFailure: when one host of several fails, the others
// are ended too, and the attempt ends as the failed host did.
func TestMultiInstanceFailure(t *testing.T) {
	t.Parallel()
	e, img, _ := newDocker(t)
	p := map[string]any{
		"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
			"ContainerArguments": []string{"-run=1h", "-failon=algo-2:9"}},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 3},
	}
	s := spec("multifail", qshare.Capacity{"ml.m5.large": 3}, p)
	executortest.Start(t, e, s, 60*time.Second)
	if x := waitExit(t, e, s.AttemptID); x.ExitCode != 9 || x.Reason != "Essential process exited with code 9" || x.Stopped {
		t.Errorf("exit = %+v, want algo-2's code 9", x)
	}
}

// TestImageNotFound: an image the engine lacks, with --pull never, fails
// the start in SageMaker's words, as a client error (not a lack of
// capacity), and leaves nothing behind.
func TestImageNotFound(t *testing.T) {
	t.Parallel()
	e, _, _ := newDocker(t)
	p := map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": "localhost/qshare-no-such-image:1"},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	s := spec("noimage", qshare.Capacity{"ml.m5.large": 1}, p)
	_, err := e.Start(context.Background(), s)
	if err == nil || !strings.Contains(err.Error(), "CannotStartContainerError: ClientError: image not found") {
		t.Fatalf("Start with a missing image = %v, want CannotStartContainerError: ClientError: image not found", err)
	}
	if qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("error code %v, want EINVALID", qshare.ErrorCodeOf(err))
	}
}

// TestSweep: a container that no job claims after a restart is removed by
// Sweep; one that a job claims is kept.
func TestSweep(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	dir := t.TempDir()
	newExec := func() *container.Executor { return openAt(t, dir, host) }
	e1 := newExec()
	payload := func() map[string]any {
		return map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"}, "ContainerArguments": []string{"-run=1h"}},
			"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	}
	orphan := spec("orphan", qshare.Capacity{"ml.m5.large": 1}, payload())
	kept := spec("kept", qshare.Capacity{"ml.m5.large": 1}, payload())
	executortest.Start(t, e1, orphan, 60*time.Second)
	executortest.Start(t, e1, kept, 60*time.Second)
	e1.Close()
	e2 := newExec()
	defer e2.Close()
	swept, err := e2.Sweep(context.Background(), map[string]bool{kept.AttemptID: true})
	if err != nil || len(swept) != 1 || swept[0] != orphan.AttemptID {
		t.Fatalf("Sweep = %v, %v; want [%s]", swept, err, orphan.AttemptID)
	}
	if r, err := e2.Recover(context.Background(), executor.Handle{AttemptID: orphan.AttemptID}); err != nil || r == executor.Running {
		t.Errorf("Recover of a swept attempt = %v, %v; want it ended", r, err)
	}
	if r, err := e2.Recover(context.Background(), executor.Handle{AttemptID: kept.AttemptID}); err != nil || r != executor.Running {
		t.Fatalf("Recover(kept) = %v, %v; want Running", r, err)
	}
	if err := e2.Stop(context.Background(), kept.AttemptID, 10*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	waitExit(t, e2, kept.AttemptID)
	if left := containertest.Leftovers(t, host, dir); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// TestPullInBackground: an image the engine lacks is pulled after Start
// returns, with the pull as the attempt's PendingReason; a stop cancels
// the pull, and a pull that fails ends the attempt with SageMaker's reason
// (not a start error, which the daemon would take for a lack of capacity).
func TestPullInBackground(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	dir := t.TempDir()
	e, err := container.New(context.Background(), container.Options{DataDir: dir, Host: host, Pull: container.PullMissing, GPUs: []string{"none"}})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// A registry that never answers: the engine's pull hangs.
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() }))
	defer hang.Close()
	defer hang.CloseClientConnections()
	img := strings.TrimPrefix(hang.URL, "http://127.0.0.1") // :PORT
	payload := func(img string) map[string]any {
		return map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img},
			"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	}
	slow := spec("slowpull", qshare.Capacity{"ml.m5.large": 1}, payload("localhost"+img+"/qshare/none:1"))
	executortest.Start(t, e, slow, 30*time.Second)
	if r := e.PendingReason(slow.AttemptID); !strings.HasPrefix(r, "Pulling image localhost") {
		t.Errorf("PendingReason while the image is pulled = %q", r)
	}
	if err := e.Stop(context.Background(), slow.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	if x := waitExit(t, e, slow.AttemptID); !x.Stopped || x.Reason != "Stopped before its containers started" {
		t.Errorf("exit of an attempt stopped while its image is pulled = %+v", x)
	}
	if r := e.PendingReason(slow.AttemptID); r != "" {
		t.Errorf("PendingReason after the end = %q", r)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "attempts", slow.AttemptID, "pull.log")); err != nil || !strings.Contains(string(b), " Pulling image localhost") {
		t.Errorf("pull.log = %q, %v; want the pull's progress", b, err)
	}

	refused := spec("refused", qshare.Capacity{"ml.m5.large": 1}, payload("localhost:1/qshare/none:1"))
	executortest.Start(t, e, refused, 30*time.Second)
	x := waitExit(t, e, refused.AttemptID)
	if x.Stopped || x.Succeeded() || !strings.HasPrefix(x.Reason, "CannotStartContainerError: ClientError: image not found: localhost:1/qshare/none:1") {
		t.Errorf("exit of an attempt whose pull failed = %+v", x)
	}
	if left := containertest.Leftovers(t, host, dir); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// engineProxy serves, on a Unix socket of its own, the real engine at
// host behind intercept, which answers a request itself (true) or lets it
// through (false); it returns the socket's address for Options.Host.
func engineProxy(t *testing.T, host string, intercept func(w http.ResponseWriter, r *http.Request) bool) string {
	engine := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) { r.Out.URL.Scheme, r.Out.URL.Host = "http", "docker" },
		Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", strings.TrimPrefix(host, "unix://"))
		}},
		FlushInterval: -1, // waits and events stream
	}
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	proxy := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !intercept(w, r) {
			engine.ServeHTTP(w, r)
		}
	})}
	go proxy.Serve(l)
	t.Cleanup(func() { proxy.Close() })
	return "unix://" + sock
}

// TestStartAgainAfterEngineFault: when the engine's own step of a
// container's start fails (Docker's network hook, as seen under load),
// the executor makes the attempt's containers again and starts them,
// instead of failing the attempt; an error of the image's is not
// retried. The engine is the real one, behind a proxy that fails the
// first start with the error Docker gave.
func TestStartAgainAfterEngineFault(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	const hookErr = `failed to create shim task: OCI runtime create failed: runc create failed: unable to start container process: error during container init: error running hook #0: error running hook: exit status 1, stdout: , stderr: time="2026-12-05T11:37:29Z" level=fatal msg="no such file or directory": unknown`
	var starts atomic.Int32
	sock := engineProxy(t, host, func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == http.MethodPost && strings.HasSuffix(r.URL.Path, "/start") && starts.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusInternalServerError)
			json.NewEncoder(w).Encode(map[string]string{"message": hookErr})
			return true
		}
		return false
	})

	dir := t.TempDir()
	e := openAt(t, dir, sock)
	defer closeClean(t, e, host, dir)
	p := map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
		"ContainerArguments": []string{"-run=0s", "-output=started after all"}},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	s := spec("enginefault", qshare.Capacity{"ml.m5.large": 1}, p)
	h := executortest.Start(t, e, s, 60*time.Second)
	if x := waitExit(t, e, s.AttemptID); !x.Succeeded() {
		t.Fatalf("exit of an attempt whose first start the engine failed = %+v, want it started again and succeeded", x)
	}
	if n := starts.Load(); n != 2 {
		t.Errorf("%d starts, want 2: the failed one and the one that ran", n)
	}
	if b, _ := os.ReadFile(h.LogPath); !strings.Contains(string(b), "started after all") {
		t.Errorf("log = %q", b)
	}

	// An entrypoint that is not in the image is the image's error: one
	// start, and the attempt fails (Docker 20.10 reports exit code 127).
	starts.Store(1)
	p["AlgorithmSpecification"].(map[string]any)["ContainerEntrypoint"] = []string{"/no-such-program"}
	bad := spec("noentry", qshare.Capacity{"ml.m5.large": 1}, p)
	if _, err := e.Start(context.Background(), bad); err == nil {
		x := waitExit(t, e, bad.AttemptID)
		if x.Succeeded() || (x.ExitCode != 127 && !strings.Contains(x.Reason, "CannotStartContainerError")) {
			t.Errorf("exit of an attempt whose entrypoint is missing = %+v", x)
		}
	} else if !strings.Contains(err.Error(), "CannotStartContainerError") || !strings.Contains(err.Error(), "no-such-program") {
		t.Errorf("Start with a missing entrypoint: %v", err)
	}
	if n := starts.Load(); n != 2 {
		t.Errorf("%d starts of the attempt with a missing entrypoint, want 1", n-1)
	}
}

// TestCloseWhileLearningTheEnd: an executor closed while it asks the
// engine how an attempt ended (the server stops just as the job exits)
// records nothing, and the next executor learns the real end. Before, the
// cancelled inspect read as containers gone and the attempt was recorded
// Lost, as CI saw on Podman. The engine is the real one, behind a proxy
// that holds the inspect of an ended container until its caller gives up.
func TestCloseWhileLearningTheEnd(t *testing.T) {
	t.Parallel()
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	var hold atomic.Bool
	held := make(chan struct{}, 16)
	sock := engineProxy(t, host, func(w http.ResponseWriter, r *http.Request) bool {
		if hold.Load() && r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/containers/") && strings.HasSuffix(r.URL.Path, "/json") {
			held <- struct{}{}
			<-r.Context().Done()
			return true
		}
		return false
	})

	dir := t.TempDir()
	e1 := openAt(t, dir, sock)
	p := map[string]any{"AlgorithmSpecification": map[string]any{"TrainingImage": img, "ContainerEntrypoint": []string{"/job"},
		"ContainerArguments": []string{"-run=300ms", "-exit=4"}},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1}}
	s := spec("closeatend", qshare.Capacity{"ml.m5.large": 1}, p)
	h := executortest.Start(t, e1, s, 60*time.Second)
	hold.Store(true)
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the executor never asked how the attempt ended")
	}
	e1.Close()

	e2 := openAt(t, dir, host)
	defer closeClean(t, e2, host, dir)
	if r, err := e2.Recover(context.Background(), h); err != nil || r != executor.Exited {
		t.Fatalf("Recover = %v, %v; want Exited", r, err)
	}
	if x := waitExit(t, e2, s.AttemptID); x.ExitCode != 4 || x.Lost {
		t.Errorf("exit learned after the close = %+v, want code 4", x)
	}
}
