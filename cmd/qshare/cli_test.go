package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"qshare/plan"
	"qshare/trainingjob"
)

// submitWith parses submit's flags from args, as the command would, and
// builds the request.
func submitWith(t *testing.T, args ...string) (*batch.SubmitServiceJobInput, error) {
	t.Helper()
	var o submitOptions
	f := pflag.NewFlagSet("submit", pflag.ContinueOnError)
	defineSubmitFlags(f, &o)
	if err := f.Parse(args); err != nil {
		t.Fatalf("parse %v: %v", args, err)
	}
	return buildSubmit(f, o, f.Args(), strings.NewReader(`{"TrainingJobName":"from-stdin","ResourceConfig":{"InstanceType":"ml.p4d.24xlarge","InstanceCount":2}}`))
}

func payloadOf(t *testing.T, in *batch.SubmitServiceJobInput) *trainingjob.Request {
	t.Helper()
	r, err := trainingjob.Parse(aws.ToString(in.ServiceRequestPayload))
	if err != nil {
		t.Fatalf("payload %s: %v", aws.ToString(in.ServiceRequestPayload), err)
	}
	return r
}

// TestSubmitNameThatCannotBeATrainingJobName checks that a job name with
// '_' (which job names allow and TrainingJobName does not, as the default
// name of train_model.py has) leaves TrainingJobName out instead of
// building a payload the server refuses.
func TestSubmitNameThatCannotBeATrainingJobName(t *testing.T) {
	for _, args := range [][]string{{"--name", "my_job"}, {"--", "python", "train_model.py"}} {
		in, err := submitWith(t, append([]string{"--queue", "training", "--share", "QS1", "--instance-type", "ml.g5.xlarge"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		if r := payloadOf(t, in); r.TrainingJobName != "" || !strings.Contains(aws.ToString(in.JobName), "_") {
			t.Errorf("%v: job name %q, TrainingJobName %q", args, aws.ToString(in.JobName), r.TrainingJobName)
		}
	}
}

func TestSubmitBuildsThePayload(t *testing.T) {
	in, err := submitWith(t, "--queue", "training", "--share", "QS1", "--priority", "7", "--name", "resnet-1",
		"--instance-type", "ml.g5.xlarge", "--instance-count", "2", "--env", "EPOCHS=10", "-e", "LR=0.1",
		"--retry-attempts", "3", "--preemption-retries", "0", "--timeout", "90m", "--tag", "team=vision",
		"--checkpoint-dir", "/opt/ml/checkpoints", "--", "python", "train.py", "--lr", "0.1")
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(in.JobQueue) != "training" || aws.ToString(in.QuotaShareName) != "QS1" || aws.ToString(in.JobName) != "resnet-1" {
		t.Errorf("queue, share, name = %s, %s, %s", aws.ToString(in.JobQueue), aws.ToString(in.QuotaShareName), aws.ToString(in.JobName))
	}
	if in.ServiceJobType != types.ServiceJobTypeSagemakerTraining {
		t.Errorf("serviceJobType %s", in.ServiceJobType)
	}
	if aws.ToInt32(in.SchedulingPriority) != 7 || aws.ToInt32(in.RetryStrategy.Attempts) != 3 ||
		aws.ToInt32(in.PreemptionConfiguration.PreemptionRetriesBeforeTermination) != 0 ||
		aws.ToInt32(in.TimeoutConfig.AttemptDurationSeconds) != 5400 || in.Tags["team"] != "vision" {
		t.Errorf("options not carried over: %+v", in)
	}
	r := payloadOf(t, in)
	d, err := r.Demand()
	if err != nil || d["ml.g5.xlarge"] != 2 || len(d) != 1 {
		t.Errorf("demand %v, %v", d, err)
	}
	if got := strings.Join(r.Command(), " "); got != "python train.py --lr 0.1" {
		t.Errorf("command %q", got)
	}
	if r.AlgorithmSpecification.ContainerEntrypoint[0] != "python" || r.AlgorithmSpecification.TrainingImage != PlaceholderImage {
		t.Errorf("algorithm specification %+v", r.AlgorithmSpecification)
	}
	if r.Environment["EPOCHS"] != "10" || r.Environment["LR"] != "0.1" || r.TrainingJobName != "resnet-1" {
		t.Errorf("environment %v, training job name %q", r.Environment, r.TrainingJobName)
	}
	if r.StoppingCondition == nil || r.MaxRuntimeSeconds() != 5400 || r.CheckpointConfig.LocalPath != "/opt/ml/checkpoints" {
		t.Errorf("stopping condition %+v, checkpoint %+v", r.StoppingCondition, r.CheckpointConfig)
	}
}

func TestSubmitDefaults(t *testing.T) {
	in, err := submitWith(t, "--queue", "q", "--share", "s", "--instance-type", "ml.g5.xlarge", "--", "./scripts/train.sh")
	if err != nil {
		t.Fatal(err)
	}
	// Unset options are not sent, so the server's defaults apply.
	if in.SchedulingPriority != nil || in.RetryStrategy != nil || in.PreemptionConfiguration != nil || in.TimeoutConfig != nil || in.Tags != nil {
		t.Errorf("unset options were sent: %+v", in)
	}
	if name := aws.ToString(in.JobName); !strings.HasPrefix(name, "train-") || len(name) != len("train-")+8 {
		t.Errorf("default name %q, want train-XXXXXXXX", name)
	}
	r := payloadOf(t, in)
	if d, _ := r.Demand(); d["ml.g5.xlarge"] != 1 {
		t.Errorf("default demand %v", d)
	}
	if r.StoppingCondition != nil || r.AlgorithmSpecification.ContainerArguments != nil {
		t.Errorf("payload %s", aws.ToString(in.ServiceRequestPayload))
	}
}

func TestSubmitPayloadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "job.json")
	payload := `{"TrainingJobName":"mine","ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":3},"Unknown":{"kept":true}}`
	if err := os.WriteFile(file, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	in, err := submitWith(t, "--queue", "q", "--share", "s", "--payload", file)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(in.ServiceRequestPayload) != payload || aws.ToString(in.JobName) != "mine" {
		t.Errorf("payload not sent as it is: %s (name %s)", aws.ToString(in.ServiceRequestPayload), aws.ToString(in.JobName))
	}
	in, err = submitWith(t, "--queue", "q", "--share", "s", "--payload", file, "--name", "other")
	if err != nil || aws.ToString(in.JobName) != "other" {
		t.Errorf("--name with --payload: %v, %v", err, in)
	}
	in, err = submitWith(t, "--queue", "q", "--payload", "-")
	if err != nil || aws.ToString(in.JobName) != "from-stdin" {
		t.Errorf("--payload -: %v, %v", err, in)
	}
}

func TestSubmitRejects(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--share", "s", "--instance-type", "t"}, "--queue is required"},
		{[]string{"-q", "q"}, "--instance-type is required"},
		{[]string{"-q", "q", "--instance-type", "t", "--instance-count", "0"}, "--instance-count 0"},
		{[]string{"-q", "q", "--instance-type", "t", "-p", "10000"}, "out of range"},
		{[]string{"-q", "q", "--instance-type", "t", "--retry-attempts", "11"}, "--retry-attempts 11"},
		{[]string{"-q", "q", "--instance-type", "t", "--preemption-retries", "-2"}, "--preemption-retries -2"},
		{[]string{"-q", "q", "--instance-type", "t", "-e", "NOEQUALS"}, "not KEY=VALUE"},
		{[]string{"-q", "q", "--instance-type", "t", "-e", "1X=2"}, "not a valid variable name"},
		{[]string{"-q", "q", "--instance-type", "t", "--name", "has space"}, "--name \"has space\" is not valid"},
		{[]string{"-q", "q", "--payload", "-", "--env", "A=1"}, "--env cannot be combined with --payload"},
		{[]string{"-q", "q", "--payload", "-", "--", "python"}, "cannot be combined with --payload"},
		{[]string{"-q", "q", "--payload", "/does/not/exist"}, "cannot read the payload"},
		{[]string{"-q", "q", "--instance-type", "t", "--", strings.Repeat("x", 11000)}, "at most 10240 are allowed"},
	} {
		_, err := submitWith(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("submit %v: error %v, want one containing %q", tc.args, err, tc.want)
		}
	}
}

func TestWireUsesTheAPIsNames(t *testing.T) {
	out := &batch.DescribeServiceJobOutput{
		JobId: aws.String("id"), JobName: aws.String("n"), Status: types.ServiceJobStatusRunnable,
		SchedulingPriority: aws.Int32(3), CreatedAt: aws.Int64(1700000000000),
		CapacityUsage:     []types.ServiceJobCapacityUsageDetail{{CapacityUnit: aws.String("ml.g5.xlarge"), Quantity: aws.Float64(1)}},
		PreemptionSummary: &types.ServiceJobPreemptionSummary{PreemptedAttemptCount: aws.Int32(1)},
		Tags:              map[string]string{"team": "a"},
	}
	b, err := json.Marshal(wire(out))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"capacityUsage":[{"capacityUnit":"ml.g5.xlarge","quantity":1}],"createdAt":1700000000000,"jobId":"id","jobName":"n","preemptionSummary":{"preemptedAttemptCount":1},"schedulingPriority":3,"status":"RUNNABLE","tags":{"team":"a"}}`
	if string(b) != want {
		t.Errorf("wire JSON\n got %s\nwant %s", b, want)
	}
	y, err := yaml.Marshal(wire(out))
	if err != nil || !strings.Contains(string(y), "schedulingPriority: 3\n") {
		t.Errorf("wire YAML %s, %v", y, err)
	}
	// Values with json tags keep them.
	act := plan.Action{Kind: "jobQueue", Name: "q", Action: "created", DryRun: true}
	b, _ = json.Marshal(wire(act))
	if string(b) != `{"action":"created","dryRun":true,"kind":"jobQueue","name":"q"}` {
		t.Errorf("tagged value %s", b)
	}
}

func TestOutputFlag(t *testing.T) {
	var buf bytes.Buffer
	s := &session{output: "yaml", out: &buf}
	if err := s.emit(map[string]int{"a": 1}, nil); err != nil || buf.String() != "a: 1\n" {
		t.Errorf("yaml: %q %v", buf.String(), err)
	}
	cmd := &cobra.Command{Use: "x"}
	addClientFlags(cmd)
	if err := cmd.Flags().Parse([]string{"-o", "xml"}); err != nil {
		t.Fatal(err)
	}
	defer func() { client = clientOptions{} }()
	if _, err := resolveClientOptions(cmd); err == nil || !strings.Contains(err.Error(), "use table, json or yaml") {
		t.Errorf("-o xml: %v", err)
	}
}

func TestNameOfARN(t *testing.T) {
	for in, want := range map[string]string{
		"arn:aws:batch:us-east-1:000000000000:job-queue/training":                     "training",
		"arn:aws:batch:us-east-1:000000000000:job-queue/training/quota-share/QS1":     "training",
		"arn:aws:sagemaker:us-east-1:000000000000:training-job/awsbatchx0123456789ab": "awsbatchx0123456789ab",
		"training": "training",
	} {
		if got := nameOfARN(in); got != want {
			t.Errorf("nameOfARN(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDemoConfigIsTheExample keeps the demo's embedded copy equal to the
// example file that the docs and the tour apply.
func TestDemoConfigIsTheExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/three-shares.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if string(b) != demoConfig {
		t.Error("cmd/qshare/demo-three-shares.yaml differs from examples/three-shares.yaml: copy the example over it")
	}
}

// TestCLIReferenceIsCurrent fails when docs/cli differs from what the
// commands generate.
func TestCLIReferenceIsCurrent(t *testing.T) {
	pages := reference(rootCmd)
	dir := "../../docs/cli"
	files, _ := filepath.Glob(filepath.Join(dir, "*.md"))
	stale := []string{}
	for _, f := range files {
		if _, ok := pages[filepath.Base(f)]; !ok {
			stale = append(stale, filepath.Base(f)+" (no such command)")
		}
	}
	for name, want := range pages {
		got, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !bytes.Equal(got, want) {
			stale = append(stale, name)
		}
	}
	if len(stale) > 0 {
		t.Errorf("docs/cli is stale (%s): run `go generate ./cmd/qshare` (or `go run ./cmd/qshare gen-docs docs/cli`) and commit the result", strings.Join(stale, ", "))
	}
}

// TestClientCommandsHaveExamples checks the commands of the command line
// proper: each has an example in its help, and the client commands take
// --endpoint and -o.
func TestClientCommandsHaveExamples(t *testing.T) {
	client := map[string]bool{"apply": true, "submit": true, "jobs": true, "describe": true, "priority": true,
		"terminate": true, "logs": true, "shares": true, "top": true, "snapshot": true}
	for _, name := range []string{"apply", "submit", "jobs", "describe", "priority", "terminate", "logs", "shares", "top", "snapshot", "demo", "completion"} {
		c, _, err := rootCmd.Find([]string{name})
		if err != nil || c.Name() != name {
			t.Errorf("no command %s", name)
			continue
		}
		if strings.TrimSpace(c.Example) == "" {
			t.Errorf("qshare %s has no example", name)
		}
		if client[name] && (c.Flags().Lookup("endpoint") == nil || c.Flags().ShorthandLookup("o") == nil) {
			t.Errorf("qshare %s lacks --endpoint or -o", name)
		}
	}
}

func TestFence(t *testing.T) {
	got := fence("Text:\n\n  picture\n  more\n\nafter")
	want := "Text:\n\n```\n  picture\n  more\n```\n\nafter"
	if got != want {
		t.Errorf("fence = %q, want %q", got, want)
	}
}
