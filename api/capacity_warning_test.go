package api_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"qshare"
	"qshare/api"
	"qshare/daemon"
	"qshare/executor/simulated"
	"qshare/sqlite"
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
	db, err := sqlite.Open(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	d, err := daemon.New(daemon.Config{Store: db, Executor: fewGPUs{simulated.New(simulated.Options{})}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	srv := httptest.NewServer(api.New(d, slog.New(slog.DiscardHandler)))
	defer srv.Close()
	call := func(op, body string) map[string]any {
		t.Helper()
		resp, err := http.Post(srv.URL+"/v1/"+op, "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
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
