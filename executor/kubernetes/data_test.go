package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"qshare/aws/s3/s3test"
	"qshare/data"
	"qshare/executor"
	"qshare/executor/kubernetes/kubetest"
	"qshare/trainingjob"
)

// dataPayload is a payload of count instances with a ShardedByS3Key
// channel, an S3OutputPath and checkpoints in S3.
func dataPayload(t *testing.T, count int, mutate func(map[string]any)) string {
	return dataPayloadOf(t, kubetest.Program{Run: time.Hour}, count, mutate)
}

// dataPayloadOf is dataPayload with the program prog.
func dataPayloadOf(t *testing.T, prog kubetest.Program, count int, mutate func(map[string]any)) string {
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(payload(prog, "ml.m5.large", count, nil)), &p); err != nil {
		t.Fatal(err)
	}
	p["InputDataConfig"] = []map[string]any{{"ChannelName": "train", "DataSource": map[string]any{"S3DataSource": map[string]any{
		"S3DataType": "S3Prefix", "S3Uri": "s3://qshare-data/train/", "S3DataDistributionType": "ShardedByS3Key"}}}}
	p["OutputDataConfig"] = map[string]any{"S3OutputPath": "s3://qshare-data/output"}
	p["CheckpointConfig"] = map[string]any{"S3Uri": "s3://qshare-data/ckpt", "LocalPath": "/opt/ml/checkpoints"}
	if mutate != nil {
		mutate(p)
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// TestDataPodSpec starts a two-instance job with S3 data against the real
// API server and reads back what the executor made: each pod stages in an
// init container of qshare's image, into an emptyDir that its training
// container has at /opt/ml/input/data; pod 0 alone runs its command under
// the copied qshare binary, the data wrapper, whose configuration comes
// from the attempt's Secret by reference; the Secret is owned by the
// attempt's ConfigMap; and the credentials are nowhere in the pods.
func TestDataPodSpec(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	const key, secret = "AKIDQSHARETEST", "s3cr3t-that-no-pod-spec-holds"
	ep := data.Endpoint{URL: "http://s3.example:8750", Region: "us-east-1", AccessKeyID: key, SecretAccessKey: secret}
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{DataImage: "qshare:test"}, S3: ep, StartWait: time.Second})
	defer e.Close()
	s := spec(kubetest.Program{Run: time.Hour}, "ml.m5.large", 2)
	s.Payload = dataPayload(t, 2, nil)
	start(t, e, s)
	defer e.Stop(context.Background(), s.AttemptID, 0) //nolint:errcheck // the test's end

	pods := attemptPods(t, e, s.AttemptID)
	if len(pods) != 2 {
		t.Fatalf("%d pods, want 2", len(pods))
	}
	name := baseName(s.AttemptID)
	for _, p := range pods {
		i := p.Labels[LabelIndex]
		b, _ := json.Marshal(p)
		if strings.Contains(string(b), secret) || strings.Contains(string(b), key) {
			t.Errorf("pod %s holds the credentials in clear: %s", p.Name, b)
		}
		if len(p.Spec.InitContainers) != 1 {
			t.Fatalf("pod %s has init containers %+v, want the staging one", p.Name, p.Spec.InitContainers)
		}
		ic := p.Spec.InitContainers[0]
		wantArgs := []string{"data", "stage", "--config", "/var/run/qshare/stage.json", "--instance", i, "--install", BinDir}
		if ic.Name != StageContainer || ic.Image != "qshare:test" || !slices.Equal(ic.Args, wantArgs) || ic.TerminationMessagePath != FailureFile {
			t.Errorf("pod %s's init container %+v, want %s of qshare:test with %v", p.Name, ic, StageContainer, wantArgs)
		}
		vols := map[string]corev1.Volume{}
		for _, v := range p.Spec.Volumes {
			vols[v.Name] = v
		}
		if v := vols["channels"]; v.EmptyDir == nil {
			t.Errorf("pod %s has no emptyDir for the channels: %+v", p.Name, p.Spec.Volumes)
		}
		if v := vols["qshare-bin"]; v.EmptyDir == nil {
			t.Errorf("pod %s has no emptyDir for qshare's binary", p.Name)
		}
		if v := vols["qshare-data"]; v.Secret == nil || v.Secret.SecretName != name {
			t.Errorf("pod %s's staging configuration is not the Secret %s: %+v", p.Name, name, v)
		}
		mounts := map[string]string{}
		for _, m := range p.Spec.Containers[0].VolumeMounts {
			mounts[m.MountPath] = m.Name
		}
		for _, m := range ic.VolumeMounts {
			if m.Name == "channels" && m.MountPath != "/opt/ml/input/data" {
				t.Errorf("the init container has the channels at %s", m.MountPath)
			}
		}
		if mounts["/opt/ml/input/data"] != "channels" || mounts[BinDir] != "qshare-bin" {
			t.Errorf("pod %s's training container mounts %v", p.Name, mounts)
		}
		ct := p.Spec.Containers[0]
		var ref *corev1.SecretKeySelector
		for _, ev := range ct.Env {
			if ev.Name == data.WrapEnv && ev.ValueFrom != nil {
				ref = ev.ValueFrom.SecretKeyRef
			}
		}
		if i == "0" {
			if len(ct.Command) < 2 || ct.Command[0] != BinDir+"/qshare" || ct.Command[1] != kubetest.PlayCommand {
				t.Errorf("pod 0's command %v does not run under the wrapper", ct.Command)
			}
			if ref == nil || ref.Name != name || ref.Key != wrapperKey {
				t.Errorf("pod 0's %s is not a reference to the Secret: %+v", data.WrapEnv, ref)
			}
		} else if ref != nil || ct.Command[0] != kubetest.PlayCommand {
			t.Errorf("pod %s (not algo-1) runs %v under the wrapper (%+v): only the primary uploads", p.Name, ct.Command, ref)
		}
	}

	ctx := context.Background()
	sec, err := e.c.Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := e.c.ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if o := sec.OwnerReferences; len(o) != 1 || o[0].Kind != "ConfigMap" || o[0].UID != cm.UID {
		t.Errorf("the Secret's owners %+v, want the ConfigMap %s", o, cm.UID)
	}
	var stage, wrap data.Wrapper
	if err := json.Unmarshal(sec.Data[stageKey], &stage); err != nil || stage.Endpoint != ep || len(stage.Plan.Channels) != 1 || stage.Plan.Output != nil {
		t.Errorf("stage.json %s (%v): want the endpoint and the channel alone", sec.Data[stageKey], err)
	}
	req, _ := trainingjob.Parse(s.Payload)
	if err := json.Unmarshal(sec.Data[wrapperKey], &wrap); err != nil || wrap.Endpoint != ep || len(wrap.Plan.Channels) != 0 ||
		wrap.Plan.Output == nil || wrap.Plan.Output.Key != "output/"+s.TrainingJobName(req)+"/output" || wrap.Plan.Checkpoints == nil || !wrap.ForwardSignals {
		t.Errorf("wrapper.json %s (%v): want the outputs under the attempt's name and the checkpoints", sec.Data[wrapperKey], err)
	}
	var idc map[string]data.ChannelConfig
	if err := json.Unmarshal([]byte(cm.Data["inputdataconfig.json"]), &idc); err != nil || idc["train"].S3DistributionType != "ShardedByS3Key" {
		t.Errorf("inputdataconfig.json %s", cm.Data["inputdataconfig.json"])
	}
}

// TestDataRefusals: without dataImage, a job with S3 data is refused at
// submit, and so is one that uploads but names no entry point to wrap.
func TestDataRefusals(t *testing.T) {
	e := &Executor{}
	if err := e.Validate(dataPayload(t, 1, nil), nil); err == nil || !strings.Contains(err.Error(), "dataImage") {
		t.Errorf("Validate without dataImage: %v", err)
	}
	e.cfg.DataImage = "qshare:test"
	if err := e.Validate(dataPayload(t, 1, nil), nil); err != nil {
		t.Errorf("Validate: %v", err)
	}
	noEntry := dataPayload(t, 1, func(p map[string]any) {
		delete(p["AlgorithmSpecification"].(map[string]any), "ContainerEntrypoint")
	})
	if err := e.Validate(noEntry, nil); err == nil || !strings.Contains(err.Error(), "ContainerEntrypoint") {
		t.Errorf("Validate without an entry point: %v", err)
	}
}

// TestStageSubcommand runs `qshare data stage` (this test binary, as
// TestMain dispatches) as a real process with the init container's
// configuration, as the executor wrote it into the Secret, against the
// embedded S3 store: instance 1 of 2 gets its share of the channel in the
// pod's layout, and the binary is installed for the wrapper. Then pod 0's
// wrapper, with the Secret's other configuration in its environment, runs
// a program and leaves its model in S3 under the attempt's name. Paths
// under /opt/ml are moved into a temporary directory, which stands for
// the pod's.
// It runs against the embedded store, and against versitygw and
// SeaweedFS, servers that check every signature (each skipped where it
// is not built).
func TestStageSubcommand(t *testing.T) {
	t.Parallel()
	objs := map[string]map[string]string{"qshare-data": {"train/a.csv": "a", "train/b.csv": "b", "train/c.csv": "c", "train/d.csv": "d"}}
	for name, start := range map[string]func(testing.TB, map[string]map[string]string) (data.Endpoint, *s3.Client){
		"embedded": s3test.Start, "versitygw": s3test.Versitygw, "SeaweedFS": s3test.SeaweedFS,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ep, c := start(t, objs)
			stageSubcommand(t, ep, c)
		})
	}
}

func stageSubcommand(t *testing.T, ep data.Endpoint, s3c *s3.Client) {
	e := &Executor{cfg: Config{DataImage: "qshare:test"}, o: Options{S3: ep}}
	s := executor.Spec{JobID: "stage", JobName: "stage", AttemptID: "stage-1", Attempt: 1}
	req, err := trainingjob.Parse(dataPayload(t, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := e.dataPlan(s, req, 2, checkpointDir(req), 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	pod, bin := t.TempDir(), t.TempDir()
	inPod := func(p string) string { return filepath.Join(pod, strings.TrimPrefix(p, mlRoot)) }
	config := func(key string) data.Wrapper {
		var w data.Wrapper
		if err := json.Unmarshal(dp.secret.Data[key], &w); err != nil {
			t.Fatal(err)
		}
		w.Root, w.FailureFile = pod, inPod(w.FailureFile)
		d := &w.Plan.Dirs
		d.Input, d.Model, d.OutputData, d.Checkpoint = inPod(d.Input), inPod(d.Model), inPod(d.OutputData), inPod(d.Checkpoint)
		return w
	}
	cfgFile := filepath.Join(t.TempDir(), stageKey)
	b, _ := json.Marshal(config(stageKey))
	if err := os.WriteFile(cfgFile, b, 0o400); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(os.Args[0], "data", "stage", "--config", cfgFile, "--instance", "1", "--install", bin).CombinedOutput()
	if err != nil {
		t.Fatalf("qshare data stage: %v\n%s", err, out)
	}
	got, _ := filepath.Glob(filepath.Join(pod, "input", "data", "train", "*"))
	for i := range got {
		got[i] = filepath.Base(got[i])
	}
	if !slices.Equal(got, []string{"b.csv", "d.csv"}) {
		t.Errorf("instance 1 of 2 got %v, want b.csv and d.csv\n%s", got, out)
	}
	if st, err := os.Stat(filepath.Join(bin, "qshare")); err != nil || st.Mode().Perm()&0o111 == 0 {
		t.Errorf("qshare was not installed for the wrapper: %v", err)
	}

	// A prefix with nothing under it: the init container fails with
	// SageMaker's reason in the failure file, the pod's termination
	// message.
	w := config(stageKey)
	w.Plan.Channels[0].Source.Key = "nothing/"
	b, _ = json.Marshal(w)
	if err := os.WriteFile(cfgFile, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(pod, "output"), 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(os.Args[0], "data", "stage", "--config", cfgFile, "--instance", "0").CombinedOutput(); err == nil {
		t.Errorf("staging an empty prefix succeeded:\n%s", out)
	}
	if f, _ := os.ReadFile(filepath.Join(pod, "output", "failure")); !strings.HasPrefix(string(f), "ClientError: Data download failed: ") {
		t.Errorf("failure file %q, want SageMaker's reason", f)
	}

	// Pod 0's training container: the wrapper runs the program and
	// uploads its model before it exits.
	wb, _ := json.Marshal(config(wrapperKey))
	cmd := exec.Command(os.Args[0], "/bin/sh", "-c", `mkdir -p "$1" && echo weights > "$1/model.bin"`, "sh", filepath.Join(pod, "model"))
	cmd.Env = append(os.Environ(), data.WrapEnv+"="+string(wb))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the wrapper: %v\n%s", err, out)
	}
	model := s3test.TarGz(t, s3c, "qshare-data", "output/"+s.TrainingJobName(req)+"/output/model.tar.gz")
	if model["model.bin"] != "weights\n" {
		t.Errorf("model.tar.gz holds %q", model)
	}

	// A stop: the wrapper alone gets the SIGTERM (here from the program
	// itself, as from the kubelet), passes it on to a program that
	// ignores it, kills the program when the stop's grace in
	// wrapper.json ends, and uploads what it left, before the pod's own
	// grace period (the stop's and data.UploadAfterKillLimit) would end
	// it all. It dies as the program did, by SIGKILL.
	if w := config(wrapperKey); w.StopGrace != 300*time.Millisecond || !w.ForwardSignals {
		t.Errorf("wrapper.json's stop grace %v, want the executor's 300ms, forwarded", w.StopGrace)
	}
	cmd = exec.Command(os.Args[0], "/bin/sh", "-c", `trap "" TERM; echo "killed at $1" > "$1/model.bin"; kill -TERM $PPID; sleep 60 & wait`, "sh", filepath.Join(pod, "model"))
	cmd.Env = append(os.Environ(), data.WrapEnv+"="+string(wb))
	t0 := time.Now()
	out, err = cmd.CombinedOutput()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL || time.Since(t0) > 30*time.Second {
		t.Fatalf("the stopped wrapper ended %v (%v) after %v, want killed once its upload was done:\n%s", cmd.ProcessState, err, time.Since(t0), out)
	}
	model = s3test.TarGz(t, s3c, "qshare-data", "output/"+s.TrainingJobName(req)+"/output/model.tar.gz")
	if model["model.bin"] != "killed at "+filepath.Join(pod, "model")+"\n" {
		t.Errorf("model.tar.gz after the kill holds %q:\n%s", model, out)
	}
}

// TestDataStopGrace: against the real API server, the pod whose wrapper
// uploads (pod 0) is made with a grace period of the program's grace
// and data.UploadAfterKillLimit, and its wrapper.json carries the
// program's grace; a stop deletes it with that grace, so the kubelet's
// SIGKILL comes after the wrapper's kill and upload, and deletes the
// other pods with the stop's.
func TestDataStopGrace(t *testing.T) {
	t.Parallel()
	c := getCluster(t)
	e := c.newExecutor(t, t.TempDir(), Options{Config: Config{DataImage: "qshare:test"}, S3: data.Endpoint{URL: "http://s3.example:8750", Region: "us-east-1"},
		StopGrace: 2 * time.Second, StartWait: time.Second})
	defer e.Close()
	if BinDir+"/qshare" != kubetest.WrapperCommand {
		t.Fatalf("the played kubelet does not know the wrapper %s/qshare", BinDir)
	}
	prog := kubetest.Program{Run: time.Hour, OnStop: "ignore"}
	s := spec(prog, "ml.m5.large", 2)
	s.Payload = dataPayloadOf(t, prog, 2, nil)
	start(t, e, s)
	ctx := context.Background()
	defer func() { // the played pod 0 would wait out its long grace
		zero := int64(0)
		for _, p := range attemptPods(t, e, s.AttemptID) {
			e.c.Pods(e.ns).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}) //nolint:errcheck // the test's end
		}
	}()
	long := int64((2*time.Second + data.UploadAfterKillLimit).Seconds())
	want := map[string]int64{podName(s.AttemptID, 0): long, podName(s.AttemptID, 1): 2}
	for _, p := range attemptPods(t, e, s.AttemptID) {
		if g := p.Spec.TerminationGracePeriodSeconds; g == nil || *g != want[p.Name] {
			t.Errorf("pod %s's terminationGracePeriodSeconds %v, want %d", p.Name, g, want[p.Name])
		}
	}
	sec, err := e.c.Secrets(e.ns).Get(ctx, baseName(s.AttemptID), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var w data.Wrapper
	if err := json.Unmarshal(sec.Data[wrapperKey], &w); err != nil || w.StopGrace != 2*time.Second {
		t.Errorf("wrapper.json %s (%v): want the program's grace, 2s", sec.Data[wrapperKey], err)
	}
	if err := e.Stop(ctx, s.AttemptID, time.Second); err != nil {
		t.Fatal(err)
	}
	want[podName(s.AttemptID, 1)] = 1 // the stop's own
	for name, g := range want {
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			p, err := e.c.Pods(e.ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatalf("pod %s is gone before its deletion was seen: %v", name, err)
			}
			if p.DeletionTimestamp != nil {
				if d := p.DeletionGracePeriodSeconds; d == nil || *d != g {
					t.Errorf("pod %s's deletion grace %v, want %d", name, *d, g)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("pod %s is not being deleted", name)
			}
		}
	}
}
