// Package processe2e_test runs real training-job processes through a real
// `qshare serve --executor process`, driven only by the AWS SDK for Go v2
// batch client (and the server's log endpoint), as issue 4 asks: a job that
// succeeds, one retried by evaluateOnExit, timeouts, termination, in-share
// preemption with a checkpoint and a resume, cross-share reclaim, kill -9
// of the server and recovery, and GPU assignment with a fake nvidia-smi.
//
// TestMain builds the qshare binary once; each test starts its own server on
// a free loopback port with its own data directory, so the tests run in
// parallel, twelve at once (longtest.MinParallel): they wait on their
// jobs far more than they compute, and go test starts the waiting tests
// in no set order, so with fewer slots the long ones (Slurm, containers,
// data) often waited for short ones and ended the package late. The jobs
// are small shell scripts that wait on "gate" files the test creates, so that no
// assertion depends on how fast a loaded machine is: the tests poll
// DescribeServiceJob and the logs with a deadline and never sleep a fixed
// time. See docs/process-e2e.md.
package processe2e_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/internal/batchclient"
	"qshare/internal/longtest"
	"qshare/internal/serveproc"
)

// bin is the qshare binary under test.
var bin string

// waitLimit bounds every wait for a state. It is generous because the CI
// machine has two cores shared by many test processes; a healthy run takes
// well under a second for each wait.
const waitLimit = 90 * time.Second

// grace is the server's --stop-grace. Every job here that traps SIGTERM
// exits at once, so the grace only matters for the stubborn job, which
// sets a shorter one of its own.
const grace = "5s"

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test skips itself
	}
	longtest.MinParallel(12)
	os.Exit(serveproc.WithBinary("qshare-processe2e-", &bin, m.Run))
}

// skipShort skips a test in -short mode: each one builds on a real server.
// Otherwise it runs the test in parallel with the package's others: each
// has a server, a data directory, a port and (where it needs one) a Slurm
// cluster of its own.
func skipShort(t *testing.T) {
	t.Helper()
	if testing.Short() {
		t.Skip("runs the qshare binary with real job processes")
	}
	t.Parallel()
}

// server is one `qshare serve --executor process` child process.
type server struct {
	t        *testing.T
	dataDir  string
	proc     *serveproc.Server
	endpoint string
	// Jobs waits on the jobs through the server's client, C.
	batchclient.Jobs
}

// serverOpts are what differs between the tests' servers.
type serverOpts struct {
	// gpus is the --gpus flag ("none" unless a test fakes nvidia-smi).
	gpus string
	// pathPrefix is put in front of PATH (a directory with a fake nvidia-smi).
	pathPrefix string
	// args are more flags of qshare serve; env is added to its environment.
	args, env []string
	// prepare, when set, is called with the data directory (created)
	// before the server starts, and returns more flags (the Slurm
	// executor's configuration file, written there).
	prepare func(t *testing.T, dataDir string) []string
	// named: prepare's flags name the executors (--executors FILE), so
	// the server gets no --executor and no --gpus.
	named bool
	// ended, when set, says whether the executor recorded the end of the
	// attempt whose directory is given; nil: the process executor's record.
	ended func(attemptDir string) bool
}

// endRecorded says whether the executor recorded the end of the attempt
// whose directory is dir.
func (o serverOpts) endRecorded(dir string) bool {
	if o.ended != nil {
		return o.ended(dir)
	}
	_, ended := readAttempt(dir)
	return ended
}

// newDataDir returns a fresh data directory. When the test ends, after its
// servers stopped, any job process still running in it is killed, so that
// a failed test leaves nothing behind.
func newDataDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "data")
	t.Cleanup(func() { killLeftovers(t, dir) })
	return dir
}

// startServer starts a server on dataDir and returns once it listens. Its
// environment is the tests' without their QSHARE_* settings; the jobs get
// PATH, HOME, LANG and TZ of it (and what --pass-env names). What it prints is in the test's log if the test fails.
func startServer(t *testing.T, dataDir string, o serverOpts) *server {
	t.Helper()
	if o.gpus == "" {
		o.gpus = "none"
	}
	args := []string{"--executor", "process", "--stop-grace", grace, "--log-level", "info"}
	if o.named {
		args = args[2:]
	} else if o.gpus != "-" {
		args = append(args, "--gpus", o.gpus)
	}
	args = append(args, o.args...)
	if o.prepare != nil {
		must(t, os.MkdirAll(dataDir, 0o755))
		args = append(args, o.prepare(t, dataDir)...)
	}
	env := append([]string(nil), o.env...)
	if o.pathPrefix != "" {
		env = append(env, "PATH="+o.pathPrefix+string(os.PathListSeparator)+os.Getenv("PATH"))
	}
	proc, err := serveproc.Start(context.Background(), serveproc.Options{Binary: bin, DataDir: dataDir, Args: args, Env: env, StartWait: waitLimit})
	if err != nil {
		t.Fatal(err)
	}
	s := &server{t: t, dataDir: dataDir, proc: proc, endpoint: proc.Endpoint,
		Jobs: batchclient.Jobs{T: t, C: batchclient.New(proc.Endpoint, "us-east-1"), Limit: waitLimit}}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("server log (%s):\n%s", dataDir, proc.Log())
		}
	})
	return s
}

// kill ends the server with SIGKILL, as a crash would; its jobs keep running.
func (s *server) kill() { s.proc.Kill() }

// stop interrupts the server, as Ctrl-C would, and kills it if it has not
// exited 15 s later.
func (s *server) stop() {
	if err := s.proc.Stop(); err != nil {
		s.t.Error(err)
	}
}

// share is a quota share to create.
type share struct {
	name     string
	limits   map[string]int32
	strategy types.QuotaShareResourceSharingStrategy
	borrow   *int32
	inShare  bool
}

// setup creates a scheduling policy, a service environment with the given
// capacity limits, the job queue "q" and the shares.
func (s *server) setup(envLimits map[string]int32, shares ...share) {
	s.t.Helper()
	s.queueOn(s.policy(), "env", "q", nil, envLimits, shares...)
}

// policy creates the FIFO quota-share scheduling policy "pol" and returns
// its ARN.
func (s *server) policy() *string {
	s.t.Helper()
	pol, err := s.C.CreateSchedulingPolicy(context.Background(), &batch.CreateSchedulingPolicyInput{Name: aws.String("pol"),
		QuotaSharePolicy: &types.QuotaSharePolicy{IdleResourceAssignmentStrategy: types.QuotaShareIdleResourceAssignmentStrategyFifo}})
	must(s.t, err)
	return pol.Arn
}

// queueOn creates the service environment env with the given tags and
// capacity limits, the job queue queue on it under the policy pol, and
// the queue's shares.
func (s *server) queueOn(pol *string, env, queue string, tags map[string]string, envLimits map[string]int32, shares ...share) {
	t := s.t
	t.Helper()
	ctx := context.Background()
	var limits []types.CapacityLimit
	for u, n := range envLimits {
		limits = append(limits, types.CapacityLimit{CapacityUnit: aws.String(u), MaxCapacity: aws.Int32(n)})
	}
	_, err := s.C.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String(env),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining, CapacityLimits: limits, Tags: tags})
	must(t, err)
	_, err = s.C.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String(queue), Priority: aws.Int32(1),
		SchedulingPolicyArn: pol, JobQueueType: types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String(env)}}})
	must(t, err)
	for _, sh := range shares {
		var sl []types.QuotaShareCapacityLimit
		for u, n := range sh.limits {
			sl = append(sl, types.QuotaShareCapacityLimit{CapacityUnit: aws.String(u), MaxCapacity: aws.Int32(n)})
		}
		in := types.QuotaShareInSharePreemptionStateDisabled
		if sh.inShare {
			in = types.QuotaShareInSharePreemptionStateEnabled
		}
		_, err = s.C.CreateQuotaShare(ctx, &batch.CreateQuotaShareInput{QuotaShareName: aws.String(sh.name), JobQueue: aws.String(queue),
			CapacityLimits:               sl,
			ResourceSharingConfiguration: &types.QuotaShareResourceSharingConfiguration{Strategy: sh.strategy, BorrowLimit: sh.borrow},
			PreemptionConfiguration:      &types.QuotaSharePreemptionConfiguration{InSharePreemption: in}})
		must(t, err)
	}
}

// job is a service job to submit: a shell script run by /bin/sh -c.
type job struct {
	// queue is the job queue (default q).
	queue       string
	name, share string
	priority    int32
	script      string
	// unit and count are the ResourceConfig (default ml.m5.xlarge × 1).
	unit  string
	count int
	env   map[string]string
	retry *types.ServiceJobRetryStrategy
	// timeout is timeoutConfig.attemptDurationSeconds; maxRuntime is the
	// payload's StoppingCondition.MaxRuntimeInSeconds.
	timeout, maxRuntime int
	// entrypoint, when set, is run instead of /bin/sh -c script.
	entrypoint []string
	// payload holds more members of the payload (HyperParameters, …).
	payload map[string]any
	// preemptRetries is preemptionConfiguration.preemptionRetriesBeforeTermination.
	preemptRetries *int32
}

// submit submits j and returns its job ID.
func (s *server) submit(j job) string {
	t := s.t
	t.Helper()
	if j.unit == "" {
		j.unit = "ml.m5.xlarge"
	}
	if j.count == 0 {
		j.count = 1
	}
	p := map[string]any{
		"AlgorithmSpecification": map[string]any{"TrainingImage": "local/sh:latest", "TrainingInputMode": "File",
			"ContainerEntrypoint": []string{"/bin/sh", "-c"}, "ContainerArguments": []string{j.script}},
		"RoleArn":          "arn:aws:iam::000000000000:role/e2e",
		"ResourceConfig":   map[string]any{"InstanceType": j.unit, "InstanceCount": j.count, "VolumeSizeInGB": 1},
		"CheckpointConfig": map[string]any{"LocalPath": "/opt/ml/checkpoints"},
	}
	if len(j.env) > 0 {
		p["Environment"] = j.env
	}
	if j.maxRuntime > 0 {
		p["StoppingCondition"] = map[string]any{"MaxRuntimeInSeconds": j.maxRuntime}
	}
	if j.entrypoint != nil {
		p["AlgorithmSpecification"] = map[string]any{"TrainingImage": "local/sh:latest", "ContainerEntrypoint": j.entrypoint}
	}
	for k, v := range j.payload {
		p[k] = v
	}
	payload, err := json.Marshal(p)
	must(t, err)
	if j.queue == "" {
		j.queue = "q"
	}
	in := &batch.SubmitServiceJobInput{JobName: aws.String(j.name), JobQueue: aws.String(j.queue),
		ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(string(payload)),
		SchedulingPriority: aws.Int32(j.priority), RetryStrategy: j.retry}
	if j.share != "" {
		in.QuotaShareName = aws.String(j.share)
	}
	if j.preemptRetries != nil {
		in.PreemptionConfiguration = &types.ServiceJobPreemptionConfiguration{PreemptionRetriesBeforeTermination: j.preemptRetries}
	}
	if j.timeout > 0 {
		in.TimeoutConfig = &types.ServiceJobTimeout{AttemptDurationSeconds: aws.Int32(int32(j.timeout))}
	}
	out, err := s.C.SubmitServiceJob(context.Background(), in)
	must(t, err)
	return aws.ToString(out.JobId)
}

// awaitRunning waits until a job runs its n-th attempt.
func (s *server) awaitRunning(id string, n int) *batch.DescribeServiceJobOutput {
	s.t.Helper()
	return s.Await(id, fmt.Sprintf("RUNNING attempt %d", n), func(d *batch.DescribeServiceJobOutput) bool {
		return d.Status == types.ServiceJobStatusRunning && len(d.Attempts) == n
	})
}

// logs returns an attempt's output through GET /qshare/v1/logs/{jobId}
// (attempt 0: the latest), or an error that carries the server's answer.
func (s *server) logs(id string, attempt int) (string, error) {
	u := s.endpoint + "/qshare/v1/logs/" + url.PathEscape(id)
	if attempt > 0 {
		u += "?attempt=" + strconv.Itoa(attempt)
	}
	resp, err := http.Get(u)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s: %s", u, resp.Status, b)
	}
	return string(b), nil
}

// mustLogs returns an attempt's output and fails the test if it cannot.
func (s *server) mustLogs(id string, attempt int) string {
	s.t.Helper()
	out, err := s.logs(id, attempt)
	must(s.t, err)
	return out
}

// awaitLog waits until an attempt's output contains want, and returns it.
func (s *server) awaitLog(id string, attempt int, want string) string {
	s.t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		out, err := s.logs(id, attempt)
		if err == nil && strings.Contains(out, want) {
			return out
		}
		if time.Now().After(deadline) {
			s.t.Fatalf("attempt %d of job %s has not printed %q after %s; its output: %q (%v)", attempt, id, want, waitLimit, out, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// attemptDir is where the executor keeps the records of a job's n-th attempt.
func (s *server) attemptDir(id string, n int) string {
	return filepath.Join(s.dataDir, "attempts", fmt.Sprintf("%s-%d", id, n))
}

// gates is a directory of files that release the tests' jobs: a job waits
// until the file named after it (or "all") exists.
type gates struct {
	t   *testing.T
	dir string
}

func newGates(t *testing.T) *gates { return &gates{t: t, dir: t.TempDir()} }

// release lets the named job go on.
func (g *gates) release(name string) {
	g.t.Helper()
	must(g.t, os.WriteFile(filepath.Join(g.dir, name), nil, 0o644))
}

// env is the Environment that tells a job where its gate is.
func (g *gates) env(extra ...string) map[string]string {
	m := map[string]string{"GATE": g.dir}
	for i := 0; i+1 < len(extra); i += 2 {
		m[extra[i]] = extra[i+1]
	}
	return m
}

// waitGate is shell that waits (at most a minute, so a failed test leaves
// nothing running for long) until the job's gate file exists. The
// `sleep & wait` lets a SIGTERM trap run at once.
const waitGate = `i=0; while [ ! -e "$GATE/$QSHARE_JOB_NAME" ] && [ ! -e "$GATE/all" ] && [ $i -lt 600 ]; do i=$((i+1)); sleep 0.1 & wait $!; done; `

// alive reports whether a process exists and is not a zombie. Zombies
// count as gone: an orphan that exits stays one until init reaps it, and
// some sandboxes' init never does.
func alive(pid int) bool {
	f, ok := procFields(pid)
	return ok && f[0] != "Z" && f[0] != "X"
}

// groupAlive reports whether a process group has a member that is not a
// zombie.
func groupAlive(pgid int) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, ok := procFields(pid); ok && f[2] == strconv.Itoa(pgid) && f[0] != "Z" && f[0] != "X" {
			return true
		}
	}
	return false
}

// procFields returns the fields of /proc/PID/stat after the command name:
// [0] is the state (field 3), [2] the process group (field 5), [19] the
// start time (field 22).
func procFields(pid int) ([]string, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil, false
	}
	f := strings.Fields(string(b[i+1:]))
	return f, len(f) >= 20
}

// runningSh defines the shell function `running PID`: true while the
// process exists and is not a zombie (kill -0 succeeds on a zombie, and an
// orphan stays one until init reaps it).
const runningSh = `running() { s=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1); [ -n "$s" ] && [ "$s" != Z ] && [ "$s" != X ]; }
`

var pidRE = regexp.MustCompile(`pid=(\d+)`)

// pidIn returns the first pid=N an output names.
func pidIn(t *testing.T, out string) int {
	t.Helper()
	m := pidRE.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no pid=N in the output %q", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// killLeftovers kills the process group of every attempt in a data
// directory that has not recorded its end, after checking that the pid
// still names the same process (its start time), so that a recycled pid is
// never hit.
func killLeftovers(t *testing.T, dataDir string) {
	files, _ := filepath.Glob(filepath.Join(dataDir, "attempts", "*", "launched"))
	for _, f := range files {
		st, ended := readAttempt(filepath.Dir(f))
		if ended || st == nil || st.Job.PID <= 1 {
			continue
		}
		// The leader may be a zombie that its group outlived: compare the
		// start time whatever the state.
		if f, ok := procFields(st.Job.PID); !ok || f[19] != strconv.FormatUint(st.Job.Start, 10) || !groupAlive(st.Job.PID) {
			continue
		}
		t.Logf("killing the leftover job process group %d (%s)", st.Job.PID, filepath.Dir(f))
		_ = syscall.Kill(-st.Job.PID, syscall.SIGKILL)
	}
}

// procID names a process in an attempt's record: pid and start time.
type procID struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"`
}

// attemptStart is the start of an attempt as its supervisor recorded it.
type attemptStart struct {
	Supervisor procID `json:"supervisor"`
	Job        procID `json:"job"`
}

// readAttempt reads the record of the attempt directory dir (its launched
// file: one JSON object a line, the launch, then {"started":…} and
// {"exit":…}; see executor/process/recovery.go): the start, if recorded,
// and whether the end is recorded.
func readAttempt(dir string) (st *attemptStart, ended bool) {
	b, _ := os.ReadFile(filepath.Join(dir, "launched"))
	lines := strings.Split(string(b), "\n")
	for _, l := range lines[:len(lines)-1] { // the last is incomplete, or empty
		var r struct {
			Started *attemptStart    `json:"started"`
			Exit    *json.RawMessage `json:"exit"`
		}
		if json.Unmarshal([]byte(l), &r) != nil {
			continue
		}
		if r.Started != nil {
			st = r.Started
		}
		ended = ended || r.Exit != nil
	}
	return st, ended
}

// startTime returns field 22 of /proc/PID/stat, when the process started,
// if the process exists and is not a zombie.
func startTime(pid int) (uint64, bool) {
	f, ok := procFields(pid)
	if !ok || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	n, err := strconv.ParseUint(f[19], 10, 64)
	return n, err == nil
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// attemptReasons lists the status reasons of a job's attempts.
func attemptReasons(d *batch.DescribeServiceJobOutput) []string {
	var rs []string
	for _, a := range d.Attempts {
		rs = append(rs, aws.ToString(a.StatusReason))
	}
	return rs
}
