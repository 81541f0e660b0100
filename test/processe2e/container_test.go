package processe2e_test

import (
	"context"
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
	ckpt := s.preemptedAndCheckpointed(trainer, "in-share")
	s.AwaitStatus(urgent, types.ServiceJobStatusSucceeded)
	s.resumedAndFinished(trainer, ckpt, 25)
}

// TestContainerBorrower: the worked example's borrower as a container.
// Share a borrows b's idle instance for a trainer; when b submits, the
// borrower is preempted (cross-share), checkpoints on SIGTERM, and resumes
// from its checkpoint once b's job is done.
func TestContainerBorrower(t *testing.T) {
	skipShort(t)
	o, img := containerServer(t)
	s := startServer(t, newDataDir(t), o)
	one := map[string]int32{"ml.m5.xlarge": 1}
	s.setup(map[string]int32{"ml.m5.xlarge": 2},
		share{name: "a", limits: one, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(100)},
		share{name: "b", limits: one, strategy: types.QuotaShareResourceSharingStrategyLend})
	own := s.submit(containerJob(img, "own", "-run=1h"))
	s.awaitLog(own, 1, "ready\n")
	borrower := s.submit(containerJob(img, "borrower", "-train=25", "-step=200ms"))
	s.awaitLog(borrower, 1, "step 3\n")
	bJob := containerJob(img, "b-job", "-run=0s", "-output=b ran")
	bJob.share = "b"
	b := s.submit(bJob)
	ckpt := s.preemptedAndCheckpointed(borrower, "cross-share")
	s.AwaitStatus(b, types.ServiceJobStatusSucceeded)
	s.resumedAndFinished(borrower, ckpt, 25)
	_, err := s.C.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(own), Reason: aws.String("done")})
	must(t, err)
	s.AwaitStatus(own, types.ServiceJobStatusFailed)
}

// preemptedAndCheckpointed waits until a trainer's first attempt is
// preempted (of the kind "in-share" or "cross-share") and returns the step
// it checkpointed on SIGTERM.
func (s *server) preemptedAndCheckpointed(id, kind string) int {
	t := s.t
	t.Helper()
	d := s.Await(id, "its first attempt preempted", func(d *batch.DescribeServiceJobOutput) bool {
		return len(d.Attempts) >= 1 && d.Attempts[0].StoppedAt != nil
	})
	if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management ("+kind+")") {
		t.Errorf("the trainer's attempt reason %q, want a %s preemption", r, kind)
	}
	ckpt := checkpointed(s.mustLogs(id, 1))
	if ckpt < 3 {
		t.Errorf("the trainer did not checkpoint on SIGTERM:\n%s", s.mustLogs(id, 1))
	}
	return ckpt
}

// resumedAndFinished checks that a preempted trainer's second attempt
// resumed from its checkpoint and ran to its last step.
func (s *server) resumedAndFinished(id string, ckpt, steps int) {
	t := s.t
	t.Helper()
	if d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded); len(d.Attempts) != 2 {
		t.Errorf("the trainer ran %d attempts, want 2", len(d.Attempts))
	}
	if out := s.mustLogs(id, 2); !strings.HasPrefix(out, fmt.Sprintf("resumed from step %d\n", ckpt)) || !strings.Contains(out, fmt.Sprintf("finished after step %d", steps)) {
		t.Errorf("the trainer's attempt 2 did not resume from its checkpoint (step %d) and finish:\n%s", ckpt, out)
	}
}
