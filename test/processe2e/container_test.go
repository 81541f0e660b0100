package processe2e_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/executor/container/containertest"
	"qshare/internal/longtest"
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

// longContainerServer starts a server on the container executor for a
// scenario that TestContainerWorkedExample plays too, in the README's
// command: the test runs on its own where QSHARE_LONG=1, and skips
// otherwise. It returns the server and the test image.
func longContainerServer(t *testing.T) (*server, string) {
	t.Helper()
	skipShort(t)
	longtest.Only(t, "in the README's command TestContainerWorkedExample plays this scenario on containers")
	o, img := containerServer(t)
	return startServer(t, newDataDir(t), o), img
}

// TestContainerPreemption: a trainer container in a share with in-share
// preemption is preempted by a job of higher priority in its share: it
// gets SIGTERM, writes its checkpoint to /opt/ml/checkpoints, and its
// second attempt resumes from it and finishes. TestContainerWorkedExample
// plays a checkpoint and its resume, and an in-share preemption, on
// containers in the README's command; this one runs where QSHARE_LONG=1.
func TestContainerPreemption(t *testing.T) {
	s, img := longContainerServer(t)
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
// from its checkpoint once b's job is done. TestContainerWorkedExample
// plays the same borrower in the README's command; this one runs where
// QSHARE_LONG=1.
func TestContainerBorrower(t *testing.T) {
	s, img := longContainerServer(t)
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

// containerExample are the worked example's jobs as containers of the test
// image: each waits for a gate file in its own checkpoint directory
// (DATA_DIR/jobs/<jobID>/checkpoints, the job's /opt/ml/checkpoints), which
// the test writes to let it go.
func containerExample(img string) exampleJobs {
	const gate = "-gate=/opt/ml/checkpoints/go"
	with := func(j job, share string, prio int32) job {
		j.share, j.priority = share, prio
		return j
	}
	return exampleJobs{
		plain: func(name, share string, prio int32) job {
			return with(containerJob(img, name, "-output=$QSHARE_JOB_NAME attempt $QSHARE_ATTEMPT in $QSHARE_QUOTA_SHARE", gate), share, prio)
		},
		trainer: func(name, share string, prio int32) job {
			return with(containerJob(img, name, "-train=100000", "-step=200ms", gate), share, prio)
		},
		release: func(s *server, ids ...string) {
			for _, id := range ids {
				must(s.t, os.WriteFile(filepath.Join(s.dataDir, "jobs", id, "checkpoints", "go"), nil, 0o644))
			}
		},
	}
}

// TestContainerWorkedExample plays the spec's worked example
// (workedExample: three shares of one instance) with container jobs
// through the SDK: the borrower, a trainer container that traps SIGTERM,
// checkpoints to /opt/ml/checkpoints when QS2 reclaims its instance and
// resumes from it; the in-share preemption of qs1-high by qs1-low's raised
// priority; every job ends SUCCEEDED, and no container is left.
func TestContainerWorkedExample(t *testing.T) {
	skipShort(t)
	o, img := containerServer(t)
	var dirs []string
	o.prepare = func(_ *testing.T, dir string) []string { dirs = append(dirs, dir); return nil }
	workedExample(t, o, nil, containerExample(img))
	for _, dir := range dirs {
		if left := awaitNoLeftovers(t, "unix:///var/run/docker.sock", dir); len(left) > 0 {
			t.Errorf("containers left behind: %v", left)
		}
	}
}

// awaitNoLeftovers waits (up to waitLimit) until no container of dataDir
// is left at host, and returns those still there.
func awaitNoLeftovers(t *testing.T, host, dataDir string) []string {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		left := containertest.Leftovers(t, host, dataDir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestContainerTwoInstances submits, through the SDK's SubmitServiceJob,
// a job of two instances: two containers, algo-1 and algo-2, each told its
// own name (SM_CURRENT_HOST), that resolve each other by name on the
// attempt's network, and, let go, the job SUCCEEDS as one attempt. It runs
// where QSHARE_LONG=1.
func TestContainerTwoInstances(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "two containers on a network of their own, through the server, take a minute or two on a loaded machine; in the README's command executor/container's TestMultiInstance runs the same without the server")
	o, img := containerServer(t)
	s := startServer(t, newDataDir(t), o)
	limits := map[string]int32{"ml.m5.xlarge": 2}
	s.setup(limits, share{name: "a", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve})
	// Each host stays up (the engine's DNS names running containers only)
	// until the test, having seen both resolve both names, lets them go.
	j := containerJob(img, "pair", "-output=I am $SM_CURRENT_HOST of $SM_HOSTS", "-resolve=algo-1,algo-2", "-gate=/opt/ml/checkpoints/go")
	j.count = 2
	id := s.submit(j)
	out := s.awaitLog(id, 1, "ready\n") // algo-1's
	for _, want := range []string{`I am algo-1 of ["algo-1","algo-2"]`, "algo-1 resolves to", "algo-2 resolves to"} {
		if !strings.Contains(out, want) {
			t.Errorf("algo-1's log lacks %q:\n%s", want, out)
		}
	}
	var second string
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(second, "ready\n") && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		logs, _ := filepath.Glob(filepath.Join(s.dataDir, "attempts", "*", "output-algo-2.log"))
		if len(logs) == 1 {
			b, _ := os.ReadFile(logs[0])
			second = string(b)
		}
	}
	if !strings.Contains(second, "I am algo-2") || !strings.Contains(second, "algo-1 resolves to") || !strings.Contains(second, "algo-2 resolves to") {
		t.Errorf("algo-2's log:\n%s", second)
	}
	must(t, os.WriteFile(filepath.Join(s.dataDir, "jobs", id, "checkpoints", "go"), nil, 0o644))
	if d := s.AwaitStatus(id, types.ServiceJobStatusSucceeded); len(d.Attempts) != 1 {
		t.Errorf("the two-instance job ran %d attempts, want 1", len(d.Attempts))
	}
	s.stop()
	if left := awaitNoLeftovers(t, "unix:///var/run/docker.sock", s.dataDir); len(left) > 0 {
		t.Errorf("containers (or the network's) left behind: %v", left)
	}
}

// TestContainerEngineDown runs container jobs through the SDK on a Podman
// service of the test's own, and kills that service with SIGKILL while a
// job runs: the service environment's statusReason says the engine does
// not answer, the job stays RUNNING (its container, conmon's child, runs
// on, and here ends while the engine is down), and once the service is
// started again the job SUCCEEDS as its one attempt and the statusReason
// clears. The failure file's first line is a failed job's reason here too.
// It runs where QSHARE_PODMAN_TESTS=1 (.ci/run sets it), as the executor's
// Podman tests do.
func TestContainerEngineDown(t *testing.T) {
	skipShort(t)
	if os.Getenv("QSHARE_PODMAN_TESTS") != "1" {
		t.Skip("set QSHARE_PODMAN_TESTS=1 to run the engine's kill through the SDK against a Podman service of the test's own (.ci/run does)")
	}
	svc := containertest.PodmanServiceT(t)
	img := containertest.Image(t, svc.Host)
	o := serverOpts{args: []string{"--executor", "container", "--container-host", svc.Host, "--pull", "never"},
		ended: func(dir string) bool { _, err := os.Stat(filepath.Join(dir, "exit.json")); return err == nil }}
	s := startServer(t, newDataDir(t), o)
	limits := map[string]int32{"ml.m5.xlarge": 2}
	s.setup(limits, share{name: "a", limits: limits, strategy: types.QuotaShareResourceSharingStrategyReserve})

	failed := s.submit(containerJob(img, "failing", "-run=0s", "-exit=3", "-failure=AlgorithmError: bad data"))
	d := s.AwaitStatus(failed, types.ServiceJobStatusFailed)
	if len(d.Attempts) == 0 || !strings.Contains(aws.ToString(d.Attempts[0].StatusReason), "AlgorithmError: bad data") {
		t.Errorf("the failed job's attempts %+v, want the failure file's first line as the reason", d.Attempts)
	}

	long := s.submit(containerJob(img, "survivor", "-output=started", "-gate=/opt/ml/checkpoints/go"))
	s.awaitLog(long, 1, "started")
	if r := s.envReason(); strings.Contains(r, "engine") {
		t.Fatalf("statusReason %q before the engine's kill", r)
	}
	svc.Kill()
	deadline := time.Now().Add(waitLimit)
	for !strings.Contains(s.envReason(), "the container engine does not answer") {
		if time.Now().After(deadline) {
			t.Fatalf("the environment's statusReason is %q %s after the engine's kill", s.envReason(), waitLimit)
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("statusReason while the engine is down: %s", s.envReason())
	// The job ends while no engine answers; qshare learns it once one does.
	must(t, os.WriteFile(filepath.Join(s.dataDir, "jobs", long, "checkpoints", "go"), nil, 0o644))
	if st := s.Describe(long).Status; st != types.ServiceJobStatusRunning {
		t.Errorf("the job is %s while the engine is down, want RUNNING", st)
	}
	must(t, svc.Start())
	if d := s.AwaitStatus(long, types.ServiceJobStatusSucceeded); len(d.Attempts) != 1 {
		t.Errorf("the job ran %d attempts across the engine's kill, want 1", len(d.Attempts))
	}
	if out := s.mustLogs(long, 1); !strings.Contains(out, "done\n") {
		t.Errorf("the job's log after the engine came back:\n%s", out)
	}
	deadline = time.Now().Add(waitLimit)
	for r := s.envReason(); strings.Contains(r, "engine"); r = s.envReason() {
		if time.Now().After(deadline) {
			t.Fatalf("statusReason %q after the engine came back", r)
		}
		time.Sleep(100 * time.Millisecond)
	}
	s.stop()
	if left := awaitNoLeftovers(t, svc.Host, s.dataDir); len(left) > 0 {
		t.Errorf("containers left behind: %v", left)
	}
}
