package e2e_test

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestSubmitWithEveryOption(t *testing.T) {
	t.Parallel()
	e := exampleEnv(t)
	out := e.OK("submit", "--queue", "training", "--share", "QS2", "--priority", "42", "--name", "resnet-1",
		"--instance-type", "ml.g5.xlarge", "--instance-count", "1", "--env", "EPOCHS=10", "--env", "QSHARE_SIM_DURATION=1h",
		"--retry-attempts", "3", "--preemption-retries", "2", "--timeout", "90m", "--tag", "team=vision",
		"--image", "my/image:1", "--checkpoint-dir", "/opt/ml/checkpoints", "--", "python", "train.py", "--lr", "0.1")
	if !strings.HasPrefix(out, "job resnet-1 submitted: ") {
		t.Errorf("submit printed %q", out)
	}
	j := e.describe("resnet-1")
	if j.QuotaShareName != "QS2" || j.SchedulingPriority != 42 || j.RetryStrategy == nil || j.RetryStrategy.Attempts != 3 ||
		j.PreemptionConfiguration == nil || *j.PreemptionConfiguration.PreemptionRetriesBeforeTermination != 2 ||
		j.TimeoutConfig == nil || j.TimeoutConfig.AttemptDurationSeconds != 5400 || j.Tags["team"] != "vision" {
		t.Errorf("the job does not carry the options: %+v", j)
	}
	var payload struct {
		TrainingJobName        string
		AlgorithmSpecification struct {
			TrainingImage       string
			ContainerEntrypoint []string
			ContainerArguments  []string
		}
		ResourceConfig struct {
			InstanceType  string
			InstanceCount int
		}
		StoppingCondition struct{ MaxRuntimeInSeconds int }
		Environment       map[string]string
		CheckpointConfig  struct{ LocalPath string }
	}
	if err := json.Unmarshal([]byte(j.ServiceRequestPayload), &payload); err != nil {
		t.Fatalf("payload %s: %v", j.ServiceRequestPayload, err)
	}
	a := payload.AlgorithmSpecification
	if payload.TrainingJobName != "resnet-1" || a.TrainingImage != "my/image:1" || strings.Join(a.ContainerEntrypoint, " ") != "python" ||
		strings.Join(a.ContainerArguments, " ") != "train.py --lr 0.1" || payload.ResourceConfig.InstanceType != "ml.g5.xlarge" ||
		payload.ResourceConfig.InstanceCount != 1 || payload.StoppingCondition.MaxRuntimeInSeconds != 5400 ||
		payload.Environment["EPOCHS"] != "10" || payload.CheckpointConfig.LocalPath != "/opt/ml/checkpoints" {
		t.Errorf("payload %s", j.ServiceRequestPayload)
	}

	// A payload file goes as it is.
	file := e.Write("job.json", `{"TrainingJobName":"from-file","ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1},"Environment":{"QSHARE_SIM_DURATION":"1h"},"HyperParameters":{"lr":"0.1"}}`)
	e.OK("submit", "--queue", "training", "--share", "QS3", "--payload", file)
	if j := e.describe("from-file"); j.ServiceRequestPayload != readFile(t, file) {
		t.Errorf("payload changed on the way: %s", j.ServiceRequestPayload)
	}

	// The server's rejections reach the user as one line.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"submit", "--queue", "training", "--instance-type", "ml.g5.xlarge"}, "quotaShareName"},
		{[]string{"submit", "--queue", "training", "--share", "QS9", "--instance-type", "ml.g5.xlarge"}, "QS9"},
		{[]string{"submit", "--queue", "nope", "--share", "QS1", "--instance-type", "ml.g5.xlarge"}, "nope"},
		{[]string{"submit", "--queue", "training", "--share", "QS1", "--instance-type", "ml.g5.xlarge", "--priority", "10000"}, "out of range"},
	} {
		e.failsWith(tc.want, tc.args...)
	}
}

// TestWorkedExample plays the spec's worked example with the commands and
// checks jobs, describe, priority, shares, snapshot and terminate on it.
func TestWorkedExample(t *testing.T) {
	t.Parallel()
	e := exampleEnv(t)
	e.Submit("QS1", "qs1-high", 3)
	e.Submit("QS1", "qs1-med", 2)
	e.Submit("QS1", "qs1-low", 1)
	e.Await(map[string]string{"qs1-high": "RUNNING", "qs1-med": "RUNNING", "qs1-low": "RUNNABLE"}, nil)

	// Step 1: QS1 borrows QS2's instance.
	out := e.OK("shares")
	for _, want := range []string{"[█]▒  1 in use · 1 borrowed from QS2", "[▓]   1 lent to QS1", "[░]   1 idle, reserved", "next: qs1-low (priority 1)"} {
		if !strings.Contains(out, want) {
			t.Errorf("shares after step 1 lacks %q:\n%s", want, out)
		}
	}
	var v sharesView
	e.JSONOf(&v, "shares", "--queue", "training")
	qs1 := v[0].QuotaShares[0]
	if qs1.QuotaShareName != "QS1" || qs1.Capacity[0].Borrowed != 1 || qs1.Capacity[0].BorrowedFrom[0].QuotaShare != "QS2" || qs1.Head.JobName != "qs1-low" {
		t.Errorf("shares -o json after step 1: %+v", qs1)
	}

	// Step 2: QS2 reclaims; qs1-med, the lowest-priority borrower, is preempted.
	e.Submit("QS2", "qs2-job-1", 1)
	e.Await(map[string]string{"qs1-high": "RUNNING", "qs1-med": "RUNNABLE", "qs1-low": "RUNNABLE", "qs2-job-1": "RUNNING"}, nil)
	if j := e.describe("qs1-med"); j.preemptions() != 1 {
		t.Errorf("qs1-med preempted %d times, want 1", j.preemptions())
	}
	out = e.OK("describe", "qs1-med")
	words := strings.Join(strings.Fields(out), " ") // the fields' alignment aside
	for _, want := range []string{"Status: RUNNABLE", "Retry strategy: 1 attempt (no retry after a failure); preempted attempts do not count", "Attempts (1, 1 preempted):", "Preemptions (newest first):", "yes"} {
		if !strings.Contains(words, want) {
			t.Errorf("describe qs1-med lacks %q:\n%s", want, out)
		}
	}

	// Step 3: a priority change preempts inside QS1.
	if out := e.OK("priority", "qs1-low", "4"); out != "job qs1-low now has priority 4\n" {
		t.Errorf("priority printed %q", out)
	}
	e.Await(map[string]string{"qs1-high": "RUNNABLE", "qs1-med": "RUNNABLE", "qs1-low": "RUNNING", "qs2-job-1": "RUNNING"}, nil)
	if j := e.describe("qs1-high"); j.preemptions() != 1 || j.SchedulingPriority != 3 {
		t.Errorf("qs1-high: %+v", j)
	}
	out = e.OK("shares")
	if !strings.Contains(out, "running: qs1-low (p4) · waiting: 2") || !strings.Contains(out, "next: qs1-high (priority 3, preempted 1×)") {
		t.Errorf("shares after step 3:\n%s", out)
	}

	// snapshot: the front of the queue in dispatch order, and utilization.
	out = e.OK("snapshot", "training")
	for _, want := range []string{"1  qs1-high  QS1    3", "2  qs1-med   QS1    2", "QS1    qs1-high  3", "total  2×ml.g5.xlarge", "QS2    1×ml.g5.xlarge"} {
		if !strings.Contains(out, want) {
			t.Errorf("snapshot lacks %q:\n%s", want, out)
		}
	}
	var snap struct {
		FrontOfQueue struct {
			Jobs []struct{ JobArn string }
		}
		FrontOfQuotaShares struct {
			QuotaShares map[string][]struct{ JobArn string }
		}
	}
	e.JSONOf(&snap, "snapshot", "training")
	if len(snap.FrontOfQueue.Jobs) != 2 || len(snap.FrontOfQuotaShares.QuotaShares["QS1"]) != 1 {
		t.Errorf("snapshot -o json: %+v", snap)
	}

	// jobs and its filters.
	names := func(args ...string) string {
		var rows []job
		e.JSONOf(&rows, append([]string{"jobs"}, args...)...)
		var n []string
		for _, r := range rows {
			n = append(n, r.JobName)
		}
		return strings.Join(n, " ")
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "qs1-high qs1-med qs1-low qs2-job-1"},
		{[]string{"--queue", "training", "--share", "QS1"}, "qs1-high qs1-med qs1-low"},
		{[]string{"--share", "QS1", "--status", "RUNNABLE"}, "qs1-high qs1-med"},
		{[]string{"--status", "running"}, "qs1-low qs2-job-1"},
		{[]string{"--status", "RUNNING,RUNNABLE", "--share", "QS2"}, "qs2-job-1"},
		{[]string{"--name", "qs1*"}, "qs1-high qs1-med qs1-low"},
		{[]string{"--name", "QS2-JOB-1"}, "qs2-job-1"},
	} {
		if got := names(tc.args...); got != tc.want {
			t.Errorf("jobs %v = %s, want %s", tc.args, got, tc.want)
		}
	}
	out = e.OK("jobs", "--queue", "training")
	if !strings.HasPrefix(out, "NAME ") || !strings.Contains(out, "SHARE  PRIORITY  STATUS    INSTANCES") || strings.Count(out, "\n") != 5 {
		t.Errorf("jobs table:\n%s", out)
	}
	if msg := e.Fail("jobs", "--status", "SLEEPING"); !strings.Contains(msg, "not a job status") {
		t.Errorf("bad status: %s", msg)
	}

	// terminate: the job ends FAILED with the reason.
	if out := e.OK("terminate", "qs2-job-1", "--reason", "wrong learning rate"); out != "job qs2-job-1 terminated: wrong learning rate\n" {
		t.Errorf("terminate printed %q", out)
	}
	e.Await(map[string]string{"qs2-job-1": "FAILED"}, nil)
	if j := e.describe("qs2-job-1"); j.StatusReason != "wrong learning rate" || !j.IsTerminated {
		t.Errorf("terminated job: %+v", j)
	}

	// top draws the same picture, again and again (appended, not
	// redrawn in place, when its output is not a terminal).
	out = e.OK("top", "--queue", "training", "-n", "2", "--interval", "10ms")
	if strings.Count(out, "job queue training") != 2 || strings.Count(out, "(every 10ms; Ctrl-C to stop)") != 2 || strings.Contains(out, "\x1b[") {
		t.Errorf("top:\n%s", out)
	}

	// Every client command's JSON parses.
	for _, args := range [][]string{{"jobs"}, {"describe", "qs1-low"}, {"priority", "qs1-low", "5"}, {"shares"}, {"snapshot", "training"},
		{"submit", "--queue", "training", "--share", "QS3", "--instance-type", "ml.g5.xlarge", "--name", "json-job"}, {"apply", "-f", "examples/three-shares.yaml", "--dry-run"},
		{"terminate", "json-job"}} {
		var anyv any
		e.JSONOf(&anyv, args...)
	}
	// YAML too.
	if out := e.OK("describe", "qs1-low", "-o", "yaml"); !strings.Contains(out, "jobName: qs1-low\n") {
		t.Errorf("describe -o yaml:\n%s", out)
	}
}

func TestErrorsAreOneClearLine(t *testing.T) {
	t.Parallel()
	e := exampleEnv(t)
	e.Submit("QS1", "twin", 1)
	e.Submit("QS2", "twin", 1)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"describe", "nope"}, "no job is named nope"},
		{[]string{"describe", "00000000-0000-4000-8000-000000000000"}, "does not exist"},
		{[]string{"describe", "twin"}, "2 jobs are named twin"},
		{[]string{"priority", "nope", "3"}, "no job is named nope"},
		{[]string{"priority", "twin", "high"}, `priority "high" is not an integer`},
		{[]string{"terminate", "nope"}, "no job is named nope"},
		{[]string{"snapshot", "nope"}, "nope"},
		{[]string{"shares", "--queue", "nope"}, "nope"},
		{[]string{"jobs", "-o", "xml"}, "use table, json or yaml"},
		{[]string{"jobs", "--endpoint", "127.0.0.1:1"}, "is not a URL"},
		{[]string{"jobs", "--endpoint", "http://127.0.0.1:1"}, "cannot reach a qshare server at http://127.0.0.1:1"},
		{[]string{"describe"}, "accepts 1 arg(s)"},
	} {
		e.failsWith(tc.want, tc.args...)
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	e := exampleEnv(t, "--executor", "process")
	e.OK("submit", "--queue", "training", "--share", "QS1", "--instance-type", "ml.g5.xlarge", "--name", "hello",
		"--", "sh", "-c", "echo hello; sleep 0.3; echo world")
	// -f waits for the attempt to start and follows it to its end.
	out, stderr, code := e.Run("logs", "hello", "-f")
	if code != 0 || !strings.HasSuffix(out, "hello\nworld\n") {
		t.Errorf("logs -f: code %d, stdout %q, stderr %q", code, out, stderr)
	}
	e.Await(map[string]string{"hello": "SUCCEEDED"}, nil)
	if out := e.OK("logs", "hello", "--attempt", "1"); !strings.HasSuffix(out, "hello\nworld\n") {
		t.Errorf("logs --attempt 1: %q", out)
	}
	e.failsWith("attempt 2 does not exist", "logs", "hello", "--attempt", "2")
	e.failsWith("", "logs", "nope")
}

func TestCompletion(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for shell, want := range map[string]string{"bash": "__start_qshare", "zsh": "#compdef qshare", "fish": "complete -c qshare", "powershell": "Register-ArgumentCompleter"} {
		if out := e.OK("completion", shell); !strings.Contains(out, want) {
			t.Errorf("completion %s lacks %q", shell, want)
		}
	}
	e.Fail("completion", "tcsh")
	// Dynamic completion asks the server.
	e.applyExample()
	e.Submit("QS1", "complete-me", 1)
	if out := e.OK("__complete", "describe", "comp"); !strings.Contains(out, "complete-me") {
		t.Errorf("job names are not completed:\n%s", out)
	}
	if out := e.OK("__complete", "jobs", "--share", ""); !strings.Contains(out, "QS2") {
		t.Errorf("shares are not completed:\n%s", out)
	}
}

// TestSharesFairShareQueue: `qshare shares` shows a fair-share queue: its
// share identifiers, what their jobs use, who runs and the next job.
func TestSharesFairShareQueue(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.OK("apply", "-f", "examples/fair-share.yaml")
	sub := func(name, ident string) {
		e.OK("submit", "--queue", "shared", "--share-identifier", ident, "--instance-type", "ml.g5.xlarge", "--name", name, "--env", "QSHARE_SIM_DURATION=1h")
	}
	sub("a1", "teamA")
	sub("a2", "teamA")
	sub("a3", "teamA")
	sub("b1", "teamB")
	var out string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		out = e.OK("shares", "--queue", "shared")
		if strings.Contains(out, "ml.g5.xlarge: 3 of 3 in use") && strings.Contains(out, "waiting: 1") || time.Now().After(deadline) {
			break
		}
	}
	for _, want := range []string{"job queue shared · service environment fair-env", "ml.g5.xlarge: 3 of 3 in use", "teamA  FAIR_SHARE", "teamB  FAIR_SHARE",
		"running: a1 (p0)", "next: "} {
		if !strings.Contains(out, want) {
			t.Errorf("shares of a fair-share queue lacks %q:\n%s", want, out)
		}
	}
	var v sharesView
	e.JSONOf(&v, "shares", "--queue", "shared")
	if len(v) != 1 || len(v[0].QuotaShares) != 2 {
		t.Fatalf("shares -o json of a fair-share queue: %+v", v)
	}
}
