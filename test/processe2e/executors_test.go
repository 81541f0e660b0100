package processe2e_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"qshare/executor/kubernetes/kubetest"
	"qshare/executor/slurm/slurmtest"
	"qshare/internal/longtest"
)

// One server in front of several executors at once (issue 34,
// docs/executors.md): `qshare serve --executors FILE` with the process
// executor (named default), the simulated one (sim) and, where Slurm is
// installed, the Slurm executor on a throwaway cluster (hpc) and, where the
// Kubernetes test binaries are built, the Kubernetes executor on a
// throwaway API server with the played kubelet (k8s). Each has its service
// environment (the tag qshare:executor names it), job queue and quota share.

// kubeSide is the Kubernetes executor's cluster of a test: a control plane
// with the played kubelet, one namespace and two nodes of cpu's type.
type kubeSide struct {
	*kubetest.Cluster
	ns string
}

// startKube starts a control plane for the test (skipping it where the
// binaries are absent) with the namespace qs and two nodes of cpu's type.
func startKube(t *testing.T) *kubeSide {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := kubetest.Own(ctx, t)
	k := &kubeSide{Cluster: c, ns: "qs"}
	_, err := c.Client().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: k.ns}}, metav1.CreateOptions{})
	must(t, err)
	for _, n := range []string{"node-0", "node-1"} {
		must(t, c.Kubelet.AddNode(ctx, n, strings.TrimPrefix(cpu, "ml."), 0))
	}
	return k
}

// pods returns the job IDs of the namespace's pods, one entry per pod.
func (k *kubeSide) pods(t *testing.T) []string {
	t.Helper()
	l, err := k.Client().Pods(k.ns).List(context.Background(), metav1.ListOptions{})
	must(t, err)
	var ids []string
	for _, p := range l.Items {
		ids = append(ids, p.Labels["qshare.io/job-id"])
	}
	return ids
}

// running waits until the namespace's running pods are those of exactly
// the jobs ids (one each).
func (k *kubeSide) running(t *testing.T, ids ...string) {
	t.Helper()
	var got []string
	awaitFile(t, fmt.Sprintf("running pods for exactly %v", ids), func() bool {
		l, err := k.Client().Pods(k.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "status.phase=Running"})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, p := range l.Items {
			got = append(got, p.Labels["qshare.io/job-id"])
		}
		return sameIDs(got, ids)
	})
}

// played is a job whose container is the played kubelet's Program p.
func played(queue, name string, p kubetest.Program) job {
	return job{queue: queue, name: name, share: "s", payload: map[string]any{"AlgorithmSpecification": map[string]any{
		"TrainingImage": "example.com/train:1", "TrainingInputMode": "File",
		"ContainerEntrypoint": []string{kubetest.PlayCommand}, "ContainerArguments": p.Args()}}}
}

// multiServer returns the options of a server with the executors default
// (process), sim (simulated), with c hpc (slurm on c, its shared
// directory beside the data directory, so nothing of it is where the
// process executor keeps its attempts) and with k k8s (kubernetes on k).
func multiServer(c *slurmtest.Cluster, k *kubeSide) serverOpts {
	o := serverOpts{named: true, prepare: func(t *testing.T, dataDir string) []string {
		file := "default: {kind: process, gpus: none}\nsim: {kind: simulated}\n"
		if c != nil {
			shared := dataDir + "-hpc"
			must(t, os.MkdirAll(shared, 0o755))
			conf := filepath.Join(shared, "slurm.yaml")
			must(t, os.WriteFile(conf, []byte(`sharedDir: .
instanceTypes:
  `+cpu+`: {partition: qs, cpus: 1, memory: 64M, shareNodes: true}
`), 0o644))
			file += "hpc: {kind: slurm, slurmConfig: " + conf + "}\n"
		}
		if k != nil {
			file += "k8s: {kind: kubernetes, kubeconfig: " + k.Kubeconfig() + ", namespace: " + k.ns + "}\n"
		}
		path := filepath.Join(dataDir, "..", "executors.yaml")
		must(t, os.WriteFile(path, []byte(file), 0o644))
		return []string{"--executors", path}
	}}
	if c != nil {
		for _, kv := range c.Env() {
			if strings.HasPrefix(kv, "SLURM_CONF=") {
				o.env = append(o.env, kv)
			}
		}
	}
	return o
}

// setupEnvs creates, for each executor name, the service environment
// env-NAME on it (default's without the tag), the job queue q-NAME on it
// and its RESERVE share s of 2 instances.
func (s *server) setupEnvs(names ...string) {
	s.t.Helper()
	pol := s.policy()
	for _, n := range names {
		var tags map[string]string
		if n != "default" {
			tags = map[string]string{"qshare:executor": n}
		}
		two := map[string]int32{cpu: 2}
		s.queueOn(pol, "env-"+n, "q-"+n, tags, two, share{name: "s", limits: two, strategy: types.QuotaShareResourceSharingStrategyReserve})
	}
}

// envReasons returns every service environment's statusReason by name
// (a qshare extension the SDK does not decode).
func (s *server) envReasons() map[string]string {
	s.t.Helper()
	resp, err := http.Post(s.endpoint+"/v1/describeserviceenvironments", "application/json", strings.NewReader("{}"))
	must(s.t, err)
	defer resp.Body.Close()
	var out struct {
		ServiceEnvironments []struct {
			Name         string `json:"serviceEnvironmentName"`
			StatusReason string `json:"statusReason"`
		} `json:"serviceEnvironments"`
	}
	must(s.t, json.NewDecoder(resp.Body).Decode(&out))
	m := map[string]string{}
	for _, e := range out.ServiceEnvironments {
		m[e.Name] = e.StatusReason
	}
	return m
}

// attemptExecutors returns the executor that DescribeServiceJob names for
// each attempt of a job (a qshare extension; "" for the default).
func (s *server) attemptExecutors(id string) []string {
	s.t.Helper()
	resp, err := http.Post(s.endpoint+"/v1/describeservicejob", "application/json", strings.NewReader(`{"jobId":"`+id+`"}`))
	must(s.t, err)
	defer resp.Body.Close()
	var out struct {
		Attempts []struct {
			Executor string `json:"executor"`
		} `json:"attempts"`
	}
	must(s.t, json.NewDecoder(resp.Body).Decode(&out))
	var names []string
	for _, a := range out.Attempts {
		names = append(names, a.Executor)
	}
	return names
}

// TestExecutorsProcessAndSimulated: one server with the process and the
// simulated executor (and Slurm's, where it is installed: see
// TestExecutorsWithSlurm).
func TestExecutorsProcessAndSimulated(t *testing.T) {
	skipShort(t)
	multiExecutors(t, nil, nil)
}

// TestExecutorsWithSlurm: the same with the Slurm executor beside them,
// and Slurm's controller down holding only the Slurm environment's jobs.
func TestExecutorsWithSlurm(t *testing.T) {
	skipShort(t)
	c := slurmtest.StartT(t, slurmCluster)
	multiExecutors(t, c, nil)
}

// TestExecutorsAllThree: the process, Slurm and Kubernetes executors (and
// the simulated one) in one server at once (issue 34 point 5): each job
// runs where its environment says and nowhere else, kill -9 of the server
// recovers all of them, and Slurm's controller down holds only the Slurm
// environment's jobs. It runs where QSHARE_LONG=1 (.ci/run's long step):
// a Slurm cluster and a control plane of its own took 50 s of this
// package in go test ./..., where TestExecutorsWithSlurm plays the same
// scenario on the process, Slurm and simulated executors.
func TestExecutorsAllThree(t *testing.T) {
	skipShort(t)
	longtest.Only(t, "the three executors side by side need a Slurm cluster and a Kubernetes control plane of their own; in the README's command TestExecutorsWithSlurm plays the same with the process, Slurm and simulated executors")
	kubetest.Require(t)
	c := slurmtest.StartT(t, slurmCluster)
	multiExecutors(t, c, startKube(t))
}

// multiExecutors: jobs run only where their environment's executor is
// (the process executor's attempt directory, Slurm's squeue, no log for a
// simulated attempt), each log is served through the executor that ran
// the attempt, a kill -9 of the server recovers every executor's attempts
// (one attempt each, all succeed), and, with Slurm, its controller down
// shows in its environment alone while the others' jobs go on.
func multiExecutors(t *testing.T, c *slurmtest.Cluster, k *kubeSide) {
	names := []string{"default", "sim"}
	if c != nil {
		names = append(names, "hpc")
	}
	if k != nil {
		names = append(names, "k8s")
	}
	o := multiServer(c, k)
	dataDir := newDataDir(t)
	s := startServer(t, dataDir, o)
	if !strings.Contains(s.proc.Log(), "executors default (process), ") {
		t.Errorf("the listening line does not name the executors:\n%s", s.proc.Log())
	}
	s.setupEnvs(names...)
	ctx := context.Background()
	_, err := s.C.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("nowhere"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining, Tags: map[string]string{"qshare:executor": "gone"},
		CapacityLimits: []types.CapacityLimit{{CapacityUnit: aws.String(cpu), MaxCapacity: aws.Int32(1)}}})
	if err == nil || !strings.Contains(err.Error(), "ClientException") || !strings.Contains(err.Error(), `"gone": this server has no executor of that name`) {
		t.Fatalf("an environment on an executor the server lacks: %v", err)
	}

	g := newGates(t)
	script := `echo "$QSHARE_JOB_NAME attempt $QSHARE_ATTEMPT"; ` + waitGate + `echo done`
	ids := map[string]string{}
	for _, n := range names {
		j := job{queue: "q-" + n, name: "on-" + n, share: "s", env: g.env(), script: script}
		switch n {
		case "sim":
			j.env = map[string]string{"QSHARE_SIM_DURATION": "3s"}
		case "k8s":
			// A played container ends on its own: long enough to be
			// running when the server is killed on a loaded machine.
			j = played("q-k8s", "on-k8s", kubetest.Program{Run: 30 * time.Second, Output: "on-k8s attempt 1"})
		}
		ids[n] = s.submit(j)
	}
	for _, n := range names {
		s.awaitRunning(ids[n], 1)
		want := n
		if n == "default" {
			want = ""
		}
		if got := s.attemptExecutors(ids[n]); len(got) != 1 || got[0] != want {
			t.Errorf("DescribeServiceJob names the executors %q of %s's attempts, want [%q]", got, n, want)
		}
	}
	s.awaitLog(ids["default"], 1, "on-default attempt 1")
	// qshare describe names a non-default attempt's executor, and adds no
	// column where every attempt ran on the default one.
	out, _, err := s.proc.Command(bin, t.TempDir(), "describe", ids["sim"])
	must(t, err)
	if !strings.Contains(out, "EXECUTOR") || !strings.Contains(out, "sim\n") {
		t.Errorf("qshare describe of the simulated job does not name its executor:\n%s", out)
	}
	out, _, err = s.proc.Command(bin, t.TempDir(), "describe", ids["default"])
	must(t, err)
	if strings.Contains(out, "EXECUTOR") {
		t.Errorf("qshare describe of a job on the default executor has an executor column:\n%s", out)
	}
	resp, err := http.Get(s.endpoint + "/metrics")
	must(t, err)
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	must(t, err)
	for _, n := range names {
		if want := `qshare_executor_start_seconds_count{executor="` + n + `",outcome="success"} 1`; !strings.Contains(string(body), want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	if _, err := os.Stat(s.attemptDir(ids["default"], 1)); err != nil {
		t.Errorf("the process executor has no directory for its attempt: %v", err)
	}
	for _, n := range names[1:] {
		if _, err := os.Stat(s.attemptDir(ids[n], 1)); err == nil {
			t.Errorf("the process executor has a directory for %s's attempt, which is not its own", n)
		}
	}
	if _, err := s.logs(ids["sim"], 1); err == nil || !strings.Contains(err.Error(), "keeps no output") {
		t.Errorf("the simulated attempt's log: %v, want the simulated executor's answer that it keeps none", err)
	}
	if c != nil {
		s.awaitLog(ids["hpc"], 1, "on-hpc attempt 1")
		slurmRunning(c)(t, ids["hpc"])
	}
	if k != nil {
		s.awaitLog(ids["k8s"], 1, "on-k8s attempt 1")
		if got := k.pods(t); !sameIDs(got, []string{ids["k8s"]}) {
			t.Errorf("the namespace's pods are of the jobs %q, want the Kubernetes environment's one job %s", got, ids["k8s"])
		}
	}

	// kill -9, then the same file again: every executor recovers its own.
	s.kill()
	s2 := startServer(t, dataDir, o)
	for _, n := range names {
		d := s2.Describe(ids[n])
		if d.Status != types.ServiceJobStatusRunning && !((n == "sim" || n == "k8s") && d.Status == types.ServiceJobStatusSucceeded) {
			t.Errorf("%s after the restart: %s (%q), want RUNNING", n, d.Status, aws.ToString(d.StatusReason))
		}
	}
	g.release("all")
	for _, n := range names {
		d := s2.AwaitStatus(ids[n], types.ServiceJobStatusSucceeded)
		if len(d.Attempts) != 1 {
			t.Errorf("%s: %d attempts, want its first only", n, len(d.Attempts))
		}
	}
	if out := s2.mustLogs(ids["default"], 1); !strings.Contains(out, "done") {
		t.Errorf("the process job's log after the restart: %q", out)
	}
	if k != nil {
		if got := k.pods(t); !sameIDs(got, []string{ids["k8s"]}) {
			t.Errorf("after the restart the namespace's pods are of the jobs %q, want %s's one", got, ids["k8s"])
		}
		if out := s2.mustLogs(ids["k8s"], 1); out != "on-k8s attempt 1\n" {
			t.Errorf("the pod's log after the restart: %q", out)
		}
	}
	if c == nil {
		t.Log("no Slurm executor in this run: TestExecutorsWithSlurm takes its controller down")
		return
	}
	if out := s2.mustLogs(ids["hpc"], 1); !strings.Contains(out, "done") {
		t.Errorf("the Slurm job's log after the restart: %q", out)
	}

	// Slurm's controller down: only env-hpc says so; its new job waits,
	// the others' run.
	must(t, c.StopController())
	restarted := false
	defer func() {
		if !restarted {
			c.StartController(context.Background()) //nolint:errcheck
		}
	}()
	awaitFile(t, "env-hpc to say slurmctld is down", func() bool { return strings.Contains(s2.envReasons()["env-hpc"], "slurmctld does not answer") })
	for env, r := range s2.envReasons() {
		if env != "env-hpc" && r != "" {
			t.Errorf("%s's statusReason %q while only Slurm is down", env, r)
		}
	}
	held := s2.submit(job{queue: "q-hpc", name: "held", share: "s", script: `echo held ran`})
	box := s2.submit(job{queue: "q-default", name: "box", share: "s", script: `echo box ran`})
	sim := s2.submit(job{queue: "q-sim", name: "sim2", share: "s", env: map[string]string{"QSHARE_SIM_DURATION": "10ms"}, script: "true"})
	s2.AwaitStatus(box, types.ServiceJobStatusSucceeded)
	s2.AwaitStatus(sim, types.ServiceJobStatusSucceeded)
	if k != nil {
		pod := s2.submit(played("q-k8s", "pod2", kubetest.Program{Run: 100 * time.Millisecond}))
		s2.AwaitStatus(pod, types.ServiceJobStatusSucceeded)
		if got := k.pods(t); !sameIDs(got, []string{ids["k8s"], pod}) {
			t.Errorf("the namespace's pods are of the jobs %q, want %s's and %s's", got, ids["k8s"], pod)
		}
	}
	if d := s2.Describe(held); d.Status == types.ServiceJobStatusSucceeded || d.Status == types.ServiceJobStatusFailed {
		t.Errorf("held ended (%s, %q) while Slurm's controller was down", d.Status, aws.ToString(d.StatusReason))
	}
	must(t, c.StartController(context.Background()))
	restarted = true
	d := s2.AwaitStatus(held, types.ServiceJobStatusSucceeded)
	if len(d.Attempts) != 1 {
		t.Errorf("held: %d attempts, want 1", len(d.Attempts))
	}
	awaitFile(t, "env-hpc's statusReason to clear", func() bool { return s2.envReasons()["env-hpc"] == "" })
	if k == nil {
		return
	}
	if !longtest.On() {
		t.Log("the worked example side by side on the process, Slurm and Kubernetes executors runs with QSHARE_LONG=1")
		return
	}
	exampleSideBySide(t, s2, c, k)
}

// exampleSideBySide plays the spec's worked example (§6.10; the steps of
// workedExample, without the trainer's checkpoint) on three queues of one
// server at once: wx-default on the process executor, wx-hpc on Slurm and
// wx-k8s on Kubernetes, each in an environment of three instances with
// the shares QS1 (LEND_AND_BORROW, in-share preemption), QS2 (LEND) and
// QS3 (RESERVE) of one each. Each step is taken on all three queues before
// the next; at each, the running jobs are checked in the executor's own
// view (squeue, the pods, the processes' status).
func exampleSideBySide(t *testing.T, s *server, c *slurmtest.Cluster, k *kubeSide) {
	execs := []string{"default", "hpc", "k8s"}
	pol, err := s.C.CreateSchedulingPolicy(context.Background(), &batch.CreateSchedulingPolicyInput{Name: aws.String("wx"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(t, err)
	one := map[string]int32{cpu: 1}
	for _, n := range execs {
		var tags map[string]string
		if n != "default" {
			tags = map[string]string{"qshare:executor": n}
		}
		s.queueOn(pol.Arn, "wx-env-"+n, "wx-"+n, tags, map[string]int32{cpu: 3},
			share{name: "QS1", limits: one, strategy: types.QuotaShareResourceSharingStrategyLendAndBorrow, borrow: aws.Int32(200), inShare: true},
			share{name: "QS2", limits: one, strategy: types.QuotaShareResourceSharingStrategyLend},
			share{name: "QS3", limits: one, strategy: types.QuotaShareResourceSharingStrategyReserve})
	}
	g := newGates(t)
	script := `echo "$QSHARE_JOB_NAME attempt $QSHARE_ATTEMPT in $QSHARE_QUOTA_SHARE"; ` + waitGate + `echo done`
	sub := func(n, name, share string, prio int32) string {
		j := job{name: name, env: g.env(), script: script}
		if n == "k8s" {
			// A played container ends on its own: long enough to
			// outlast the three steps on a loaded machine.
			j = played("", name, kubetest.Program{Run: time.Minute, Output: name})
		}
		j.queue, j.share, j.priority = "wx-"+n, share, prio
		return s.submit(j)
	}
	running := func(n string, ids ...string) {
		t.Helper()
		switch n {
		case "hpc":
			slurmRunning(c)(t, ids...)
		case "k8s":
			k.running(t, ids...)
		}
		for _, id := range ids {
			s.AwaitStatus(id, types.ServiceJobStatusRunning)
		}
	}
	preempted := func(id, how string) {
		t.Helper()
		d := s.Await(id, "RUNNABLE after a "+how+" preemption", func(d *batch.DescribeServiceJobOutput) bool {
			return d.Status == types.ServiceJobStatusRunnable && len(d.Attempts) == 1 && d.Attempts[0].StoppedAt != nil
		})
		if r := aws.ToString(d.Attempts[0].StatusReason); !strings.HasPrefix(r, "Preempted by quota management ("+how+")") {
			t.Errorf("%s's attempt reason %q, want a %s preemption", aws.ToString(d.JobName), r, how)
		}
	}
	high, med, low, q2 := map[string]string{}, map[string]string{}, map[string]string{}, map[string]string{}
	// Step 1: QS1's three jobs; high and med run (med on QS2's lent
	// instance), low waits (QS3 reserves its own).
	for _, n := range execs {
		high[n] = sub(n, n+"-qs1-high", "QS1", 3)
		med[n] = sub(n, n+"-qs1-med", "QS1", 2)
		low[n] = sub(n, n+"-qs1-low", "QS1", 1)
	}
	for _, n := range execs {
		running(n, high[n], med[n])
		if d := s.Describe(low[n]); d.Status != types.ServiceJobStatusRunnable || len(d.Attempts) != 0 {
			t.Errorf("step 1 on %s: qs1-low is %s with %d attempts, want RUNNABLE with none", n, d.Status, len(d.Attempts))
		}
	}
	// Step 2: QS2 reclaims what it lent; med is preempted (cross-share).
	for _, n := range execs {
		q2[n] = sub(n, n+"-qs2-job-1", "QS2", 1)
	}
	for _, n := range execs {
		preempted(med[n], "cross-share")
		running(n, high[n], q2[n])
	}
	// Step 3: low's priority raised to 4 preempts high (in-share).
	for _, n := range execs {
		_, err := s.C.UpdateServiceJob(context.Background(), &batch.UpdateServiceJobInput{JobId: aws.String(low[n]), SchedulingPriority: aws.Int32(4)})
		must(t, err)
	}
	for _, n := range execs {
		preempted(high[n], "in-share")
		running(n, low[n], q2[n])
	}
	// The end: all let go (the pods end on their own); the preempted jobs
	// run again and succeed. A preempted pod's next attempt starts only
	// when a pod of step 2 or 3 has run its minute, and then runs a minute
	// of its own: the wait for the end allows both on top of the usual
	// limit.
	g.release("all")
	end := s.Jobs
	end.Limit = waitLimit + 2*time.Minute
	for _, n := range execs {
		for id, attempts := range map[string]int{high[n]: 2, med[n]: 2, low[n]: 1, q2[n]: 1} {
			if d := end.AwaitStatus(id, types.ServiceJobStatusSucceeded); len(d.Attempts) != attempts {
				t.Errorf("%s: %d attempts, want %d", aws.ToString(d.JobName), len(d.Attempts), attempts)
			}
		}
	}
}
