package processe2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"qshare/executor/slurm/slurmtest"
	"qshare/internal/longtest"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"
)

// gpu is the whole-node instance type of the Slurm tests: one node of the
// test cluster, with its 2 fake GPUs.
const gpu = "ml.g5.12xlarge"

// slurmServer returns the options of a `qshare serve --executor slurm`
// over a throwaway two-node Slurm cluster (slurmtest) that lives as long as
// the test: each server's data directory is also the executor's sharedDir,
// so the jobs' directories are where the process executor keeps them. It
// skips the test where Slurm is not installed or the user is not root.
func slurmServer(t *testing.T) (serverOpts, *slurmtest.Cluster) {
	t.Helper()
	c := slurmtest.StartT(t, slurmCluster)
	var env []string
	for _, kv := range c.Env() {
		if strings.HasPrefix(kv, "SLURM_CONF=") {
			env = append(env, kv)
		}
	}
	return serverOpts{gpus: "-", env: env,
		prepare: func(t *testing.T, dataDir string) []string {
			conf := filepath.Join(dataDir, "slurm.yaml")
			must(t, os.WriteFile(conf, []byte(`sharedDir: .
instanceTypes:
  `+cpu+`: {partition: qs, cpus: 1, memory: 64M, shareNodes: true}
  `+gpu+`: {partition: qs, gres: "gpu:2", cpus: 64, memory: 4000M}
`), 0o644))
			return []string{"--executor", "slurm", "--slurm-config", conf}
		},
		// Ended: Slurm is done with the attempt's batch job (job.json names
		// it). A job killed after its grace has no step runner left to
		// record its exit, so the record is not what tells.
		ended: func(dir string) bool {
			var rec struct{ SlurmJob int64 }
			b, err := os.ReadFile(filepath.Join(dir, "job.json"))
			if err != nil || json.Unmarshal(b, &rec) != nil || rec.SlurmJob == 0 {
				return false
			}
			out, err := c.Command(context.Background(), "squeue", "-h", "--states=all", "-j", strconv.FormatInt(rec.SlurmJob, 10), "-o", "%T")
			if err != nil && strings.Contains(err.Error(), "Invalid job id") {
				return true // Slurm has forgotten it (MinJobAge): long ended
			}
			st := strings.TrimSpace(out)
			return err == nil && st != "" && st != "PENDING" && st != "RUNNING" && st != "COMPLETING" && st != "SUSPENDED" && st != "CONFIGURING"
		},
	}, c
}

// slurmCluster is the options of the package's Slurm clusters: two nodes
// of 64 CPU slots and 2 fake GPUs each, which forget finished jobs after
// 2 s (MinJobAge), and whose commands give up on a slurmctld that is down
// after some 4 s rather than 9 (MessageTimeout 5 s, half Slurm's
// default): the tests that stop it wait for the executor to notice; and
// which schedule a submitted job within a second (Prompt), not up to 3 s
// later.
var slurmCluster = slurmtest.Options{Nodes: 2, CPUs: 64, GPUs: 2, Partition: "qs", MinJobAge: 2, MessageTimeout: 5, Prompt: true}

// envReason returns the statusReason of the server's one service
// environment (envReasons).
func (s *server) envReason() string {
	s.t.Helper()
	m := s.envReasons()
	if len(m) != 1 {
		s.t.Fatalf("DescribeServiceEnvironments listed %d environments, want 1", len(m))
	}
	for _, r := range m {
		return r
	}
	return ""
}

// TestSlurm runs end-to-end tests through the AWS SDK against qshare serve
// --executor slurm and a real Slurm: the worked example, then (with
// QSHARE_LONG=1) the process executor's own tests of success and retry,
// termination, in-share preemption with a checkpoint and a resume, and
// cross-share reclaim, then the failure reasons Slurm gives.
// TestSlurmPending, TestSlurmControllerDown and TestSlurmKillAndRecover
// run the rest beside it, each on a cluster of its own.
//
// It is in the long set (QSHARE_LONG=1, .ci/run's long step): its
// cluster, worked example and failure reasons cost 4 s of CPU on the
// slower kind of 2-core machine (7 December 2026), where the README's
// command was over its five minutes. In that command,
// TestExecutorsWithSlurm runs jobs on Slurm through the server beside the
// process and simulated executors, kills the server and stops slurmctld;
// TestSlurmKillAndRecover recovers Slurm's attempts after a kill -9; the
// worked example plays on the process executor (TestWorkedExample); and
// executor/slurm's TestExitReasons and conformance suite check the exits
// and reasons Slurm gives.
func TestSlurm(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "the worked example and the failure reasons again on Slurm; in the README's command TestExecutorsWithSlurm and TestSlurmKillAndRecover run jobs on Slurm end to end")
	o, c := slurmServer(t)
	t.Run("WorkedExample", func(t *testing.T) { workedExample(t, o, slurmRunning(c), shellJobs(t)) })
	// The process executor's own runs of this package cover these four
	// scenarios in the README's `go test ./...`.
	t.Run("SucceedAndRetry", func(t *testing.T) { succeedAndRetry(t, o) })
	t.Run("Terminate", func(t *testing.T) { terminate(t, o) })
	t.Run("InSharePreemptionResume", func(t *testing.T) { inSharePreemptionResume(t, o) })
	t.Run("CrossShareReclaim", func(t *testing.T) { crossShareReclaim(t, o) })
	t.Run("FailureReasons", func(t *testing.T) { slurmFailureReasons(t, o) })
}

// TestSlurmPending runs, on a cluster of its own beside TestSlurm's, what
// only a cluster with a scheduler of its own shows: a job that waits in
// Slurm for the nodes of a two-node job (slurmPending). It takes both
// nodes, so it ran after TestSlurm's worked example on that one's
// cluster, 13 s of the package's longest test. It is in the long set
// (QSHARE_LONG=1): in the README's command, the Slurm executor's own
// tests check the reason its pending jobs give (executor/slurm
// TestWholeNodes/PendingReason), and the test (a cluster of its own: 1.8 s
// of CPU and 79,000 page faults run alone here) costs some 3.5 s on the
// slower kind of machine by the page-fault model (docs/performance/
// history.md, the thirteenth session).
func TestSlurmPending(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "a job pending in Slurm, end to end; in the README's command executor/slurm's TestWholeNodes/PendingReason checks a pending job's reason")
	o, _ := slurmServer(t)
	slurmPending(t, o)
}

// TestSlurmControllerDown and TestSlurmKillAndRecover run, each on a
// cluster of its own beside TestSlurm's, the end-to-end tests of
// slurmctld stopped while a job runs and ends, and of a kill -9 of qshare
// for longer than Slurm's MinJobAge. (One after the other on one cluster,
// as TestSlurmOutages, they were the package's longest test, 19.6 s; a
// cluster costs some 1.8 s of CPU.) TestSlurmControllerDown is in the
// long set (QSHARE_LONG=1): in the README's command, the Slurm
// executor's own TestOutages/ControllerDown stops slurmctld under a
// running attempt and an idle executor and checks the same health, wait
// and exit; the end-to-end test adds the server's statusReason and job
// status, and took 11.3 s and a cluster of its own (7 December 2026).
func TestSlurmControllerDown(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "slurmctld stopped under a running job, end to end; in the README's command executor/slurm's TestOutages/ControllerDown stops it under the executor, and TestExecutorsWithSlurm under the server")
	o, c := slurmServer(t)
	slurmControllerDown(t, o, c)
}

func TestSlurmKillAndRecover(t *testing.T) {
	skipShort(t)
	o, c := slurmServer(t)
	slurmKillAndRecover(t, o, c)
}

// slurmRunning returns a check that Slurm runs a batch job for exactly the
// jobs named, and for no other qshare job: it waits (within waitLimit)
// until squeue's RUNNING batch jobs are those jobs' attempts.
func slurmRunning(c *slurmtest.Cluster) func(t *testing.T, ids ...string) {
	return func(t *testing.T, ids ...string) {
		t.Helper()
		var got []string
		awaitFile(t, fmt.Sprintf("Slurm to run batch jobs for exactly %v", ids), func() bool {
			out, err := c.Command(context.Background(), "squeue", "-h", "-t", "RUNNING", "-o", "%j")
			if err != nil {
				return false
			}
			got = got[:0]
			for _, name := range strings.Fields(out) {
				// qshare-<job ID>-<attempt>
				if rest, ok := strings.CutPrefix(name, "qshare-"); ok {
					if i := strings.LastIndexByte(rest, '-'); i > 0 {
						got = append(got, rest[:i])
					}
				}
			}
			return sameIDs(got, ids)
		})
	}
}

// slurmFailureReasons: on Slurm too, the status reason of a failed
// attempt is the first line of SM_OUTPUT_DIR/failure when the job writes
// one, and otherwise names the signal that killed the job or the program
// that could not be run.
func slurmFailureReasons(t *testing.T, o serverOpts) {
	s := startServer(t, newDataDir(t), o)
	oneShare(s, 3, false)
	s.awaitFailures(submitFailing(s), map[string]string{
		"failure-file": "CUDA out of memory",
		"segv":         "Essential process terminated by signal SIGSEGV",
		"missing":      "CannotStartContainerError: no-such-program-e2e",
	})
}

// slurmPending: the environment allows three whole-node instances but the
// partition has two nodes (its statusReason warns of it). A 2-node job
// holds both (it runs once on each node); qshare starts a third instance's
// job within the limits, Slurm keeps it PENDING, and the job, RUNNING in
// qshare, says why in Slurm's words. Once the 2-node job ends, it runs
// and succeeds.
func slurmPending(t *testing.T, o serverOpts) {
	s := startServer(t, newDataDir(t), o)
	s.setup(map[string]int32{gpu: 3}, share{name: "s", limits: map[string]int32{gpu: 3}, strategy: types.QuotaShareResourceSharingStrategyReserve})
	if r := s.envReason(); !strings.Contains(r, "partition qs has 2 nodes") {
		t.Errorf("environment statusReason %q, want the capacity warning", r)
	}
	g := newGates(t)
	two := s.submit(job{name: "two", share: "s", unit: gpu, count: 2, env: g.env(),
		script: `echo "on $SM_CURRENT_HOST of $SM_HOSTS"; ` + waitGate})
	s.awaitRunning(two, 1)
	// Each node's line comes when that node's step starts: wait for both.
	s.awaitLog(two, 1, "on n1")
	out := s.awaitLog(two, 1, "on n2")
	if !strings.Contains(out, `on n1 of ["n1","n2"]`) || !strings.Contains(out, `on n2 of ["n1","n2"]`) {
		t.Errorf("the 2-node job's log %q, want one line from each node", out)
	}
	one := s.submit(job{name: "one", share: "s", unit: gpu, script: `echo "one ran"`})
	s.Await(one, "RUNNING, waiting in Slurm", func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunning && aws.ToString(d.StatusReason) == "Attempt 1 waits to run in slurm: Resources"
	})
	g.release("two")
	s.AwaitStatus(two, types.ServiceJobStatusSucceeded)
	d := s.AwaitStatus(one, types.ServiceJobStatusSucceeded)
	if got := attemptReasons(d); len(got) != 1 || got[0] != "Essential process exited with code 0" {
		t.Errorf("one: attempts %q", got)
	}
}

// slurmControllerDown: slurmctld is stopped while a job runs and ends; the
// environment's statusReason says that slurmctld does not answer, the job
// stays RUNNING (its capacity held), and once slurmctld is back the job's
// exit is recorded from the step runner's record, the reason is gone, and
// a job submitted meanwhile runs once. The job ends once the environment
// says slurmctld is down, and slurmctld comes back as soon as the step
// runner has recorded that end: the job's slurmstepd, which tells
// slurmctld that the batch script ended, then still retries its first
// connection (for most of MessageTimeout), rather than waiting 15 s
// (Slurm's fixed delay) for its second try, as it did when the job ended
// at once and slurmctld came back later.
func slurmControllerDown(t *testing.T, o serverOpts, c *slurmtest.Cluster) {
	s := startServer(t, newDataDir(t), o)
	oneShare(s, 2, false)
	g := newGates(t)
	first := s.submit(job{name: "first", share: "s", env: g.env(), script: `echo started; ` + waitGate + `exit 5`})
	s.awaitRunning(first, 1)
	s.awaitLog(first, 1, "started")
	must(t, c.StopController())
	restarted := false
	defer func() {
		if !restarted {
			c.StartController(context.Background()) //nolint:errcheck
		}
	}()
	later := s.submit(job{name: "later", share: "s", script: `echo "later ran"`})
	awaitFile(t, "the environment to say slurmctld is down", func() bool { return strings.Contains(s.envReason(), "slurmctld does not answer") })
	g.release("first") // it exits 5 while nobody can ask Slurm
	awaitFile(t, "first's exit recorded by its step runner", func() bool {
		m, _ := filepath.Glob(filepath.Join(s.attemptDir(first, 1), "exit-*.json"))
		return len(m) > 0
	})
	if d := s.Describe(first); d.Status != types.ServiceJobStatusRunning {
		t.Errorf("first is %s while slurmctld is down, want RUNNING (its end is not known yet)", d.Status)
	}
	must(t, c.StartController(context.Background()))
	restarted = true
	d := s.AwaitStatus(first, types.ServiceJobStatusFailed)
	if got := attemptReasons(d); len(got) != 1 || got[0] != "Essential process exited with code 5" {
		t.Errorf("first: attempts %q, want one that exited with code 5", got)
	}
	d = s.AwaitStatus(later, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 1 {
		t.Errorf("later: %d attempts, want 1", len(d.Attempts))
	}
	awaitFile(t, "the environment's statusReason to clear", func() bool { return s.envReason() == "" })
	out, err := c.Command(context.Background(), "squeue", "-h", "--states=all", "-o", "%j")
	must(t, err)
	if n := strings.Count(out, "qshare-"+later+"-"); n > 1 {
		t.Errorf("the later job has %d batch jobs in Slurm, want one:\n%s", n, out)
	}
}

// slurmKillAndRecover: qshare serve is killed with SIGKILL while two batch
// jobs run and a third job waits for capacity. While it is down one job
// ends with exit code 7, and the server stays down until Slurm has
// forgotten that job (MinJobAge, 2 s here); the other goes on. The
// restarted server records the exit from the step runner's record,
// re-attaches to the running job (its log goes on, one attempt), starts
// the waiting one, and no attempt has a second batch job.
func slurmKillAndRecover(t *testing.T, o serverOpts, c *slurmtest.Cluster) {
	dataDir := newDataDir(t)
	s := startServer(t, dataDir, o)
	oneShare(s, 2, false)
	g := newGates(t)
	keep := s.submit(job{name: "keep", share: "s", env: g.env(), script: `echo "keep attempt $QSHARE_ATTEMPT"; ` + waitGate + `echo "keep done"`})
	fail := s.submit(job{name: "fail", share: "s", env: g.env(), script: `echo "fail attempt $QSHARE_ATTEMPT"; ` + waitGate + `exit 7`})
	for _, id := range []string{keep, fail} {
		s.awaitRunning(id, 1)
		s.awaitLog(id, 1, "attempt 1")
	}
	waiter := s.submit(job{name: "waiter", share: "s", script: `echo "waiter ran attempt $QSHARE_ATTEMPT"`})
	s.kill()
	g.release("fail")
	awaitFile(t, "fail's exit recorded and forgotten by Slurm", func() bool {
		m, _ := filepath.Glob(filepath.Join(s.attemptDir(fail, 1), "exit-*.json"))
		if len(m) == 0 {
			return false
		}
		out, err := c.Command(context.Background(), "squeue", "-h", "--states=all", "--name=qshare-"+fail+"-1", "-o", "%i")
		return err == nil && strings.TrimSpace(out) == ""
	})
	s2 := startServer(t, dataDir, o)
	d := s2.AwaitStatus(fail, types.ServiceJobStatusFailed)
	if got := attemptReasons(d); len(got) != 1 || got[0] != "Essential process exited with code 7" {
		t.Errorf("fail: attempts %q, want one that exited with code 7", got)
	}
	if d := s2.Describe(keep); d.Status != types.ServiceJobStatusRunning || len(d.Attempts) != 1 {
		t.Errorf("keep after the restart: %s with %d attempts, want RUNNING its first", d.Status, len(d.Attempts))
	}
	s2.AwaitStatus(waiter, types.ServiceJobStatusSucceeded)
	g.release("keep")
	d = s2.AwaitStatus(keep, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 1 || !strings.Contains(s2.mustLogs(keep, 1), "keep done") {
		t.Errorf("keep: %d attempts, log %q; want one attempt that ran to its end", len(d.Attempts), s2.mustLogs(keep, 1))
	}
	out, err := c.Command(context.Background(), "squeue", "-h", "--states=all", "-o", "%j")
	must(t, err)
	for _, id := range []string{keep, waiter} {
		if n := strings.Count(out, "qshare-"+id+"-"); n > 1 {
			t.Errorf("job %s has %d batch jobs in Slurm, want at most one:\n%s", id, n, out)
		}
	}
}
