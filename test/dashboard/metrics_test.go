package dashboard_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFinalMetrics runs a job that prints a metric on the process executor
// and reads its job page: the final value of each of the payload's
// MetricDefinitions, as SageMaker's DescribeTrainingJob gives it
// (FinalMetricDataList), is in the "Final metrics" table, read by the page
// from the server's SageMaker endpoint.
func TestFinalMetrics(t *testing.T) {
	t.Parallel() // a server and a Chromium of its own (TestMain)
	moreViews(t, "the final metrics of jobs on the process executor")
	e := newEnv(t, "--executor", "process", "--gpus", "none")
	e.OK("apply", "-f", "examples/three-shares.yaml")
	payload := `{"TrainingJobName":"metrics-job","AlgorithmSpecification":{"TrainingImage":"local","TrainingInputMode":"File",
	 "ContainerEntrypoint":["/bin/sh","-c","echo 'epoch 1 loss=0.75 acc=0.5'; echo 'epoch 2 loss=0.25 acc=0.875'"],
	 "MetricDefinitions":[{"Name":"train:loss","Regex":"loss=([0-9.]+)"},{"Name":"train:acc","Regex":"acc=([0-9.]+)"},{"Name":"never","Regex":"f1=([0-9.]+)"}]},
	 "ResourceConfig":{"InstanceType":"ml.g5.xlarge","InstanceCount":1,"VolumeSizeInGB":1},"StoppingCondition":{"MaxRuntimeInSeconds":300}}`
	file := filepath.Join(e.Dir, "payload.json")
	if err := os.WriteFile(file, []byte(payload), 0o644); err != nil {
		t.Fatal(err)
	}
	e.OK("submit", "--queue", "training", "--share", "QS1", "--name", "metrics-job", "--payload", file)
	e.Await(map[string]string{"metrics-job": "SUCCEEDED"}, nil)
	id := strings.TrimSpace(e.describe("metrics-job").JobID)
	e.open("job/" + id)
	e.waitFor("the final metrics of the job's training job",
		`document.querySelector('tr[data-metric="train:loss"] td[data-field="value"]').textContent === "0.25" &&
		 document.querySelector('tr[data-metric="train:acc"] td[data-field="value"]').textContent === "0.875" &&
		 !document.querySelector('tr[data-metric="never"]')`,
		`document.querySelector("main").innerText`)
	e.shot("job-metrics")
}
