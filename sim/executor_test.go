package sim

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"qshare/config"
)

// TestExecutorChangesNothing: naming an environment's executor (`executor:`
// in the file, docs/executors.md) changes nothing of what the simulator
// computes, since the engine knows nothing of executors.
func TestExecutorChangesNothing(t *testing.T) {
	doc, err := os.ReadFile("../examples/three-shares.yaml")
	if err != nil {
		t.Fatal(err)
	}
	named := strings.Replace(string(doc), "  - serviceEnvironmentName: gpu-pool\n", "  - serviceEnvironmentName: gpu-pool\n    executor: hpc\n", 1)
	if named == string(doc) {
		t.Fatal("the example's environment was not found")
	}
	report := func(text string) string {
		t.Helper()
		cfg, err := config.Parse("three-shares.yaml", []byte(text), config.Options{})
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.Open("../examples/three-shares-trace.csv")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		jobs, bad, err := ReadTrace(f, cfg, TraceOptions{})
		if err != nil || len(bad) > 0 {
			t.Fatalf("trace: %v %v", bad, err)
		}
		r, err := Run(context.Background(), cfg, jobs, Options{})
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	plain, withExec := report(string(doc)), report(named)
	if len(plain) < 100 {
		t.Fatalf("the report is too short to compare: %s", plain)
	}
	if plain != withExec {
		t.Errorf("the report changed with an executor named:\n%s\n%s", plain, withExec)
	}
}
