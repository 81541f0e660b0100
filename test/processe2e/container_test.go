package processe2e_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor/container/containertest"
)

// containerServer returns the options of a `qshare serve --executor
// container` on this machine's Docker Engine, and the test image (a
// static program that plays a job from its flags); it skips where no
// Docker Engine answers.
func containerServer(t *testing.T) (serverOpts, string) {
	t.Helper()
	host := containertest.Docker(t)
	img := containertest.Image(t, host)
	return serverOpts{args: []string{"--executor", "container", "--container-host", host, "--pull", "never"},
		ended: func(dir string) bool { _, err := os.Stat(filepath.Join(dir, "exit.json")); return err == nil }}, img
}

// containerJob runs the test image's program with args.
func containerJob(img, name string, args ...string) job {
	return job{name: name, share: "a", payload: map[string]any{"AlgorithmSpecification": map[string]any{
		"TrainingImage": img, "TrainingInputMode": "File", "ContainerEntrypoint": []string{"/job"}, "ContainerArguments": args}}}
}

// TestContainerJobs runs container jobs through the SDK: one that
// succeeds, whose log the server serves; one that fails with a failure
// file, whose first line is the reason; and one that goes on across a
// kill -9 of the server and finishes as one attempt under the next.
func TestContainerJobs(t *testing.T) {
	skipShort(t)
	o, img := containerServer(t)
	dir := newDataDir(t)
	s := startServer(t, dir, o)
	limits := map[string]int32{"ml.m5.xlarge": 4}
	s.setup(limits, share{name: "a", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve})
	ok := s.submit(containerJob(img, "ok", "-run=0s", "-output=hello from a container"))
	failed := s.submit(containerJob(img, "failing", "-run=0s", "-exit=3", "-failure=AlgorithmError: bad data"))
	s.AwaitStatus(ok, types.ServiceJobStatusSucceeded)
	if got := s.mustLogs(ok, 1); !strings.Contains(got, "hello from a container\n") {
		t.Errorf("log of the container job = %q", got)
	}
	d := s.AwaitStatus(failed, types.ServiceJobStatusFailed)
	if len(d.Attempts) == 0 || !strings.Contains(aws.ToString(d.Attempts[0].StatusReason), "AlgorithmError: bad data") {
		t.Errorf("the failed job's attempts %+v, want the failure file's first line as the reason", d.Attempts)
	}

	long := s.submit(containerJob(img, "long", "-run=4s", "-output=started"))
	s.awaitRunning(long, 1)
	s.awaitLog(long, 1, "started")
	s.kill()
	s2 := startServer(t, dir, o)
	if d := s2.AwaitStatus(long, types.ServiceJobStatusSucceeded); len(d.Attempts) != 1 {
		t.Errorf("the job ran %d attempts across the server's kill -9, want 1", len(d.Attempts))
	}
	s2.stop()
	if left := containertest.Leftovers(t, "unix:///var/run/docker.sock", dir); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}

// TestContainerPreemption: a trainer container in a share with in-share
// preemption is preempted by a job of higher priority in its share: it
// gets SIGTERM, writes its checkpoint to /opt/ml/checkpoints, and its
// second attempt resumes from it and finishes.
func TestContainerPreemption(t *testing.T) {
	skipShort(t)
	o, img := containerServer(t)
	s := startServer(t, newDataDir(t), o)
	limits := map[string]int32{"ml.m5.xlarge": 1}
	s.setup(limits, share{name: "a", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve, inShare: true})
	trainerJob := containerJob(img, "trainer", "-train=25", "-step=200ms")
	trainerJob.priority = 1
	trainer := s.submit(trainerJob)
	s.awaitLog(trainer, 1, "step 3\n")
	urgentJob := containerJob(img, "urgent", "-run=0s", "-output=urgent ran")
	urgentJob.priority = 5
	urgent := s.submit(urgentJob)
	d := s.Await(trainer, "RUNNABLE after an in-share preemption", func(d *batch.DescribeServiceJobOutput) bool {
		return len(d.Attempts) >= 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management (in-share)") {
		t.Errorf("the trainer's attempt reason %q, want an in-share preemption", r)
	}
	ckpt := checkpointed(s.mustLogs(trainer, 1))
	if ckpt < 3 {
		t.Errorf("the trainer did not checkpoint on SIGTERM:\n%s", s.mustLogs(trainer, 1))
	}
	s.AwaitStatus(urgent, types.ServiceJobStatusSucceeded)
	if d := s.AwaitStatus(trainer, types.ServiceJobStatusSucceeded); len(d.Attempts) != 2 {
		t.Errorf("the trainer ran %d attempts, want 2", len(d.Attempts))
	}
	if out := s.mustLogs(trainer, 2); !strings.HasPrefix(out, fmt.Sprintf("resumed from step %d\n", ckpt)) || !strings.Contains(out, "finished after step 25") {
		t.Errorf("the trainer's attempt 2 did not resume from its checkpoint (step %d) and finish:\n%s", ckpt, out)
	}
}
