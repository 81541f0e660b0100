package kubernetes

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"qshare/data"
	"qshare/executor"
	"qshare/trainingjob"
)

// The labels and annotations qshare puts on what it creates. The labels
// carry values made fit for a label (labelValue); the annotations carry
// the exact IDs.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	LabelJobID     = "qshare.io/job-id"
	LabelAttemptID = "qshare.io/attempt-id"
	LabelQueue     = "qshare.io/queue"
	LabelShare     = "qshare.io/share"
	LabelIndex     = "qshare.io/index"

	annJobID     = "qshare.io/job-id"
	annAttemptID = "qshare.io/attempt-id"
	annStarted   = "qshare.io/started-at"
	annInstances = "qshare.io/instances"
	annGrace     = "qshare.io/grace"
	annStopped   = "qshare.io/stopped-by-qshare"
	// annUploads marks the pod whose data wrapper uploads after a stop
	// (dataPods.apply): its deletion's grace period is at least its own
	// terminationGracePeriodSeconds, the program's grace and the upload's.
	annUploads = "qshare.io/uploads-after-stop"
	// annEnded carries the end qshare decided for an attempt (an
	// executor.Exit in JSON) whose other pods it is deleting.
	annEnded = "qshare.io/ended-by-qshare"
	annType  = "qshare.io/instance-type"
	// annParts is, on an attempt's ConfigMap and pods, how many
	// ConfigMaps its files take, where that is more than one (partName),
	// or "0" on the pod of an attempt whose files are in its annotations
	// (annFile).
	annParts = "qshare.io/config-parts"
	// annFile prefixes the file name of each input/config file that a
	// one-instance attempt's pod carries as an annotation, projected into
	// /opt/ml/input/config by a downwardAPI volume.
	annFile = "qshare.io/"
	// annGone marks, in the executor's memory only, a pod that is deleted.
	annGone = "qshare.io/gone"

	// Finalizer is on every pod qshare creates: the lasting mark that its
	// attempt was started. The pod garbage collector (or a person) may
	// delete an ended pod while no qshare server runs; without the mark
	// a restarted Start of an attempt the store still says is STARTING
	// would find no pod and run the attempt a second time. With it the
	// deleted pod stays, ended, until qshare has recorded its attempt's
	// end (Forget), and qshare then removes the finalizer. The Job
	// controller keeps its pods so for the same reason
	// (batch.kubernetes.io/job-tracking).
	Finalizer = "qshare.io/attempt-tracking"

	managedBy = "qshare"
	container = "training"
	// GPU is the extended resource of NVIDIA's device plugin.
	GPU corev1.ResourceName = "nvidia.com/gpu"
	// InstanceTypeLabel is the default node label of an instance type.
	InstanceTypeLabel = "node.kubernetes.io/instance-type"
	// FailureFile is SageMaker's failure file, the pods' terminationMessagePath.
	FailureFile = "/opt/ml/output/failure"
	// DefaultCheckpointDir is SageMaker's default CheckpointConfig.LocalPath.
	DefaultCheckpointDir = "/opt/ml/checkpoints"
	// modelDir and configDir are the pods' other mounts.
	modelDir  = "/opt/ml/model"
	configDir = "/opt/ml/input/config"
)

func hash8(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:4])
}

// dnsPart lower-cases s and keeps what a DNS label may hold, at most n
// bytes of it.
func dnsPart(s string, n int) string {
	b := []byte(strings.ToLower(s))
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			b[i] = '-'
		}
	}
	out := strings.Trim(string(b), "-")
	if len(out) > n {
		out = strings.Trim(out[:n], "-")
	}
	return out
}

// baseName names an attempt's objects: "qs-" and the attempt ID made fit
// for a DNS label, and a hash of the exact ID (so that IDs that differ only
// in case or punctuation never share a name). It fits a Service's 63 bytes
// with room for the pods' "-<index>".
func baseName(attemptID string) string {
	return "qs-" + dnsPart(attemptID, 40) + "-" + hash8(attemptID)
}

func podName(attemptID string, i int) string { return baseName(attemptID) + "-" + strconv.Itoa(i) }

// partName names the ConfigMap of part k (from 1) of an attempt's
// per-host files beyond its own ConfigMap (baseName).
func partName(attemptID string, k int) string { return baseName(attemptID) + "-rc" + strconv.Itoa(k) }

// defaultConfigBudget is how many bytes of files one ConfigMap of an
// attempt holds at the most (Executor.configBudget): the API server
// refuses one of more than 1 MiB.
const defaultConfigBudget = 896 << 10

// inlineBudget is how many bytes of files a one-instance attempt's pod
// carries in its annotations at the most; past it they go to a ConfigMap.
// A pod is written again on each change of its status and sent to every
// watcher, so the budget is small; the hyperparameters of most jobs take
// well under 1 KiB, while SageMaker allows 100 of up to 2,500 bytes each.
const inlineBudget = 8 << 10

// noConfigMaps is partsOf an attempt whose files are its pod's
// annotations: it has no ConfigMap.
const noConfigMaps = -1

// partsOf reads annParts: how many ConfigMaps an attempt's files take (1
// where it is absent), or noConfigMaps.
func partsOf(ann map[string]string) int {
	k, err := strconv.Atoi(ann[annParts])
	switch {
	case err == nil && k == 0:
		return noConfigMaps
	case err == nil && k > 1:
		return k
	}
	return 1
}

// claimName names a job's checkpoint claim, the same on every attempt.
func claimName(jobID string) string { return "qs-ckpt-" + dnsPart(jobID, 40) + "-" + hash8(jobID) }

// labelValue makes s fit for a label value: as it is when it fits, else a
// readable prefix and a hash.
func labelValue(s string) string {
	ok := len(s) <= 63
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || (c == '-' || c == '_' || c == '.') && i > 0 && i < len(s)-1
	}
	if ok {
		return s
	}
	p := []byte(s)
	for i, c := range p {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			p[i] = '-'
		}
	}
	pre := strings.Trim(string(p), "-")
	if len(pre) > 40 {
		pre = strings.Trim(pre[:40], "-")
	}
	if pre == "" {
		return "h" + hash8(s)
	}
	return pre + "-" + hash8(s)
}

func podLabels(s executor.Spec) map[string]string {
	return map[string]string{LabelManagedBy: managedBy, LabelJobID: labelValue(s.JobID), LabelAttemptID: labelValue(s.AttemptID),
		LabelQueue: labelValue(s.Queue), LabelShare: labelValue(s.Share)}
}

// plan is an attempt's objects, made by build.
type plan struct {
	claim  *corev1.PersistentVolumeClaim // nil: the payload has no CheckpointConfig
	config *corev1.ConfigMap
	// parts are the ConfigMaps of the per-host files that config has no
	// room for (partName 1, 2, ...), empty below some 60 to 100 instances.
	parts   []*corev1.ConfigMap
	service *corev1.Service // nil for one instance
	pods    []*corev1.Pod
	// secret is the attempt's data Secret (data.go), nil for a payload
	// that moves no S3 data; it is created after the ConfigMap, which
	// owns it.
	secret *corev1.Secret
}

// configMaps is how many ConfigMaps the plan has, or noConfigMaps.
func (p *plan) configMaps() int {
	if p.config == nil {
		return noConfigMaps
	}
	return 1 + len(p.parts)
}

// build makes an attempt's objects: the checkpoint claim of its job (when
// its payload has a CheckpointConfig), the
// ConfigMap of its input/config files (and more of them where one cannot
// hold them all), a headless Service for more than one instance, and one
// pod per instance. The files of an attempt of one instance go in its
// pod's annotations instead, where they fit inlineBudget: that saves the
// API server a ConfigMap's creation and deletion, and the kubelet its
// read, for most jobs.
func (e *Executor) build(s executor.Spec, req *trainingjob.Request, typ string, n int, grace time.Duration, started time.Time) (*plan, error) {
	base := baseName(s.AttemptID)
	lb := podLabels(s)
	ann := map[string]string{annJobID: s.JobID, annAttemptID: s.AttemptID, annStarted: started.UTC().Format(time.RFC3339Nano),
		annInstances: strconv.Itoa(n), annType: typ}
	if grace > 0 {
		ann[annGrace] = grace.String()
	}
	meta := func(name string) metav1.ObjectMeta {
		l := map[string]string{}
		for k, v := range lb {
			l[k] = v
		}
		a := map[string]string{}
		for k, v := range ann {
			a[k] = v
		}
		return metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: l, Annotations: a}
	}
	p := &plan{}
	// A checkpoint directory only where the payload asks for one, as on
	// SageMaker: a job without a CheckpointConfig is its pods alone (one
	// pod for one instance), which spares the API server a claim's
	// creation and deletion for each such job.
	ck := checkpointDir(req)
	if ck != "" {
		size := e.cfg.CheckpointSize
		if size == "" {
			size = "10Gi"
		}
		claimLabels := map[string]string{LabelManagedBy: managedBy, LabelJobID: labelValue(s.JobID)}
		p.claim = &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: claimName(s.JobID), Namespace: e.ns, Labels: claimLabels,
			Annotations: map[string]string{annJobID: s.JobID}},
			Spec: corev1.PersistentVolumeClaimSpec{AccessModes: []corev1.PersistentVolumeAccessMode{accessMode(n)},
				Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}}}}
		if e.cfg.StorageClassName != "" {
			sc := e.cfg.StorageClassName
			p.claim.Spec.StorageClassName = &sc
		}
	}
	hosts := make([]string, n)
	for i := range hosts {
		hosts[i] = podName(s.AttemptID, i)
		if n > 1 {
			hosts[i] += "." + base
		}
	}
	dp, err := e.dataPlan(s, req, n, ck, e.stopGrace(grace, 0))
	if err != nil {
		return nil, err
	}
	hp, _ := json.Marshal(orEmpty(req.HyperParameters))
	var channels []string
	for _, c := range req.InputDataConfig {
		channels = append(channels, c.ChannelName)
	}
	b := data.InputDataConfigJSON(req)
	// Each host's resourceconfig.json names every host twice, so an
	// attempt's files grow as n²: past some 60 to 100 instances (the host
	// names carry the attempt's ID) they no longer fit one ConfigMap.
	// They fill the attempt's ConfigMap in host order, then as many parts
	// as they need.
	files := make([]map[string]string, 1)
	files[0] = map[string]string{"hyperparameters.json": string(hp), "inputdataconfig.json": string(b)}
	part := make([]int, n)
	room := e.configBudget - len(hp) - len(b)
	for i, h := range hosts {
		rc, _ := json.Marshal(executor.NewResourceConfig(h, typ, hosts, "eth0"))
		key := rcKey(i)
		if len(key)+len(rc) > room {
			files = append(files, map[string]string{})
			room = e.configBudget
		}
		room -= len(key) + len(rc)
		part[i] = len(files) - 1
		files[part[i]][key] = string(rc)
	}
	var inline map[string]string // file name → content, on the pod
	// A data Secret needs an owner that goes with the attempt: the
	// ConfigMap.
	if n == 1 && e.configBudget-room <= inlineBudget && dp == nil {
		inline = map[string]string{"resourceconfig.json": files[0][rcKey(0)]}
		for _, k := range []string{"hyperparameters.json", "inputdataconfig.json"} {
			inline[k] = files[0][k]
		}
		ann[annParts] = "0"
	} else {
		if len(files) > 1 {
			ann[annParts] = strconv.Itoa(len(files))
		}
		p.config = &corev1.ConfigMap{ObjectMeta: meta(base), Data: files[0]}
		for k := 1; k < len(files); k++ {
			p.parts = append(p.parts, &corev1.ConfigMap{ObjectMeta: meta(partName(s.AttemptID, k)), Data: files[k]})
		}
	}
	if n > 1 {
		p.service = &corev1.Service{ObjectMeta: meta(base), Spec: corev1.ServiceSpec{ClusterIP: corev1.ClusterIPNone,
			Selector: map[string]string{LabelAttemptID: lb[LabelAttemptID]}, PublishNotReadyAddresses: true}}
	}
	env := executor.TrainingEnv(s, req, executor.TrainingDirs{Model: "/opt/ml/model", Output: "/opt/ml/output", OutputData: "/opt/ml/output/data",
		Input: "/opt/ml/input", Config: "/opt/ml/input/config", Checkpoint: ck}, typ)
	hostsJSON, _ := json.Marshal(hosts)
	env["SM_HOSTS"] = string(hostsJSON)
	it := e.cfg.InstanceTypes[typ]
	sel, gpus := e.placement(typ)
	env["SM_NUM_GPUS"] = strconv.FormatInt(gpus, 10)
	for _, c := range channels {
		env["SM_CHANNEL_"+executor.EnvName(c)] = "/opt/ml/input/data/" + c
	}
	limits := corev1.ResourceList{}
	if gpus > 0 {
		limits[GPU] = *resource.NewQuantity(gpus, resource.DecimalSI)
	}
	if it.CPU != "" {
		limits[corev1.ResourceCPU] = resource.MustParse(it.CPU)
	}
	if it.Memory != "" {
		limits[corev1.ResourceMemory] = resource.MustParse(it.Memory)
	}
	prio, tols := e.cfg.Defaults.PriorityClassName, append([]corev1.Toleration(nil), e.cfg.Defaults.Tolerations...)
	if it.PriorityClassName != "" {
		prio = it.PriorityClassName
	}
	tols = append(tols, it.Tolerations...)
	if sh, ok := e.cfg.Shares[s.Share]; ok {
		if sh.PriorityClassName != "" {
			prio = sh.PriorityClassName
		}
		tols = append(tols, sh.Tolerations...)
	}
	graceSecs := int64(math.Ceil(e.stopGrace(grace, 0).Seconds()))
	automount := e.cfg.AutomountServiceAccountToken
	for i := 0; i < n; i++ {
		name := podName(s.AttemptID, i)
		pe := make(map[string]string, len(env)+1)
		for k, v := range env {
			pe[k] = v
		}
		pe["SM_CURRENT_HOST"] = hosts[i]
		m := meta(name)
		m.Labels[LabelIndex] = strconv.Itoa(i)
		m.Finalizers = []string{Finalizer}
		for k, v := range inline {
			m.Annotations[annFile+k] = v
		}
		vol := configVolume(s.AttemptID, i, part[i])
		if inline != nil {
			vol = inlineConfigVolume(inline)
		}
		pod := &corev1.Pod{ObjectMeta: m, Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: &graceSecs,
			NodeSelector:                  sel,
			Tolerations:                   tols,
			PriorityClassName:             prio,
			ServiceAccountName:            e.cfg.ServiceAccountName,
			AutomountServiceAccountToken:  &automount,
			Hostname:                      name,
			Containers: []corev1.Container{{
				Name: container, Image: req.AlgorithmSpecification.TrainingImage,
				Command: req.AlgorithmSpecification.ContainerEntrypoint, Args: req.AlgorithmSpecification.ContainerArguments,
				Env:                      envList(pe),
				Resources:                corev1.ResourceRequirements{Limits: limits},
				TerminationMessagePath:   FailureFile,
				TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				VolumeMounts: []corev1.VolumeMount{
					{Name: "config", MountPath: configDir, ReadOnly: true},
					{Name: "model", MountPath: modelDir},
				},
			}},
			Volumes: []corev1.Volume{
				vol,
				{Name: "model", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		}}
		if p.claim != nil {
			c := &pod.Spec.Containers[0]
			c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: "checkpoints", MountPath: ck})
			pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "checkpoints",
				VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: p.claim.Name}}})
		}
		if n > 1 {
			pod.Spec.Subdomain = base
		}
		if dp != nil {
			dp.apply(pod, i, base)
		}
		p.pods = append(p.pods, pod)
	}
	if dp != nil {
		p.secret = dp.secret
		p.secret.ObjectMeta = meta(base)
	}
	return p, nil
}

// checkpointDir is the pods' checkpoint directory: CheckpointConfig's
// LocalPath, or SageMaker's default; "" for a payload without a
// CheckpointConfig.
func checkpointDir(req *trainingjob.Request) string {
	if req.CheckpointConfig == nil {
		return ""
	}
	if strings.TrimSpace(req.CheckpointConfig.LocalPath) != "" {
		return req.CheckpointConfig.LocalPath
	}
	return DefaultCheckpointDir
}

func rcKey(i int) string { return fmt.Sprintf("resourceconfig-%d.json", i) }

// configVolume is pod i's /opt/ml/input/config: its attempt's ConfigMap,
// or, where its resourceconfig.json is in part k, a projection of that
// and the attempt's ConfigMap.
func configVolume(attemptID string, i, k int) corev1.Volume {
	shared := []corev1.KeyToPath{{Key: "hyperparameters.json", Path: "hyperparameters.json"},
		{Key: "inputdataconfig.json", Path: "inputdataconfig.json"}}
	own := corev1.KeyToPath{Key: rcKey(i), Path: "resourceconfig.json"}
	base := corev1.LocalObjectReference{Name: baseName(attemptID)}
	if k == 0 {
		return corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: base, Items: append(shared, own)}}}
	}
	return corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
		Sources: []corev1.VolumeProjection{
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: base, Items: shared}},
			{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: partName(attemptID, k)},
				Items: []corev1.KeyToPath{own}}},
		}}}}
}

// inlineConfigVolume is the /opt/ml/input/config of a pod that carries
// its files as annotations (annFile): the downward API projects each.
func inlineConfigVolume(files map[string]string) corev1.Volume {
	var items []corev1.DownwardAPIVolumeFile
	for _, k := range slices.Sorted(maps.Keys(files)) {
		items = append(items, corev1.DownwardAPIVolumeFile{Path: k,
			FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + annFile + k + "']"}})
	}
	return corev1.Volume{Name: "config", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: items}}}
}

// accessMode is the checkpoint claim's: ReadWriteOnce for a job of one
// instance (any storage class has it), ReadWriteMany for one whose pods
// share it across nodes.
func accessMode(n int) corev1.PersistentVolumeAccessMode {
	if n > 1 {
		return corev1.ReadWriteMany
	}
	return corev1.ReadWriteOnce
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func envList(m map[string]string) []corev1.EnvVar {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sortStrings(keys)
	out := make([]corev1.EnvVar, len(keys))
	for i, k := range keys {
		out[i] = corev1.EnvVar{Name: k, Value: m[k]}
	}
	return out
}
