package kubernetes

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
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
	t.Helper()
	var p map[string]any
	if err := json.Unmarshal([]byte(payload(kubetest.Program{Run: time.Hour}, "ml.m5.large", count, nil)), &p); err != nil {
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
	sec, err := e.c.CoreV1().Secrets(e.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := e.c.CoreV1().ConfigMaps(e.ns).Get(ctx, name, metav1.GetOptions{})
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
// It runs against the embedded store and against versitygw, a server
// that checks every signature (skipped where it is not built).
func TestStageSubcommand(t *testing.T) {
	objs := map[string]map[string]string{"qshare-data": {"train/a.csv": "a", "train/b.csv": "b", "train/c.csv": "c", "train/d.csv": "d"}}
	t.Run("embedded", func(t *testing.T) {
		ep, c := s3test.Start(t, objs)
		stageSubcommand(t, ep, c)
	})
	t.Run("versitygw", func(t *testing.T) {
		ep, c := s3test.Versitygw(t, objs)
		stageSubcommand(t, ep, c)
	})
}

func stageSubcommand(t *testing.T, ep data.Endpoint, s3c *s3.Client) {
	e := &Executor{cfg: Config{DataImage: "qshare:test"}, o: Options{S3: ep}}
	s := executor.Spec{JobID: "stage", JobName: "stage", AttemptID: "stage-1", Attempt: 1}
	req, err := trainingjob.Parse(dataPayload(t, 2, nil))
	if err != nil {
		t.Fatal(err)
	}
	dp, err := e.dataPlan(s, req, 2, checkpointDir(req))
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
}
