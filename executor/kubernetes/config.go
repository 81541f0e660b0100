package kubernetes

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
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
	StartTimeout       Duration                `json:"startTimeout,omitempty"`
	KeepEnded          Duration                `json:"keepEnded,omitempty"`
	StorageClassName   string                  `json:"storageClassName,omitempty"`
	CheckpointSize     string                  `json:"checkpointSize,omitempty"`
	ServiceAccountName string                  `json:"serviceAccountName,omitempty"`
	Defaults           PodDefaults             `json:"defaults,omitempty"`
	InstanceTypes      map[string]InstanceType `json:"instanceTypes,omitempty"`
	Shares             map[string]PodDefaults  `json:"shares,omitempty"`
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

// Duration is a time.Duration written as a Go duration ("90s", "5m").
type Duration time.Duration

// UnmarshalJSON reads a Go duration string.
func (d *Duration) UnmarshalJSON(b []byte) error {
	s := strings.Trim(string(b), `"`)
	v, err := time.ParseDuration(s)
	if err != nil || v < 0 {
		return fmt.Errorf("%q is not a duration such as 90s or 5m", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes a Go duration string.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(`"` + time.Duration(d).String() + `"`), nil
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
