package api_test

import (
	"encoding/json"
	"strings"
	"testing"

	"qshare"
	"qshare/executor/simulated"
)

// fewGPUs is an executor whose host has 2 GPUs of one instance each.
type fewGPUs struct{ *simulated.Executor }

func (fewGPUs) CheckCapacity(l qshare.Capacity) string {
	if n := l["ml.g5.xlarge"]; n > 2 {
		return "the limits need 3 GPUs but this host has only 2"
	}
	return ""
}

// TestEnvironmentCapacityWarning: an environment that asks for more than the
// host has is created, and describing it says so (statusReason, a qshare
// extension the SDKs ignore), until an update brings it within the host.
func TestEnvironmentCapacityWarning(t *testing.T) {
	// The harness's simulated executor, on a host of 2 GPUs.
	s := newServer(t, func(c *daemonConfig) { c.Executor = fewGPUs{c.Executor.(*simulated.Executor)} })
	call := func(op, body string) map[string]any {
		t.Helper()
		resp, b := s.post("/v1/"+op, body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", op, resp.StatusCode, b)
		}
		var out map[string]any
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	reason := func() any {
		out := call("describeserviceenvironments", `{"serviceEnvironments":["pool"]}`)
		return out["serviceEnvironments"].([]any)[0].(map[string]any)["statusReason"]
	}
	call("createserviceenvironment", `{"serviceEnvironmentName":"pool","serviceEnvironmentType":"SAGEMAKER_TRAINING","capacityLimits":[{"capacityUnit":"ml.g5.xlarge","maxCapacity":3}]}`)
	if r, _ := reason().(string); !strings.Contains(r, "only 2") {
		t.Fatalf("statusReason of an environment larger than the host = %v, want the executor's warning", r)
	}
	call("updateserviceenvironment", `{"serviceEnvironment":"pool","capacityLimits":[{"capacityUnit":"ml.g5.xlarge","maxCapacity":2}]}`)
	if r := reason(); r != nil {
		t.Fatalf("statusReason after the update = %v, want none", r)
	}
}
