package process

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"qshare/internal/longtest"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/executortest"
)

func TestMain(m *testing.M) {
	MaybeSupervise()
	maybeRacer()
	if dir := os.Getenv(testServerEnv); dir != "" {
		os.Exit(testServer(dir))
	}
	// Supervisors are this test binary; under -race each would otherwise
	// sleep a second at exit.
	os.Setenv("GORACE", "atexit_sleep_ms=0")
	// The long tests mostly wait on their jobs, each over a data
	// directory of its own: more at once than one per core.
	longtest.MinParallel(6)
	os.Exit(m.Run())
}

// payloadOf renders a payload that runs cmd (with sh -c when it is a string).
func payloadOf(cmd any, mutate func(map[string]any)) string {
	var ep []string
	switch c := cmd.(type) {
	case string:
		ep = []string{"/bin/sh", "-c", c}
	case []string:
		ep = c
	}
	p := map[string]any{
		"TrainingJobName": "t",
		"AlgorithmSpecification": map[string]any{
			"TrainingImage":       "recorded-not-pulled:latest",
			"ContainerEntrypoint": ep,
		},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.large", "InstanceCount": 1},
		"Environment":    map[string]string{},
	}
	if mutate != nil {
		mutate(p)
	}
	b, _ := json.Marshal(p)
	return string(b)
}

func secs(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 3, 64) }

func newExecutor(t testing.TB, dir string, mut func(*Options)) *Executor {
	t.Helper()
	o := Options{DataDir: dir, GPUs: []string{"none"}, PollInterval: 20 * time.Millisecond}
	if mut != nil {
		mut(&o)
	}
	e, err := New(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func TestConformance(t *testing.T) {
	t.Parallel()
	executortest.Run(t, executortest.Harness{
		New: func(t testing.TB, dir string) executor.Executor { return newExecutor(t, dir, nil) },
		Payload: func(t testing.TB, j executortest.Job) string {
			return payloadOf(executortest.Script(j), func(p map[string]any) {
				env := map[string]string{}
				for k, v := range j.Env {
					env[k] = v
				}
				p["Environment"] = env
			})
		},
		Ready: func(t testing.TB, s executor.Spec, h executor.Handle) {
			waitForLog(t, h.LogPath, "ready\n", time.Minute)
		},
		Observed: func(t testing.TB, s executor.Spec, h executor.Handle) map[string]string {
			return executortest.ReadEnv(t, h.LogPath)
		},
		Durable:   true,
		KeepsLogs: true,
	})
}

func run(t *testing.T, e *Executor, s executor.Spec) (executor.Handle, executor.Exit) {
	t.Helper()
	h, err := e.Start(context.Background(), s)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	x, err := e.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	return h, x
}

// stopAndWait stops attempt id with the grace given, then waits for its end
// for at most 30 s and returns what Wait returns.
func stopAndWait(t testing.TB, e *Executor, id string, grace time.Duration) (executor.Exit, error) {
	t.Helper()
	if err := e.Stop(context.Background(), id, grace); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return e.Wait(ctx, id)
}

// stopLost stops attempt id, whose supervisor is gone, and checks that it
// ends stopped, its reason Lost, and that its job, which ran on without
// the supervisor, is gone too.
func stopLost(t testing.TB, e *Executor, id string, job identity) {
	t.Helper()
	if x, err := stopAndWait(t, e, id, time.Second); err != nil || !x.Stopped || !strings.HasPrefix(x.Reason, "Lost") {
		t.Errorf("exit %+v, %v; want stopped, reason Lost", x, err)
	}
	if job.alive() {
		t.Errorf("the job survived the stop")
	}
}

func spec(job string, n int, payload string) executor.Spec {
	return executor.Spec{JobID: job, JobName: job, AttemptID: fmt.Sprintf("%s-a%d", job, n), Attempt: n, Queue: "q", Share: "s",
		Demand: qshare.Capacity{"ml.m5.large": 1}, Payload: payload}
}

func TestValidate(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	cases := map[string]struct {
		payload string
		words   string
	}{
		"no entrypoint":   {payloadOf([]string{}, nil), "ContainerEntrypoint"},
		"checkpoint ../":  {payloadOf("true", func(p map[string]any) { p["CheckpointConfig"] = map[string]string{"LocalPath": "../../etc"} }), "LocalPath"},
		"checkpoint root": {payloadOf("true", func(p map[string]any) { p["CheckpointConfig"] = map[string]string{"LocalPath": "/opt/ml"} }), "LocalPath"},
		"relative file channel": {payloadOf("true", func(p map[string]any) {
			p["InputDataConfig"] = []any{map[string]any{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]string{"S3Uri": "file:data"}}}}
		}), "file://"},
		"bad grace":    {payloadOf("true", func(p map[string]any) { p["Environment"] = map[string]string{EnvStopGrace: "soon"} }), EnvStopGrace},
		"bad env name": {payloadOf("true", func(p map[string]any) { p["Environment"] = map[string]string{"A=B": "x"} }), "A=B"},
	}
	for name, c := range cases {
		err := e.Validate(c.payload, qshare.Capacity{"ml.m5.large": 1})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), c.words) {
			t.Errorf("%s: Validate = %v; want EINVALID mentioning %q", name, err, c.words)
		}
		if _, err := e.Start(context.Background(), spec("v", 1, c.payload)); qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("%s: Start = %v; want EINVALID", name, err)
		}
	}
	for _, id := range []string{"", "..", "a/b"} {
		s := spec("ok", 1, payloadOf("true", nil))
		s.JobID = id
		if _, err := e.Start(context.Background(), s); qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("Start with job ID %q = %v; want EINVALID", id, err)
		}
	}
}

func TestMissingBinary(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	for i, cmd := range [][]string{{"no-such-program-qshare"}, {"/nonexistent/bin/x"}, {"./relative-missing"}} {
		_, x := run(t, e, spec("missing"+strconv.Itoa(i), 1, payloadOf(cmd, nil)))
		if x.ExitCode != 127 || !strings.Contains(x.Reason, "CannotStartError") || !strings.Contains(x.Reason, cmd[0]) {
			t.Errorf("%v: exit %+v; want code 127 and a reason naming the program", cmd, x)
		}
	}
	// Not executable.
	dir := t.TempDir()
	p := filepath.Join(dir, "script.sh")
	os.WriteFile(p, []byte("#!/bin/sh\ntrue\n"), 0o644)
	_, x := run(t, e, spec("noexec", 1, payloadOf([]string{p}, nil)))
	if x.ExitCode != 127 || !strings.Contains(x.Reason, "not executable") {
		t.Errorf("non-executable: %+v", x)
	}
}

func TestJobEnvironmentAndFiles(t *testing.T) {
	data := t.TempDir()
	trainDir := t.TempDir()
	ep, _ := s3Store(t, map[string]map[string]string{"bucket": {"x/f.csv": "remote"}, "ckpt": nil})
	e := newExecutor(t, data, func(o *Options) {
		o.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=/home/x", "CUDA_VISIBLE_DEVICES=0,1"}
		o.S3 = ep
	})
	sc := `env -0 > "$SM_OUTPUT_DATA_DIR/env"
pwd > "$SM_OUTPUT_DATA_DIR/pwd"
cut -d' ' -f5 /proc/$$/stat > "$SM_OUTPUT_DATA_DIR/pgid"; cut -d' ' -f4 /proc/$$/stat > "$SM_OUTPUT_DATA_DIR/ppid"
echo "hello stdout"; echo "hello stderr" >&2`
	p := payloadOf(sc, func(p map[string]any) {
		p["HyperParameters"] = map[string]string{"lr": "0.01", "epochs": "10", "model-name": "resnet", "opts": `{"a":1}`}
		p["InputDataConfig"] = []any{
			map[string]any{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]string{"S3Uri": "file://" + trainDir}}},
			map[string]any{"ChannelName": "remote", "DataSource": map[string]any{"S3DataSource": map[string]string{"S3Uri": "s3://bucket/x"}}},
		}
		p["CheckpointConfig"] = map[string]string{"LocalPath": "/opt/ml/my-ckpt", "S3Uri": "s3://ckpt/c"}
		// (A payload that sets QSHARE_JOB_ID is refused by trainingjob.Parse.)
		p["Environment"] = map[string]string{"USER_VAR": "v", "CUDA_VISIBLE_DEVICES": "0,1,2,3"}
	})
	s := spec("envjob", 3, p)
	s.Demand = qshare.Capacity{"ml.g5.2xlarge": 2}
	h, x := run(t, e, s)
	if !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	jobDir := filepath.Join(data, "jobs", "envjob")
	read := func(rel string) string {
		b, err := os.ReadFile(filepath.Join(jobDir, rel))
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(b))
	}
	env := executortest.ReadEnv(t, filepath.Join(jobDir, "output/data/env"))
	ml := jobDir // where the job sees its directory: /opt/ml in its own mount namespace as root
	if e.optml {
		ml = optmlRoot
	}
	want := map[string]string{
		"SM_MODEL_DIR":             ml + "/model",
		"SM_OUTPUT_DIR":            ml + "/output",
		"SM_OUTPUT_DATA_DIR":       ml + "/output/data",
		"SM_INPUT_DIR":             ml + "/input",
		"SM_INPUT_CONFIG_DIR":      ml + "/input/config",
		"SM_CHECKPOINT_DIR":        ml + "/my-ckpt",
		"SM_HP_LR":                 "0.01",
		"SM_HP_EPOCHS":             "10",
		"SM_HP_MODEL_NAME":         "resnet",
		"SM_CURRENT_HOST":          "algo-1",
		"SM_HOSTS":                 `["algo-1"]`,
		"SM_NUM_GPUS":              "0",
		"SM_CHANNELS":              `["train","remote"]`,
		"SM_CHANNEL_TRAIN":         trainDir,
		"SM_CHANNEL_REMOTE":        ml + "/input/data/remote",
		"SM_CURRENT_INSTANCE_TYPE": "ml.m5.large",
		"QSHARE_JOB_ID":            "envjob",
		"QSHARE_ATTEMPT":           "3",
		"QSHARE_QUOTA_SHARE":       "s",
		"QSHARE_JOB_QUEUE":         "q",
		"USER_VAR":                 "v",
		"HOME":                     "/home/x",
		"CUDA_VISIBLE_DEVICES":     "",
		"NVIDIA_VISIBLE_DEVICES":   "void",
	}
	executortest.CheckEnv(t, env, want)
	if got := read("input/data/remote/f.csv"); got != "remote" {
		t.Errorf("the s3:// channel was not staged: f.csv holds %q", got)
	}
	if _, ok := env[SupervisorEnv]; ok {
		t.Errorf("%s leaked into the job", SupervisorEnv)
	}
	if n, _ := strconv.Atoi(env["SM_NUM_CPUS"]); n < 1 {
		t.Errorf("SM_NUM_CPUS = %q", env["SM_NUM_CPUS"])
	}
	var hps map[string]any
	if err := json.Unmarshal([]byte(env["SM_HPS"]), &hps); err != nil || hps["epochs"] != 10.0 || hps["lr"] != 0.01 || hps["model-name"] != "resnet" {
		t.Errorf("SM_HPS = %s (%v)", env["SM_HPS"], err)
	}
	var hpf map[string]string
	if err := json.Unmarshal([]byte(read("input/config/hyperparameters.json")), &hpf); err != nil || hpf["epochs"] != "10" || hpf["opts"] != `{"a":1}` {
		t.Errorf("hyperparameters.json = %v (%v)", hpf, err)
	}
	var rc struct {
		CurrentHost string   `json:"current_host"`
		Hosts       []string `json:"hosts"`
	}
	if err := json.Unmarshal([]byte(read("input/config/resourceconfig.json")), &rc); err != nil || rc.CurrentHost != "algo-1" || len(rc.Hosts) != 1 {
		t.Errorf("resourceconfig.json = %+v (%v)", rc, err)
	}
	if got := read("output/data/pwd"); got != jobDir {
		t.Errorf("working directory %q, want %q", got, jobDir)
	}
	// With S3 data the program runs under the data wrapper (dataWrap),
	// which leads the job's own process group.
	if read("output/data/pgid") != read("output/data/ppid") {
		t.Errorf("the job's wrapper is not the leader of its own process group: pgid %s, parent %s", read("output/data/pgid"), read("output/data/ppid"))
	}
	if st, err := os.Stat(filepath.Join(jobDir, "my-ckpt")); err != nil || !st.IsDir() {
		t.Errorf("checkpoint directory not created: %v", err)
	}
	logb, _ := os.ReadFile(h.LogPath)
	if !strings.Contains(string(logb), "hello stdout\n") || !strings.Contains(string(logb), "hello stderr\n") {
		t.Errorf("log %s = %q; want both streams", h.LogPath, logb)
	}
	if !strings.HasPrefix(h.LogPath, filepath.Join(data, "attempts", "envjob")) {
		t.Errorf("log path %s is not under the attempt directory", h.LogPath)
	}
}

func TestFailureFile(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	_, x := run(t, e, spec("ff", 1, payloadOf(`printf '\n  CUDA out of memory: tried to allocate 2 GiB  \nTraceback...\n' > "$SM_OUTPUT_DIR/failure"; exit 3`, nil)))
	if x.ExitCode != 3 || x.Reason != "CUDA out of memory: tried to allocate 2 GiB" {
		t.Errorf("exit %+v; want code 3 and the failure file's first line", x)
	}
	// A success ignores a failure file (left by an earlier attempt, say).
	_, x = run(t, e, spec("ff", 2, payloadOf(`exit 0`, nil)))
	if !x.Succeeded() || x.Reason != "Essential process exited with code 0" {
		t.Errorf("exit %+v", x)
	}
	_, x = run(t, e, spec("sig", 1, payloadOf(`kill -SEGV $$`, nil)))
	if x.ExitCode != -1 || x.Signal != "SIGSEGV" || x.Reason != "Essential process terminated by signal SIGSEGV" || x.Stopped {
		t.Errorf("exit %+v; want killed by SIGSEGV", x)
	}
}

func TestLogRotation(t *testing.T) {
	e := newExecutor(t, t.TempDir(), func(o *Options) { o.LogMaxBytes = 64 << 10; o.LogKeep = 2 })
	// About 2 MB of output, then a last line.
	h, x := run(t, e, spec("loud", 1, payloadOf(`i=0; while [ $i -lt 2000 ]; do printf '%01000d\n' $i; i=$((i+1)); done; echo LAST LINE`, nil)))
	if !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	var total int64
	for _, p := range []string{h.LogPath, h.LogPath + ".1", h.LogPath + ".2"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if st.Size() > 64<<10 {
			t.Errorf("%s has %d bytes, more than the 64 KiB cap", p, st.Size())
		}
		total += st.Size()
	}
	if _, err := os.Stat(h.LogPath + ".3"); !os.IsNotExist(err) {
		t.Errorf("a third old log file exists: %v", err)
	}
	if total > 3*64<<10 {
		t.Errorf("%d bytes of log kept", total)
	}
	b, _ := os.ReadFile(h.LogPath)
	if !strings.HasSuffix(string(b), "LAST LINE\n") {
		t.Errorf("the current log does not end with the last line: ...%q", b[max(0, len(b)-40):])
	}
}

// pidsAlive reports which of the pids recorded in path still run.
func pidsAlive(t *testing.T, path string) []int {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var alive []int
	for _, f := range strings.Fields(string(b)) {
		pid, _ := strconv.Atoi(f)
		if _, state, err := procStat(pid); err == nil && state != 'Z' {
			alive = append(alive, pid)
		}
	}
	return alive
}

func TestLeftoverChildrenAreKilled(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	// The leader exits at once, leaving a child in its group, a child that
	// left the group and a grandchild that left the session.
	sc := `sleep 300 & echo $! >> "$SM_OUTPUT_DATA_DIR/pids"
setsid sleep 301 & echo $! >> "$SM_OUTPUT_DATA_DIR/pids"
sh -c 'setsid sleep 302 & echo $! >> "$SM_OUTPUT_DATA_DIR/pids"; sleep 0.05' 
exit 0`
	_, x := run(t, e, spec("leftover", 1, payloadOf(sc, nil)))
	if !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	if alive := pidsAlive(t, filepath.Join(e.o.DataDir, "jobs/leftover/output/data/pids")); len(alive) > 0 {
		t.Errorf("processes of the job outlived Wait: %v", alive)
	}
}

func TestStopKillsTheWholeGroupAfterGrace(t *testing.T) {
	t.Parallel()
	e := newExecutor(t, t.TempDir(), nil)
	// The leader dies of SIGTERM; its child ignores it and keeps the GPUs
	// (if any) busy: Wait must wait for the child, killed after the grace.
	sc := `sh -c 'trap "" TERM; echo $$ >> "$SM_OUTPUT_DATA_DIR/pids"; echo trapped; sleep 300 & wait' &
sleep 300`
	s := spec("stubborn", 1, payloadOf(sc, nil))
	h, err := e.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	waitForLog(t, h.LogPath, "trapped\n", time.Minute)
	t0 := time.Now()
	if err := e.Stop(context.Background(), s.AttemptID, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	x, err := e.Wait(context.Background(), s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if time.Since(t0) < 500*time.Millisecond {
		t.Errorf("Wait returned before the grace period ended, while a child still ran")
	}
	if x.Signal != "SIGTERM" || !x.Stopped {
		t.Errorf("exit %+v; want the leader's SIGTERM, stopped", x)
	}
	if alive := pidsAlive(t, filepath.Join(e.o.DataDir, "jobs/stubborn/output/data/pids")); len(alive) > 0 {
		t.Errorf("processes of the job outlived Wait: %v", alive)
	}
}

// The "server" of the kill -9 tests: a child process that starts one
// attempt with a process executor, prints its handle, and waits to be killed.
const testServerEnv = "QSHARE_PROCESS_TEST_SERVER"

func testServer(dir string) int {
	gpus := []string{"none"}
	if os.Getenv(testServerEnv+"_SMI") != "" {
		gpus = nil // the fake nvidia-smi on PATH
	}
	e, err := New(context.Background(), Options{DataDir: dir, GPUs: gpus})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var s executor.Spec
	if err := json.Unmarshal([]byte(os.Getenv(testServerEnv+"_SPEC")), &s); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	h, err := e.Start(context.Background(), s)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	json.NewEncoder(os.Stdout).Encode(h)
	os.Stdout.Close()
	select {}
}

// startInServer starts s in a child "server" process, then kills it with
// SIGKILL and returns the handle it printed.
func startInServer(t *testing.T, dir string, s executor.Spec, env ...string) executor.Handle {
	t.Helper()
	b, _ := json.Marshal(s)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(append(os.Environ(), testServerEnv+"="+dir, testServerEnv+"_SPEC="+string(b)), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var h executor.Handle
	if err := json.NewDecoder(out).Decode(&h); err != nil {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("the server printed no handle: %v", err)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	return h
}

func TestKill9ServerRecover(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// A job that counts its runs, so a duplicate start would show.
	counting := func(body string) string {
		return payloadOf(`echo run >> "$SM_CHECKPOINT_DIR/runs"; `+body, nil)
	}
	long := spec("long", 1, counting(`trap 'echo saved > "$SM_CHECKPOINT_DIR/ckpt"; exit 0' TERM; sleep 300 & wait`))
	short := spec("short", 1, counting(`sleep 0.2; exit 5`))
	hl := startInServer(t, dir, long)
	hs := startInServer(t, dir, short)
	time.Sleep(600 * time.Millisecond) // short ends while no server runs

	e := newExecutor(t, dir, nil)
	defer e.Close()
	ctx := context.Background()
	if r, err := e.Recover(ctx, hs); r != executor.Exited || err != nil {
		t.Fatalf("Recover(short) = %v, %v; want Exited", r, err)
	}
	if x, _ := e.Wait(ctx, short.AttemptID); x.ExitCode != 5 {
		t.Errorf("short: %+v; want code 5", x)
	}
	if r, err := e.Recover(ctx, hl); r != executor.Running || err != nil {
		t.Fatalf("Recover(long) = %v, %v; want Running", r, err)
	}
	// A Start repeated after the restart does not run the job again.
	if h, err := e.Start(ctx, long); err != nil || !h.StartedAt.Equal(hl.StartedAt) {
		t.Errorf("Start after recovery = %+v, %v", h, err)
	}
	x, err := stopAndWait(t, e, long.AttemptID, time.Minute)
	if err != nil || !x.Stopped || x.ExitCode != 0 {
		t.Errorf("long after Stop: %+v, %v; want stopped with code 0", x, err)
	}
	jobs := filepath.Join(dir, "jobs")
	if b, _ := os.ReadFile(filepath.Join(jobs, "long/checkpoints/ckpt")); string(b) != "saved\n" {
		t.Errorf("the checkpoint written on SIGTERM = %q", b)
	}
	for _, j := range []string{"long", "short"} {
		if b, _ := os.ReadFile(filepath.Join(jobs, j, "checkpoints/runs")); string(b) != "run\n" {
			t.Errorf("%s ran %d times", j, strings.Count(string(b), "run"))
		}
	}
}

func TestRestartedStartDoesNotRunTwice(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s := spec("once", 1, payloadOf(`echo run >> "$SM_CHECKPOINT_DIR/runs"; sleep 0.3`, nil))
	h1 := startInServer(t, dir, s)
	e := newExecutor(t, dir, nil)
	defer e.Close()
	// The daemon crashed before it persisted the handle: it starts again.
	h2, err := e.Start(context.Background(), s)
	if err != nil || !h2.StartedAt.Equal(h1.StartedAt) {
		t.Fatalf("Start after restart = %+v, %v; want the first handle %+v", h2, err, h1)
	}
	x, err := e.Wait(context.Background(), s.AttemptID)
	if err != nil || !x.Succeeded() {
		t.Fatalf("exit %+v, %v", x, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "jobs/once/checkpoints/runs")); string(b) != "run\n" {
		t.Errorf("the job ran %d times", strings.Count(string(b), "run"))
	}
}

func TestStopWhenTheSupervisorIsGone(t *testing.T) {
	dir := t.TempDir()
	s := spec("orphan", 1, payloadOf(`sleep 300`, nil))
	h := startInServer(t, dir, s)
	var st state
	json.Unmarshal(h.State, &st)
	if err := syscall.Kill(st.Supervisor.PID, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for st.Supervisor.alive() {
		time.Sleep(10 * time.Millisecond)
	}
	e := newExecutor(t, dir, nil)
	defer e.Close()
	if r, _ := e.Recover(context.Background(), h); r != executor.Running {
		t.Fatalf("Recover = %v; want Running (the job still runs)", r)
	}
	stopLost(t, e, s.AttemptID, st.Job)
}

func TestRecoverLost(t *testing.T) {
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	defer e.Close()
	for _, h := range []executor.Handle{
		{AttemptID: "x", State: []byte("garbage")},
		{AttemptID: "y", State: []byte(`{"dir":"` + dir + `/attempts/none/y"}`)},
	} {
		if r, err := e.Recover(context.Background(), h); r != executor.Lost || err != nil {
			t.Errorf("Recover(%s) = %v, %v; want Lost", h.State, r, err)
		}
	}
	// Launched, but nothing alive and no exit record: Lost.
	ad := filepath.Join(dir, "attempts/j/z")
	os.MkdirAll(ad, 0o755)
	os.WriteFile(filepath.Join(ad, fileLaunched), nil, 0o644)
	st, _ := json.Marshal(state{Dir: ad, Job: identity{PID: 1 << 22, Start: 1, BootID: bootIDOnce}})
	if r, _ := e.Recover(context.Background(), executor.Handle{AttemptID: "z", State: st}); r != executor.Lost {
		t.Errorf("Recover(dead) = %v; want Lost", r)
	}
	if _, err := e.Wait(context.Background(), "z"); !errors.Is(err, executor.ErrUnknownAttempt) {
		t.Errorf("Wait(lost) = %v", err)
	}
}

func TestIdentity(t *testing.T) {
	me, err := identify(os.Getpid())
	if err != nil || !me.alive() {
		t.Fatalf("identify(self) = %+v, %v", me, err)
	}
	other := me
	other.Start++
	if other.alive() {
		t.Errorf("a different start time is alive")
	}
	other = me
	other.BootID = "another-boot"
	if other.alive() {
		t.Errorf("a different boot is alive")
	}
}

// BenchmarkTrueJobs runs trivial jobs (`true`) through the executor, 32 at
// a time (QSHARE_BENCH_PARALLELISM × GOMAXPROCS), from Start to the end of Wait: the executor's share of the
// end-to-end throughput of BENCHMARKS.md §1. Report jobs/s.
func BenchmarkTrueJobs(b *testing.B) {
	dir := b.TempDir()
	e := newExecutor(b, dir, func(o *Options) {
		if sup := os.Getenv("QSHARE_BENCH_SUPERVISOR"); sup != "" {
			o.Supervisor = []string{sup} // the qshare binary, say
		}
	})
	defer e.Close()
	p := payloadOf([]string{"true"}, nil)
	var n atomic.Int64
	par := 16 // × GOMAXPROCS goroutines
	if v, err := strconv.Atoi(os.Getenv("QSHARE_BENCH_PARALLELISM")); err == nil && v > 0 {
		par = v
	}
	b.SetParallelism(par)
	// The supervisor runs the jobs: make sure it is there, so that its CPU
	// time is measured from here.
	sup, err := e.supervisor()
	if err != nil {
		b.Fatal(err)
	}
	self0, sup0, jobs0 := benchCPU(sup.cmd.Process.Pid)
	t0 := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			s := spec("true-"+strconv.FormatInt(n.Add(1), 10), 1, p)
			if _, err := e.Start(context.Background(), s); err != nil {
				b.Error(err)
				return
			}
			if x, err := e.Wait(context.Background(), s.AttemptID); err != nil || !x.Succeeded() {
				b.Errorf("%+v %v", x, err)
				return
			}
		}
	})
	b.ReportMetric(float64(n.Load())/time.Since(t0).Seconds(), "jobs/s")
	// CPU per job, which a busy machine disturbs less than the rate: this
	// process (Start, Wait and the benchmark's loop), the supervisor, and
	// the jobs themselves (fork and exec of true, reaped by the supervisor).
	self1, sup1, jobs1 := benchCPU(sup.cmd.Process.Pid)
	if k := float64(n.Load()); k > 0 {
		b.ReportMetric(float64((self1-self0).Microseconds())/k, "exec-cpu-µs/job")
		b.ReportMetric(float64((sup1-sup0).Microseconds())/k, "sup-cpu-µs/job")
		b.ReportMetric(float64((jobs1-jobs0).Microseconds())/k, "jobs-cpu-µs/job")
		// What costs most per attempt is creating files and directories:
		// count the inodes the jobs left (temporary files renamed away are
		// not among them).
		inodes := map[uint64]bool{}
		filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			var st syscall.Stat_t
			if err == nil && syscall.Lstat(p, &st) == nil {
				inodes[st.Ino] = true
			}
			return nil
		})
		b.ReportMetric(float64(len(inodes))/k, "inodes/job")
	}
}

// benchCPU returns the CPU time (user and system) of this process, of the
// supervisor process sup, and of the children sup has reaped.
func benchCPU(sup int) (self, super, reaped time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	self = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	b, err := os.ReadFile("/proc/" + strconv.Itoa(sup) + "/stat")
	if err != nil {
		return self, 0, 0
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	tick := func(i int) time.Duration { // fields 14 to 17, in clock ticks (100 a second)
		v, _ := strconv.ParseInt(f[i-3], 10, 64)
		return time.Duration(v) * 10 * time.Millisecond
	}
	return self, tick(14) + tick(15), tick(16) + tick(17)
}

func TestForget(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	defer e.Close()
	s := spec("forget", 1, payloadOf(`echo run >> "$SM_CHECKPOINT_DIR/runs"; exit 4`, nil))
	h, x := run(t, e, s)
	e.Forget(s.AttemptID)
	if _, err := e.Wait(context.Background(), s.AttemptID); !errors.Is(err, executor.ErrUnknownAttempt) {
		t.Errorf("Wait after Forget = %v", err)
	}
	// Its records remain: a Start or Recover reports the same end and does not run it again.
	if h2, err := e.Start(context.Background(), s); err != nil || !h2.StartedAt.Equal(h.StartedAt) {
		t.Fatalf("Start after Forget = %+v, %v", h2, err)
	}
	if y, _ := e.Wait(context.Background(), s.AttemptID); y.ExitCode != x.ExitCode {
		t.Errorf("exit after Forget and Start = %+v, want %+v", y, x)
	}
	if b, _ := os.ReadFile(filepath.Join(e.o.DataDir, "jobs/forget/checkpoints/runs")); string(b) != "run\n" {
		t.Errorf("the job ran %d times", strings.Count(string(b), "run"))
	}
}

func TestSupervisorDiesUnderALiveServer(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	defer e.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s1 := spec("victim", 1, payloadOf(`sleep 300`, nil))
	h1, err := e.Start(ctx, s1)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	json.Unmarshal(h1.State, &st)
	syscall.Kill(st.Supervisor.PID, syscall.SIGKILL)
	for st.Supervisor.alive() {
		time.Sleep(5 * time.Millisecond)
	}
	// The next attempt gets a new supervisor: its Start does not fail.
	s2 := spec("after", 1, payloadOf(`exit 6`, nil))
	if _, err := e.Start(ctx, s2); err != nil {
		t.Fatalf("Start after the supervisor died: %v", err)
	}
	x2, err := e.Wait(ctx, s2.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	if x2.ExitCode != 6 {
		t.Errorf("attempt under the new supervisor: %+v", x2)
	}
	// The orphaned job still runs; Stop reaches it without its supervisor.
	if !st.Job.alive() {
		t.Fatalf("the job died with its supervisor")
	}
	stopLost(t, e, s1.AttemptID, st.Job)
}

func TestSupervisorExitsAfterItsLastJob(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := newExecutor(t, dir, nil)
	s := spec("last", 1, payloadOf(`sleep 0.3`, nil))
	h, err := e.Start(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	var st state
	json.Unmarshal(h.State, &st)
	e.Close() // as when the server exits: the supervisor takes no new jobs
	if _, err := e.Start(context.Background(), spec("refused", 1, payloadOf(`true`, nil))); err == nil {
		t.Errorf("Start after Close succeeded")
	}
	if !st.Supervisor.alive() {
		t.Fatalf("the supervisor exited while its job ran")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if x, err := e.Wait(ctx, s.AttemptID); err != nil || !x.Succeeded() {
		t.Fatalf("the job did not finish after Close: %+v, %v", x, err)
	}
	for st.Supervisor.alive() {
		if ctx.Err() != nil {
			t.Fatalf("the supervisor outlived its last job")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestNewDataDirMode: a data directory that New creates can be traversed
// by the jobs' users (--run-as) on the way to jobs/, whichever of its
// subdirectories is made first; it was 0700 when attempts/ came first.
func TestNewDataDirMode(t *testing.T) {
	for i := range 8 {
		dd := filepath.Join(t.TempDir(), "data")
		e := newExecutor(t, dd, nil)
		e.Close()
		st, err := os.Stat(dd)
		if err != nil {
			t.Fatal(err)
		}
		if m := st.Mode().Perm(); m&0o001 == 0 {
			t.Fatalf("try %d: data directory made with mode %#o, want o+x", i, m)
		}
	}
}
