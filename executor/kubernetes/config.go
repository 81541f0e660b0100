package kubernetes

import (
	"maps"
	"os"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"qshare"
)

// Config is the --kube-config file: how instance types map to nodes and
// what the pods of each type and share get. Every field may be left out.
//
//	startTimeout: 5m          # all-or-nothing: every pod running by then, else a capacity failure
//	keepEnded: 24h            # how long ended pods (their logs and exit) are kept
//	storageClassName: fast    # of the checkpoint claims; empty: the cluster's default class
//	checkpointSize: 10Gi      # of each checkpoint claim
//	serviceAccountName: train # of the attempts' pods
//	automountServiceAccountToken: false  # the default: pods get no API token
//	defaults:                 # every pod
//	  priorityClassName: batch
//	  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
//	instanceTypes:
//	  ml.g5.xlarge:
//	    nodeSelector: {node.kubernetes.io/instance-type: g5.xlarge}  # the default
//	    gpus: 1               # overrides the GPU table
//	    cpu: "3"              # limits per pod (one pod is one instance)
//	    memory: 14Gi
//	    tolerations: [...]
//	    priorityClassName: ...
//	shares:
//	  research:               # a quota share's pods, over their type's
//	    priorityClassName: low
//	    tolerations: [...]
type Config struct {
	// StartTimeout and KeepEnded are Go durations ("5m", "24h").
	StartTimeout       string `json:"startTimeout,omitempty"`
	KeepEnded          string `json:"keepEnded,omitempty"`
	StorageClassName   string `json:"storageClassName,omitempty"`
	CheckpointSize     string `json:"checkpointSize,omitempty"`
	ServiceAccountName string `json:"serviceAccountName,omitempty"`
	// AutomountServiceAccountToken gives the pods their service account's
	// API token. Off by default: a training container has no business
	// with the API server unless the administrator says so.
	AutomountServiceAccountToken bool `json:"automountServiceAccountToken,omitempty"`
	// DataImage is qshare's own image (deploy/Containerfile), which the
	// pods of a job with S3 data run as an init container to stage it
	// (data.go). Empty: such jobs are refused at submit.
	DataImage     string                  `json:"dataImage,omitempty"`
	Defaults      PodDefaults             `json:"defaults,omitempty"`
	InstanceTypes map[string]InstanceType `json:"instanceTypes,omitempty"`
	Shares        map[string]PodDefaults  `json:"shares,omitempty"`
}

// PodDefaults are the scheduling settings of some pods.
type PodDefaults struct {
	PriorityClassName string              `json:"priorityClassName,omitempty"`
	Tolerations       []corev1.Toleration `json:"tolerations,omitempty"`
}

// InstanceType is how one instance type is placed: the nodes it runs on
// and the resources of each of its pods.
type InstanceType struct {
	PodDefaults `json:",inline"`
	// NodeSelector replaces the default, node.kubernetes.io/instance-type
	// = the type without its "ml." prefix.
	NodeSelector map[string]string `json:"nodeSelector,omitempty"`
	// GPUs per instance; nil means the GPU table's count.
	GPUs *int64 `json:"gpus,omitempty"`
	// CPU and Memory are each pod's limits (Kubernetes quantities); empty
	// means none.
	CPU    string `json:"cpu,omitempty"`
	Memory string `json:"memory,omitempty"`
}

// duration reads one of the file's durations; "" is def.
func duration(field, v string, def time.Duration) (time.Duration, error) {
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, qshare.Errorf(qshare.EINVALID, "--kube-config %s %q is not a positive duration such as 90s or 5m", field, v)
	}
	return d, nil
}

// startTimeout is StartTimeout, or DefaultStartTimeout.
func (c Config) startTimeout() time.Duration {
	d, _ := duration("startTimeout", c.StartTimeout, DefaultStartTimeout)
	return d
}

// keepEnded is KeepEnded, or DefaultKeepEnded.
func (c Config) keepEnded() time.Duration {
	d, _ := duration("keepEnded", c.KeepEnded, DefaultKeepEnded)
	return d
}

// LoadConfig reads a --kube-config file; an empty path is the empty
// Config. It fails with an EINVALID *qshare.Error that names the field.
func LoadConfig(path string) (Config, error) {
	if path == "" {
		return Config{}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return Config{}, qshare.Errorf(qshare.EINVALID, "--kube-config: %v", err)
	}
	return ParseConfig(b)
}

// ParseConfig reads the YAML of a --kube-config file and checks it.
func ParseConfig(b []byte) (Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return Config{}, qshare.Errorf(qshare.EINVALID, "--kube-config: %v", err)
	}
	return c, c.check()
}

func (c Config) check() error {
	if _, err := duration("startTimeout", c.StartTimeout, 0); err != nil {
		return err
	}
	if _, err := duration("keepEnded", c.KeepEnded, 0); err != nil {
		return err
	}
	if c.CheckpointSize != "" {
		if _, err := resource.ParseQuantity(c.CheckpointSize); err != nil {
			return qshare.Errorf(qshare.EINVALID, "--kube-config checkpointSize %q is not a Kubernetes quantity such as 10Gi", c.CheckpointSize)
		}
	}
	for _, t := range slices.Sorted(maps.Keys(c.InstanceTypes)) {
		it := c.InstanceTypes[t]
		for field, q := range map[string]string{"cpu": it.CPU, "memory": it.Memory} {
			if q == "" {
				continue
			}
			if _, err := resource.ParseQuantity(q); err != nil {
				return qshare.Errorf(qshare.EINVALID, "--kube-config instanceTypes.%s.%s %q is not a Kubernetes quantity such as 4 or 16Gi", t, field, q)
			}
		}
		if it.GPUs != nil && *it.GPUs < 0 {
			return qshare.Errorf(qshare.EINVALID, "--kube-config instanceTypes.%s.gpus is %d: give 0 or more", t, *it.GPUs)
		}
	}
	return nil
}
