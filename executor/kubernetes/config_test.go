package kubernetes

import (
	"strings"
	"testing"
	"time"

	"qshare"
)

// TestParseConfig: the --kube-config file of the docs is read as written,
// and each mistake is an EINVALID error that names the field.
func TestParseConfig(t *testing.T) {
	c, err := ParseConfig([]byte(`
startTimeout: 5m
keepEnded: 24h
storageClassName: fast
checkpointSize: 10Gi
serviceAccountName: train
automountServiceAccountToken: true
defaults:
  priorityClassName: batch
  tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
instanceTypes:
  ml.g5.xlarge:
    nodeSelector: {node.kubernetes.io/instance-type: g5.xlarge}
    gpus: 1
    cpu: "3"
    memory: 14Gi
shares:
  research: {priorityClassName: low}
`))
	if err != nil {
		t.Fatal(err)
	}
	it := c.InstanceTypes["ml.g5.xlarge"]
	if c.startTimeout() != 5*time.Minute || c.Defaults.Tolerations[0].Key != "nvidia.com/gpu" || *it.GPUs != 1 || it.Memory != "14Gi" ||
		it.NodeSelector["node.kubernetes.io/instance-type"] != "g5.xlarge" || c.Shares["research"].PriorityClassName != "low" || !c.AutomountServiceAccountToken {
		t.Errorf("parsed %+v", c)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"startTimeout: soon", "startTimeout"},
		{"checkpointSize: lots", "checkpointSize"},
		{"instanceTypes: {ml.g5.xlarge: {cpu: many}}", "instanceTypes.ml.g5.xlarge.cpu"},
		{"instanceTypes: {ml.g5.xlarge: {gpus: -1}}", "gpus"},
		{"nodeSelecter: {}", "nodeSelecter"},
	} {
		_, err := ParseConfig([]byte(tc.yaml))
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) = %v, want EINVALID naming %s", tc.yaml, err, tc.want)
		}
	}
}

// TestNames: object names fit Kubernetes' limits and differ for IDs that
// differ only in case or punctuation; label values fit a label.
func TestNames(t *testing.T) {
	long := strings.Repeat("x", 200)
	for _, id := range []string{"0191f3a2-7b6c-7a81-b4e7-e6e4f24146c1-12", "Job_A", "job.a", long} {
		if n := podName(id, 999); len(n) > 63 || strings.ToLower(n) != n {
			t.Errorf("podName(%q) = %q", id, n)
		}
		if v := labelValue(id); len(v) > 63 {
			t.Errorf("labelValue(%q) = %q", id, v)
		}
	}
	if baseName("Job_A") == baseName("job-a") {
		t.Errorf("two IDs share a name")
	}
	if labelValue("QS1") != "QS1" || labelValue("") != "" {
		t.Errorf("a label value that fits was changed")
	}
}
