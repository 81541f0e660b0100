package trainingjob_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"qshare"
	"qshare/executor/process"
	"qshare/executor/simulated"
	"qshare/trainingjob"
)

// base is a payload every rule accepts; each case changes one member.
func base() map[string]any {
	return map[string]any{
		"TrainingJobName":        "pytorch-training-2026-11-30-02-05-13-123",
		"AlgorithmSpecification": map[string]any{"TrainingImage": "img", "ContainerEntrypoint": []string{"true"}},
		"HyperParameters":        map[string]string{"epochs": "3", "sagemaker_program": `"train.py"`},
		"InputDataConfig":        []any{map[string]any{"ChannelName": "train.v1-a_b", "DataSource": map[string]any{"S3DataSource": map[string]any{"S3Uri": "file:///data"}}}},
		"ResourceConfig":         map[string]any{"InstanceType": "ml.g5.xlarge", "InstanceCount": 1},
		"StoppingCondition":      map[string]any{"MaxRuntimeInSeconds": 1},
		"Environment":            map[string]string{"NCCL_DEBUG": "INFO", "_x9": "", "QSHARE_SIM_DURATION": "1s", "QSHARE_STOP_GRACE": "5s"},
		"CheckpointConfig":       map[string]any{"LocalPath": "/opt/ml/checkpoints"},
	}
}

func encode(t *testing.T, p map[string]any) string {
	t.Helper()
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func strMap(n int, key func(int) string, val string) map[string]string {
	m := map[string]string{}
	for i := range n {
		m[key(i)] = val
	}
	return m
}

// TestValidateRefuses is one case per SageMaker rule (and qshare's own
// variables): each payload is refused with EINVALID, by a message that
// names the member and does not echo a long value whole.
func TestValidateRefuses(t *testing.T) {
	long := strings.Repeat("a", 5000)
	for _, tc := range []struct {
		name   string
		mod    func(p map[string]any)
		member string
	}{
		{"name with NUL", func(p map[string]any) { p["TrainingJobName"] = "a\x00b" }, "TrainingJobName"},
		{"name of 5000 characters", func(p map[string]any) { p["TrainingJobName"] = long }, "TrainingJobName"},
		{"name of 64 characters", func(p map[string]any) { p["TrainingJobName"] = strings.Repeat("a", 64) }, "TrainingJobName"},
		{"name ../../etc", func(p map[string]any) { p["TrainingJobName"] = "../../etc" }, "TrainingJobName"},
		{"name with underscore", func(p map[string]any) { p["TrainingJobName"] = "a_b" }, "TrainingJobName"},
		{"name ending in hyphen", func(p map[string]any) { p["TrainingJobName"] = "ab-" }, "TrainingJobName"},
		{"name starting with hyphen", func(p map[string]any) { p["TrainingJobName"] = "-ab" }, "TrainingJobName"},
		{"env key with newline", func(p map[string]any) { p["Environment"] = map[string]string{"A\nB": "x"} }, "Environment key"},
		{"env key with =", func(p map[string]any) { p["Environment"] = map[string]string{"A=B": "x"} }, "Environment key"},
		{"env key empty", func(p map[string]any) { p["Environment"] = map[string]string{"": "x"} }, "Environment key"},
		{"env key starting with digit", func(p map[string]any) { p["Environment"] = map[string]string{"1A": "x"} }, "Environment key"},
		{"env key of 513 characters", func(p map[string]any) { p["Environment"] = map[string]string{strings.Repeat("K", 513): "x"} }, "Environment has a key"},
		{"env value of 513 characters", func(p map[string]any) { p["Environment"] = map[string]string{"K": strings.Repeat("v", 513)} }, "Environment.K"},
		{"env value with NUL", func(p map[string]any) { p["Environment"] = map[string]string{"K": "a\x00"} }, "Environment.K"},
		{"env of 101 entries", func(p map[string]any) {
			p["Environment"] = strMap(101, func(i int) string { return fmt.Sprintf("K%d", i) }, "v")
		}, "Environment has 101 entries"},
		{"QSHARE_SUPERVISE", func(p map[string]any) { p["Environment"] = map[string]string{process.SupervisorEnv: "1"} }, "Environment." + process.SupervisorEnv},
		{"QSHARE_JOB_ID", func(p map[string]any) { p["Environment"] = map[string]string{"QSHARE_JOB_ID": "other"} }, "Environment.QSHARE_JOB_ID"},
		{"QSHARE_ENDPOINT", func(p map[string]any) { p["Environment"] = map[string]string{"QSHARE_ENDPOINT": "http://x"} }, "Environment.QSHARE_ENDPOINT"},
		{"hyperparameter key of 257 characters", func(p map[string]any) { p["HyperParameters"] = map[string]string{strings.Repeat("k", 257): "v"} }, "HyperParameters has a key"},
		{"hyperparameter value of 2501 characters", func(p map[string]any) { p["HyperParameters"] = map[string]string{"k": strings.Repeat("v", 2501)} }, `HyperParameters."k"`},
		{"hyperparameters of 101 entries", func(p map[string]any) {
			p["HyperParameters"] = strMap(101, func(i int) string { return fmt.Sprint(i) }, "v")
		}, "HyperParameters has 101 entries"},
		{"max runtime -5", func(p map[string]any) { p["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": -5} }, "StoppingCondition.MaxRuntimeInSeconds is -5"},
		{"max runtime 0", func(p map[string]any) { p["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": 0} }, "StoppingCondition.MaxRuntimeInSeconds is 0"},
		{"local path with NUL", func(p map[string]any) { p["CheckpointConfig"] = map[string]any{"LocalPath": "/opt/ml/a\x00b"} }, "CheckpointConfig.LocalPath"},
		{"local path of 5000 characters", func(p map[string]any) { p["CheckpointConfig"] = map[string]any{"LocalPath": "/" + long} }, "CheckpointConfig.LocalPath is 5001 characters"},
		{"local path relative", func(p map[string]any) { p["CheckpointConfig"] = map[string]any{"LocalPath": "../../etc"} }, "CheckpointConfig.LocalPath"},
		{"channel name with slash", func(p map[string]any) {
			p["InputDataConfig"] = []any{map[string]any{"ChannelName": "../x", "DataSource": map[string]any{}}}
		}, "InputDataConfig[0].ChannelName"},
		{"channel name empty", func(p map[string]any) {
			p["InputDataConfig"] = []any{map[string]any{"ChannelName": "ok"}, map[string]any{"ChannelName": ""}}
		}, "InputDataConfig[1].ChannelName"},
		{"channel name of 65 characters", func(p map[string]any) {
			p["InputDataConfig"] = []any{map[string]any{"ChannelName": strings.Repeat("c", 65)}}
		}, "InputDataConfig[0].ChannelName is 65 characters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := base()
			tc.mod(p)
			_, err := trainingjob.Parse(encode(t, p))
			if err == nil {
				t.Fatal("accepted")
			}
			msg := err.Error()
			if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(msg, tc.member) {
				t.Fatalf("error %q (code %q) does not name %q", msg, qshare.ErrorCodeOf(err), tc.member)
			}
			if len(msg) > 300 {
				t.Fatalf("the message is %d bytes: it echoes the value whole", len(msg))
			}
		})
	}
}

// TestValidateAccepts checks the limits themselves are allowed, and that
// the documented controls of the executors, read from the payload, are.
func TestValidateAccepts(t *testing.T) {
	ok := []func(p map[string]any){
		func(p map[string]any) {},
		func(p map[string]any) { p["TrainingJobName"] = strings.Repeat("a", 63) },
		func(p map[string]any) { p["TrainingJobName"] = "a--b-9" },
		func(p map[string]any) { p["TrainingJobName"] = "x" },
		func(p map[string]any) { delete(p, "TrainingJobName") },
		func(p map[string]any) { delete(p, "StoppingCondition") },
		func(p map[string]any) { p["StoppingCondition"] = map[string]any{"MaxWaitTimeInSeconds": 10} },
		func(p map[string]any) {
			p["Environment"] = strMap(100, func(i int) string { return fmt.Sprintf("K%d", i) }, strings.Repeat("é", 512))
		},
		func(p map[string]any) { p["Environment"] = map[string]string{strings.Repeat("K", 512): ""} },
		func(p map[string]any) {
			p["HyperParameters"] = strMap(100, func(i int) string { return fmt.Sprint(i) }, strings.Repeat("v", 2500))
		},
		func(p map[string]any) { p["HyperParameters"] = map[string]string{strings.Repeat("k", 256): ""} },
		func(p map[string]any) {
			p["CheckpointConfig"] = map[string]any{"LocalPath": "/" + strings.Repeat("a", 4095)}
		},
		func(p map[string]any) { p["CheckpointConfig"] = map[string]any{"S3Uri": "s3://b/c"} },
		func(p map[string]any) {
			p["InputDataConfig"] = []any{map[string]any{"ChannelName": strings.Repeat("c", 64)}}
		},
	}
	for i, mod := range ok {
		p := base()
		mod(p)
		if _, err := trainingjob.Parse(encode(t, p)); err != nil {
			t.Errorf("case %d refused: %v", i, err)
		}
	}
	for _, name := range []string{simulated.EnvDuration, simulated.EnvExitCode, simulated.EnvOnStop, simulated.EnvStopDelay,
		simulated.EnvStopGrace, process.EnvStopGrace} {
		if !trainingjob.PayloadControl(name) {
			t.Errorf("%s, which an executor reads from the payload, is refused", name)
		}
	}
	if trainingjob.PayloadControl(process.SupervisorEnv) {
		t.Errorf("%s is allowed in a payload", process.SupervisorEnv)
	}
}

// TestValidateReportsTheSmallestKey checks that a payload with several bad
// keys gets the same answer every time, although maps iterate at random.
func TestValidateReportsTheSmallestKey(t *testing.T) {
	p := base()
	p["Environment"] = map[string]string{"Z-1": "", "A-1": "", "M-1": "", "B\x00": "", "QSHARE_X": ""}
	payload := encode(t, p)
	for range 50 {
		_, err := trainingjob.Parse(payload)
		if err == nil || !strings.Contains(err.Error(), `"A-1"`) {
			t.Fatalf("error %v, want the one of A-1", err)
		}
	}
}

// TestParseAccepted checks that a payload an earlier version accepted
// still parses for a job already queued, unless it sets one of qshare's
// own variables.
func TestParseAccepted(t *testing.T) {
	old := `{"TrainingJobName":"train_model-1a2b3c4d","ResourceConfig":{"InstanceType":"ml.g5.xlarge"},` +
		`"CheckpointConfig":{"LocalPath":"checkpoints"},"StoppingCondition":{"MaxRuntimeInSeconds":60},"Environment":{"QSHARE_STOP_GRACE":"5"}}`
	if _, err := trainingjob.Parse(old); err == nil {
		t.Fatal("Parse accepts a TrainingJobName with '_'")
	}
	r, err := trainingjob.ParseAccepted(old)
	if err != nil {
		t.Fatal(err)
	}
	if r.TrainingJobName != "train_model-1a2b3c4d" || r.MaxRuntimeSeconds() != 60 || r.CheckpointConfig.LocalPath != "checkpoints" {
		t.Fatalf("ParseAccepted = %+v", r)
	}
	for _, env := range []string{`{"QSHARE_SUPERVISE":"1"}`, `{"QSHARE_JOB_ID\n":"x"}`} {
		_, err := trainingjob.ParseAccepted(`{"ResourceConfig":{"InstanceType":"ml.g5.xlarge"},"Environment":` + env + `}`)
		if err == nil || qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "Environment.") {
			t.Fatalf("ParseAccepted with Environment %s: %v", env, err)
		}
	}
	if _, err := trainingjob.ParseAccepted("{"); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Fatalf("ParseAccepted of a broken payload: %v", err)
	}
}
