package kubernetes

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"qshare"
	"qshare/data"
	"qshare/executor"
	"qshare/trainingjob"
)

// SageMaker's data contract in a pod (package data), for a job whose
// payload names S3 channels, an S3OutputPath or a CheckpointConfig.S3Uri:
//
//   - An init container, StageContainer, runs qshare's own image
//     (Config.DataImage) as `qshare data stage` (StageMain): it stages the
//     pod's share of the channels into an emptyDir that the training
//     container has at /opt/ml/input/data, and copies the qshare binary
//     into another emptyDir, at BinDir in both.
//   - Pod 0 (algo-1, SageMaker's primary host) runs its training
//     container's command under that binary as the data wrapper (data.Run,
//     the process and Slurm executors' own): it restores the checkpoints,
//     runs the program, copies the checkpoints while it runs, and uploads
//     the model, the output and the checkpoints once it has exited, before
//     the container ends. So the pod is not done before the upload is; a
//     failed upload is the container's exit code and its failure file
//     (the pod's termination message), which the executor reads as for
//     any failure. A stop (the pod's deletion) sends SIGTERM to the
//     wrapper, which passes it on; the program has the stop's grace
//     period (Wrapper.StopGrace: the job's QSHARE_STOP_GRACE, else the
//     executor's StopGrace, as the pod was made), and then the wrapper
//     kills it and uploads. Pod 0's own grace period
//     (terminationGracePeriodSeconds, and that of its deletion) is that
//     grace and data.UploadAfterKillLimit, so the kubelet's SIGKILL does
//     not cut the upload short (annUploads).
//   - The S3 endpoint and its credentials are in a Secret of the attempt
//     (named as its ConfigMap, owned by it, so the cluster's garbage
//     collector deletes it with the ConfigMap): the init container reads
//     it as a file of a secret volume, the wrapper as a variable whose
//     value the pod spec gives by reference (secretKeyRef), and the
//     wrapper takes it out of the program's environment.
const (
	// StageContainer is the init container's name.
	StageContainer = "qshare-data"
	// BinDir is where the init container puts the qshare binary.
	BinDir = "/opt/qshare"
	// secretDir is where the init container reads its configuration.
	secretDir = "/var/run/qshare"
	// The Secret's keys: the init container's configuration, and pod 0's
	// wrapper's.
	stageKey   = "stage.json"
	wrapperKey = "wrapper.json"
	// mlRoot is /opt/ml; channelsDir the channels' emptyDir.
	mlRoot      = "/opt/ml"
	channelsDir = "/opt/ml/input/data"
)

// dataPods is what an attempt's data contract adds to its objects.
type dataPods struct {
	secret    *corev1.Secret
	channels  bool          // the init containers stage channels
	wrap      bool          // pod 0's command runs under the wrapper
	image     string        // qshare's image
	checkpath string        // the checkpoint directory, "" without one
	stopGrace time.Duration // the program's grace in pod 0 (Wrapper.StopGrace)
}

// dataPlan returns the data contract of an attempt of n instances whose
// program has stopGrace after a stop, or nil for a payload that moves no
// data; it refuses (EINVALID) a payload whose
// contract this executor cannot carry out as configured.
func (e *Executor) dataPlan(s executor.Spec, req *trainingjob.Request, n int, ck string, stopGrace time.Duration) (*dataPods, error) {
	name := s.TrainingJobName(req)
	if name == "" {
		name = "check" // Validate: only whether there is anything to move
	}
	d := data.Dirs{Input: mlRoot + "/input", Model: modelDir, OutputData: mlRoot + "/output/data", Checkpoint: ck}
	p, err := data.NewPlan(req, data.Attempt{TrainingJobName: name, Instances: n}, d)
	if err != nil {
		return nil, err
	}
	if p.Empty() {
		return nil, nil
	}
	if e.cfg.DataImage == "" {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload names S3 data (InputDataConfig, OutputDataConfig.S3OutputPath or CheckpointConfig.S3Uri), and this Kubernetes executor's --kube-config has no dataImage, the qshare image that stages it in the pods (docs/kubernetes.md)")
	}
	dp := &dataPods{channels: len(p.Channels) > 0, wrap: p.Uploads(), image: e.cfg.DataImage, checkpath: ck, stopGrace: stopGrace}
	if dp.wrap && len(req.AlgorithmSpecification.ContainerEntrypoint) == 0 {
		return nil, qshare.Errorf(qshare.EINVALID, "serviceRequestPayload has OutputDataConfig.S3OutputPath or CheckpointConfig.S3Uri but no AlgorithmSpecification.ContainerEntrypoint: the Kubernetes executor uploads the model by running the container's command under qshare's data wrapper, and cannot learn an image's own entry point; give ContainerEntrypoint")
	}
	// The init containers stage the channels; pod 0's wrapper does the
	// rest (data.Run stages what its plan holds, so its plan holds no
	// channel).
	stage := data.Wrapper{Plan: p, Endpoint: e.o.S3, Root: mlRoot, FailureFile: FailureFile}
	stage.Plan.Output, stage.Plan.Checkpoints = nil, nil
	root := mlRoot
	if ck != "" && !strings.HasPrefix(path.Clean(ck)+"/", mlRoot+"/") {
		root = "/"
	}
	wrap := data.Wrapper{Plan: p, Endpoint: e.o.S3, Root: root, FailureFile: FailureFile, ForwardSignals: true, StopGrace: stopGrace}
	wrap.Plan.Channels = nil
	sb, _ := json.Marshal(stage)
	wb, _ := json.Marshal(wrap)
	dp.secret = &corev1.Secret{Type: corev1.SecretTypeOpaque, Data: map[string][]byte{stageKey: sb, wrapperKey: wb}}
	return dp, nil
}

// apply adds the contract to pod i of the attempt whose Secret is named
// secret.
func (d *dataPods) apply(pod *corev1.Pod, i int, secret string) {
	wrap := d.wrap && i == 0
	if !d.channels && !wrap {
		return
	}
	ro := int32(0o444) // read by the init container alone, whatever its user
	pod.Spec.Volumes = append(pod.Spec.Volumes,
		corev1.Volume{Name: "qshare-bin", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		corev1.Volume{Name: "qshare-data", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: secret,
			Items: []corev1.KeyToPath{{Key: stageKey, Path: stageKey}}, DefaultMode: &ro}}})
	mounts := []corev1.VolumeMount{{Name: "qshare-bin", MountPath: BinDir}}
	if d.channels {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "channels", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}})
		mounts = append(mounts, corev1.VolumeMount{Name: "channels", MountPath: channelsDir})
	}
	init := corev1.Container{Name: StageContainer, Image: d.image,
		Args:                     []string{"data", "stage", "--config", secretDir + "/" + stageKey, "--instance", strconv.Itoa(i), "--install", BinDir},
		VolumeMounts:             append(append([]corev1.VolumeMount(nil), mounts...), corev1.VolumeMount{Name: "qshare-data", MountPath: secretDir, ReadOnly: true}),
		TerminationMessagePath:   FailureFile,
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError}
	pod.Spec.InitContainers = append(pod.Spec.InitContainers, init)
	c := &pod.Spec.Containers[0]
	for _, m := range mounts {
		m.ReadOnly = m.Name == "qshare-bin"
		c.VolumeMounts = append(c.VolumeMounts, m)
	}
	if wrap {
		secs := int64(math.Ceil((d.stopGrace + data.UploadAfterKillLimit).Seconds()))
		pod.Spec.TerminationGracePeriodSeconds = &secs
		pod.Annotations[annUploads] = "true"
		c.Command = append([]string{BinDir + "/qshare"}, c.Command...)
		c.Env = append(c.Env, corev1.EnvVar{Name: data.WrapEnv, ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: wrapperKey}}})
	}
}

// StageMain is `qshare data stage`, the init container's program: it reads
// the wrapper configuration at --config (a file of the attempt's Secret),
// copies this binary into --install (for the training container's
// wrapper), and stages instance --instance's share of the channels
// (data.RunStage). It returns the process's exit code; a staging that
// fails says why in the failure file, the pod's termination message.
func StageMain(args []string, stderr io.Writer) int {
	fs := flag.NewFlagSet("qshare data stage", flag.ContinueOnError)
	fs.SetOutput(stderr)
	config := fs.String("config", "", "the wrapper configuration (JSON, package data's Wrapper)")
	instance := fs.Int("instance", 0, "this pod's instance index, from 0")
	install := fs.String("install", "", "a directory to copy this binary into, as qshare")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *config == "" || fs.NArg() > 0 {
		fmt.Fprintln(stderr, "qshare data stage: give --config FILE, and no arguments")
		return 2
	}
	b, err := os.ReadFile(*config)
	if err != nil {
		fmt.Fprintf(stderr, "qshare data stage: %v\n", err)
		return 70
	}
	var w data.Wrapper
	if err := json.Unmarshal(b, &w); err != nil {
		fmt.Fprintf(stderr, "qshare data stage: %s is not a wrapper configuration: %v\n", *config, err)
		return 70
	}
	if *instance < 0 || *instance >= max(w.Plan.Instances, 1) {
		fmt.Fprintf(stderr, "qshare data stage: --instance %d is not one of the %d instances\n", *instance, w.Plan.Instances)
		return 2
	}
	w.Plan.Instance = *instance
	if *install != "" {
		if err := installSelf(*install); err != nil {
			fmt.Fprintf(stderr, "qshare data stage: copying qshare into %s: %v\n", *install, err)
			return 70
		}
	}
	return data.RunStage(w)
}

// installSelf copies the running binary to dir/qshare, executable by
// every user (the training container's may be any).
func installSelf(dir string) error {
	self, err := os.Executable()
	if err != nil {
		return err
	}
	in, err := os.Open(self)
	if err != nil {
		return err
	}
	defer in.Close()
	tmp, err := os.CreateTemp(dir, ".qshare-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := io.Copy(tmp, in); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o755); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), filepath.Join(dir, "qshare"))
}
