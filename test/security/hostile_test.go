package security_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/internal/cgrouptest"
	"qshare/internal/serveproc"
)

// The second hostile test (issue 30): each test here is an attack that a
// local user made on a real `qshare serve` run as root, with real users
// (alice and bob, created with useradd), and checks that it is refused.
// Each failed on the code before the fix; docs/security.md's "What we
// tested" lists them.

// authWithUsers is authFileText with alice's and bob's unixUsers.
func authWithUsers(alice, bob *user.User) string {
	text := strings.Replace(strings.Replace(authFileText(true),
		"    policies: [team-a]\n", "    unixUser: "+alice.Username+"\n    policies: [team-a]\n", 1),
		"    policies: [team-b]\n", "    unixUser: "+bob.Username+"\n    policies: [team-b]\n", 1)
	return strings.Replace(text, "Resource: [\"arn:aws:batch:*:*:job-queue/training/quota-share/QS2\", \"*\"]", "Resource: [\"arn:aws:batch:*:*:job-queue/training/quota-share/QS2\"]", 1)
}

// hostile is a real qshare serve as root with the process executor, with
// --auth (alice's jobs run as qshare-alice-test, bob's as qshare-bob-test)
// or without it.
type hostile struct {
	t          *testing.T
	dir, data  string
	alice, bob *user.User
	srv        *serveproc.Server
	admin      *batch.Client
}

// startHostile starts the server; auth turns --auth on; mod (if not nil)
// changes its options before it starts.
func startHostile(t *testing.T, auth bool, mod func(*serveproc.Options)) *hostile {
	t.Helper()
	h := &hostile{t: t, alice: ensureUser(t, "qshare-alice-test"), bob: ensureUser(t, "qshare-bob-test")}
	dir, err := os.MkdirTemp("", "qshare-hostile")
	must(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must(t, os.Chmod(dir, 0o755)) // the jobs' users must reach their directories
	h.dir, h.data = dir, filepath.Join(dir, "data")
	o := serveproc.Options{Binary: bin, DataDir: h.data, StopWait: 20 * time.Second,
		Args: []string{"--executor", "process", "--gpus", "none", "--log-level", "warn"}}
	if auth {
		file := filepath.Join(dir, "auth.yaml")
		must(t, os.WriteFile(file, []byte(authWithUsers(h.alice, h.bob)), 0o600))
		o.Args = append(o.Args, "--auth", file)
	}
	if mod != nil {
		mod(&o)
	}
	h.srv = serveproc.StartTest(t, o)
	h.admin = signedClient(h.srv.Endpoint, adminKey)
	setupTraining(t, h.admin, "ml.m5.xlarge")
	return h
}

// submitScript submits, as the client c, a job of share that runs script
// with sh and env in its Environment.
func submitScript(c *batch.Client, share, script string, env map[string]string) (string, error) {
	return submitCommand(c, share, []string{"/bin/sh", "-c"}, []string{script}, env)
}

// submitCommand submits, as the client c, a job of share whose
// ContainerEntrypoint and ContainerArguments are entry and args.
func submitCommand(c *batch.Client, share string, entry, args []string, env map[string]string) (string, error) {
	if env == nil {
		env = map[string]string{}
	}
	payload, _ := json.Marshal(map[string]any{
		"AlgorithmSpecification": map[string]any{"TrainingImage": "local/sh:latest", "TrainingInputMode": "File",
			"ContainerEntrypoint": entry, "ContainerArguments": args},
		"ResourceConfig": map[string]any{"InstanceType": "ml.m5.xlarge", "InstanceCount": 1, "VolumeSizeInGB": 1},
		"Environment":    env,
	})
	out, err := c.SubmitServiceJob(context.Background(), &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("training"),
		QuotaShareName: aws.String(share), ServiceJobType: types.ServiceJobTypeSagemakerTraining, ServiceRequestPayload: aws.String(string(payload))})
	if err != nil {
		return "", err
	}
	return *out.JobId, nil
}

// waitJob waits, as admin, for job id to end, for at most 60 s.
func waitJob(t *testing.T, admin *batch.Client, id string) *batch.DescribeServiceJobOutput {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := admin.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
		must(t, err)
		if out.Status == types.ServiceJobStatusSucceeded || out.Status == types.ServiceJobStatusFailed {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s is still %s", id, out.Status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// run submits a job as c and waits for its end.
func (h *hostile) run(c *batch.Client, share, script string, env map[string]string) (string, *batch.DescribeServiceJobOutput) {
	h.t.Helper()
	id, err := submitScript(c, share, script, env)
	must(h.t, err)
	return id, waitJob(h.t, h.admin, id)
}

// asAlice runs a command line as the user alice (setpriv), outside any job.
func (h *hostile) asAlice(script string) (string, error) {
	out, err := exec.Command("setpriv", "--reuid", h.alice.Uid, "--regid", h.alice.Gid, "--init-groups", "/bin/sh", "-c", script).CombinedOutput()
	return string(out), err
}

// output reads a file of job id's output/data.
func (h *hostile) output(id, name string) string {
	b, _ := os.ReadFile(filepath.Join(h.data, "jobs", id, "output", "data", name))
	return string(b)
}

// TestHostileInheritedDescriptors starts the server as a careless launcher
// would, with `7</root-only-secret 8>>/root-only-log` open: alice's job
// must neither read the first, nor append to the second, nor hold any
// descriptor but its standard streams (issue 30, point 1).
func TestHostileInheritedDescriptors(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	dir := t.TempDir()
	secretPath, logPath := filepath.Join(dir, "root-only-secret"), filepath.Join(dir, "root-only-log")
	must(t, os.WriteFile(secretPath, []byte("root-only-secret\n"), 0o600))
	must(t, os.WriteFile(logPath, nil, 0o600))
	secret, err := os.Open(secretPath)
	must(t, err)
	defer secret.Close()
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	defer logf.Close()
	null, err := os.Open(os.DevNull)
	must(t, err)
	defer null.Close()
	h := startHostile(t, true, func(o *serveproc.Options) {
		o.ExtraFiles = []*os.File{null, null, null, null, secret, logf} // 3..6, then 7 and 8
	})
	id, out := h.run(signedClient(h.srv.Endpoint, aliceKey), "QS1",
		`cat <&7 > "$SM_OUTPUT_DATA_DIR/leak" 2>/dev/null; echo appended-by-alice >&8; ls /proc/$$/fd > "$SM_OUTPUT_DATA_DIR/fds"; exit 0`, nil)
	if out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("alice's job: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
	if leak := h.output(id, "leak"); strings.Contains(leak, "root-only-secret") {
		t.Errorf("alice's job read the server's inherited descriptor 7: %q", leak)
	}
	if b, _ := os.ReadFile(logPath); strings.Contains(string(b), "appended-by-alice") {
		t.Errorf("alice's job appended to the server's inherited descriptor 8: %q", b)
	}
	fds := strings.Fields(h.output(id, "fds"))
	for _, fd := range fds {
		if fd >= "3" && fd <= "9" && len(fd) == 1 {
			t.Errorf("alice's job holds descriptor %s that it did not open; it holds %v", fd, fds)
		}
	}
}

// TestHostileDataOnDisk: with --auth, alice's job searches the whole data
// directory for bob's payload (an API key in its Environment) and tries
// the database and its log by name; without --auth, alice, another local
// user whom the API refuses, tries the disk instead (issue 30, point 3).
func TestHostileDataOnDisk(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	const key = "bob-payload-api-key-5f1c"
	h := startHostile(t, true, nil)
	if _, out := h.run(signedClient(h.srv.Endpoint, bobKey), "QS2", "true", map[string]string{"BOB_API_KEY": key}); out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("bob's job: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
	d := h.data
	script := `r=""
grep -rl ` + key + ` ` + d + ` 2>/dev/null && r="$r grep-found"
for f in ` + d + `/qshare.db ` + d + `/qshare.db-wal ` + d + `/state/qshare.db ` + d + `/state/qshare.db-wal; do cat "$f" >/dev/null 2>&1 && r="$r read:$f"; done
ls ` + d + ` >/dev/null 2>&1 && r="$r listed-data-dir"
ls ` + d + `/jobs >/dev/null 2>&1 && r="$r listed-jobs"
echo "$r" > "$SM_OUTPUT_DATA_DIR/found"; exit 0`
	id, out := h.run(signedClient(h.srv.Endpoint, aliceKey), "QS1", script, nil)
	if out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("alice's job: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
	if found := strings.TrimSpace(h.output(id, "found")); found != "" {
		t.Errorf("alice's job, as alice, got at the server's data: %s", found)
	}
	h.srv.Stop()

	// Without --auth the API refuses alice; the disk must too.
	n := startHostile(t, false, nil)
	if _, out := n.run(n.admin, "QS1", "true", map[string]string{"API_KEY": key}); out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("the job: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
	if out, err := n.asAlice(`grep -rl ` + key + ` ` + n.data + `; ls ` + n.data); err == nil || strings.Contains(out, key) {
		t.Errorf("alice, another local user, read the data directory of a server without --auth: %v\n%s", err, out)
	}
}

// TestHostileUpgradeTightens: a data directory as an earlier version left
// it (0755, files 0644, the database at DATA/qshare.db) is brought to the
// new layout by the next start, with its jobs all there.
func TestHostileUpgradeTightens(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	h := startHostile(t, false, nil)
	id, out := h.run(h.admin, "QS1", "echo model > \"$SM_MODEL_DIR/m\"", nil)
	if out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("the job: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
	must(t, h.srv.Stop())
	// What an earlier version left.
	state := filepath.Join(h.data, "state")
	ents, err := os.ReadDir(state)
	must(t, err)
	for _, e := range ents {
		must(t, os.Rename(filepath.Join(state, e.Name()), filepath.Join(h.data, e.Name())))
	}
	must(t, os.Remove(state))
	filepath.Walk(h.data, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.IsDir() {
			os.Chmod(p, 0o755)
		} else if err == nil && fi.Mode().IsRegular() {
			os.Chmod(p, 0o644)
		}
		return nil
	})
	if out, err := h.asAlice("cat " + h.data + "/qshare.db > /dev/null"); err != nil {
		t.Fatalf("the old layout is not as earlier versions left it (alice cannot read it): %v %s", err, out)
	}

	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: h.data, StopWait: 20 * time.Second,
		Args: []string{"--executor", "process", "--gpus", "none", "--log-level", "warn"}})
	admin := signedClient(srv.Endpoint, adminKey)
	got, err := admin.DescribeServiceJob(context.Background(), &batch.DescribeServiceJobInput{JobId: aws.String(id)})
	if err != nil || got.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("after the upgrade, the job is %v (%v): the database was not carried over", got, err)
	}
	if _, err := os.Stat(filepath.Join(h.data, "qshare.db")); err == nil {
		t.Error("DATA/qshare.db is still there after the upgrade")
	}
	if out, err := h.asAlice("ls " + h.data + "; cat " + h.data + "/state/qshare.db " + h.data + "/jobs/" + id + "/model/m"); err == nil {
		t.Errorf("after the upgrade alice still reads the data directory:\n%s", out)
	}
	filepath.Walk(h.data, func(p string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o077 != 0 && (filepath.Dir(p) == h.data || filepath.Dir(p) == state) {
			t.Errorf("%s is %#o after the upgrade", strings.TrimPrefix(p, h.data), fi.Mode().Perm())
		}
		return nil
	})
}

// TestHostileNoProbingAsRoot: alice names programs in a directory only
// root may enter (one that exists and is executable, one that exists and
// is not, one that does not exist, a directory), by path and through her
// PATH. Every refusal must read the same: the supervisor, root, must not
// tell her what exists where she may not look (issue 30, point 5).
func TestHostileNoProbingAsRoot(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	h := startHostile(t, true, nil)
	secret, err := os.MkdirTemp("", "qshare-root-only")
	must(t, err)
	defer os.RemoveAll(secret)
	must(t, os.Chmod(secret, 0o700))
	must(t, os.WriteFile(filepath.Join(secret, "tool"), []byte("#!/bin/sh\necho ran\n"), 0o755))
	must(t, os.WriteFile(filepath.Join(secret, "plain"), []byte("x"), 0o644))
	must(t, os.Mkdir(filepath.Join(secret, "dir"), 0o755))
	alice := signedClient(h.srv.Endpoint, aliceKey)
	reasons := map[string]string{}
	try := func(what string, entry []string, env map[string]string) {
		id, err := submitCommand(alice, "QS1", entry, nil, env)
		must(t, err)
		out := waitJob(t, h.admin, id)
		if out.Status != types.ServiceJobStatusFailed {
			t.Errorf("%s: the job %s, want FAILED", what, out.Status)
			return
		}
		reasons[what] = strings.ReplaceAll(aws.ToString(out.StatusReason), `"`+entry[0]+`"`, "NAME")
	}
	for _, name := range []string{"tool", "plain", "dir", "missing"} {
		try("path "+name, []string{filepath.Join(secret, name)}, nil)
		try("PATH "+name, []string{name}, map[string]string{"PATH": secret})
	}
	try("path outside any directory", []string{"/qshare-no-such-dir/x"}, nil)
	first := reasons["path missing"]
	for what, r := range reasons {
		if r != first || strings.Contains(r, secret) {
			t.Errorf("the reasons tell what alice may not see:\n%s: %s\npath missing: %s", what, r, first)
		}
	}
	if first == "" {
		t.Fatal("no reason")
	}
}

// TestHostilePrivilegedGroupRefused: a unixUser whose primary group is
// root's (gid 0), or who is in a group that gives root's powers (sudo),
// is refused at start as root is (issue 30, point 7).
func TestHostilePrivilegedGroupRefused(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	alice, bob := ensureUser(t, "qshare-alice-test"), ensureUser(t, "qshare-bob-test")
	// Users with root's powers are not left behind on the host.
	defer exec.Command("userdel", "qshare-gid0-test").Run()
	defer exec.Command("userdel", "qshare-sudo-test").Run()
	gid0 := ensureUser(t, "qshare-gid0-test", "-g", "0")
	users := []*user.User{gid0}
	if _, err := user.LookupGroup("sudo"); err == nil {
		users = append(users, ensureUser(t, "qshare-sudo-test", "-G", "sudo"))
	} else {
		t.Log("no group sudo on this host: the supplementary group is not checked")
	}
	dir := t.TempDir()
	for _, u := range users {
		text := strings.Replace(authWithUsers(alice, bob), "unixUser: "+alice.Username, "unixUser: "+u.Username, 1)
		file := filepath.Join(dir, "auth.yaml")
		must(t, os.WriteFile(file, []byte(text), 0o600))
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a server that starts is killed
		out, err := exec.CommandContext(ctx, bin, "serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--executor", "process", "--gpus", "none", "--auth", file).CombinedOutput()
		cancel()
		if err == nil || !strings.Contains(string(out), "principal alice's unixUser") || !strings.Contains(string(out), "gives root's powers") {
			t.Errorf("serve with alice's unixUser %s (gid %s, groups of its own): %v\n%s", u.Username, u.Gid, err, out)
		}
	}
}

// TestHostileStrayOutlivesAttempt: alice's job leaves a process in a
// session of its own with an empty environment, and succeeds. The process
// must end with the attempt (issue 30, point 4). This runs on the host's
// cgroups (v1 here); TestHostileStrayCgroupV2 on a cgroup2 hierarchy.
func TestHostileStrayOutlivesAttempt(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	strayEndsWithAttempt(t, startHostile(t, true, nil))
}

// TestHostileStrayCgroupV2 is TestHostileStrayOutlivesAttempt on a cgroup
// v2 hierarchy (--cgroup-root, mounted by the test), where the job is
// cloned into its cgroup and killed with cgroup.kill; and a stopped job's
// stray, which ignores SIGTERM, ends with the stop. Each attempt's cgroup
// is removed.
func TestHostileStrayCgroupV2(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	root := cgrouptest.MountV2(t)
	h := startHostile(t, true, func(o *serveproc.Options) { o.Args = append(o.Args, "--cgroup-root", root) })
	strayEndsWithAttempt(t, h)
	alice := signedClient(h.srv.Endpoint, aliceKey)
	id, err := submitScript(alice, "QS1", `setsid env -i sh -c 'trap "" TERM; exec sleep 100002' & echo $! > "$SM_OUTPUT_DATA_DIR/pid"; exec sleep 100003`, nil)
	must(t, err)
	var pid int
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if pid, err = strconv.Atoi(strings.TrimSpace(h.output(id, "pid"))); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice's job wrote no pid in 60 s")
		}
	}
	_, err = h.admin.TerminateServiceJob(context.Background(), &batch.TerminateServiceJobInput{JobId: aws.String(id), Reason: aws.String("test")})
	must(t, err)
	if out := waitJob(t, h.admin, id); out.Status != types.ServiceJobStatusFailed {
		t.Fatalf("the terminated job: %s", out.Status)
	}
	processGone(t, pid, "100002", "her terminated job")
	// Every attempt's cgroup is gone: only the server's parent directory
	// of them may be left.
	left, _ := filepath.Glob(filepath.Join(root, "qshare-*", "*"))
	var cgs []string
	for _, d := range left {
		if st, err := os.Stat(d); err == nil && st.IsDir() {
			cgs = append(cgs, d)
		}
	}
	if len(cgs) > 0 {
		t.Errorf("attempts' cgroups left behind: %v", cgs)
	}
	if log, _ := os.ReadFile(filepath.Join(h.data, "supervisor.log")); strings.Contains(string(log), "without a cgroup") {
		t.Errorf("the supervisor fell back to the process group:\n%s", log)
	}
}

// strayEndsWithAttempt runs, as alice, a job that leaves `setsid env -i
// sleep 100001` behind and succeeds, and checks that the sleep ends.
func strayEndsWithAttempt(t *testing.T, h *hostile) {
	t.Helper()
	id, out := h.run(signedClient(h.srv.Endpoint, aliceKey), "QS1", `setsid env -i sleep 100001 & echo $! > "$SM_OUTPUT_DATA_DIR/pid"; sleep 0.2; exit 0`, nil)
	if out.Status != types.ServiceJobStatusSucceeded {
		t.Fatalf("alice's job: %s (%s)", out.Status, aws.ToString(out.StatusReason))
	}
	pid, err := strconv.Atoi(strings.TrimSpace(h.output(id, "pid")))
	must(t, err)
	processGone(t, pid, "100001", "her SUCCEEDED job")
}

// processGone fails the test if pid, started with marker on its command
// line, is still there after 5 s (and then kills it).
func processGone(t *testing.T, pid int, marker, what string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !strings.Contains(string(st), marker) {
			return // gone (or its pid reused by another program)
		}
		if stat, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(stat), ") Z") {
			return // dead, not yet reaped
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("alice's process %d (%s) outlived %s", pid, marker, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestHostileShareIdentifierCondition: on a fair-share queue, a policy
// that lets alice submit only under the share identifier teamA (IAM's
// batch:ShareIdentifier condition key) refuses her submits under teamB,
// or under none (issue 30, point 7). Before, the Condition was refused
// with the file, and a policy could not say it.
func TestHostileShareIdentifierCondition(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(authFile(`      - Effect: Allow
        Action: batch:SubmitServiceJob
        Resource: arn:aws:batch:*:*:job-queue/fair
        Condition: {StringEquals: {batch:ShareIdentifier: teamA}}
`, "", "")), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "warn", "--auth", file}})
	ctx := context.Background()
	admin := signedClient(srv.Endpoint, adminKey)
	pol, err := admin.CreateSchedulingPolicy(ctx, &batch.CreateSchedulingPolicyInput{Name: aws.String("fairpol"),
		FairsharePolicy: &types.FairsharePolicy{ShareDecaySeconds: aws.Int32(600)}})
	must(t, err)
	_, err = admin.CreateServiceEnvironment(ctx, &batch.CreateServiceEnvironmentInput{ServiceEnvironmentName: aws.String("env"),
		ServiceEnvironmentType: types.ServiceEnvironmentTypeSagemakerTraining,
		CapacityLimits:         []types.CapacityLimit{{CapacityUnit: aws.String("ml.m5.xlarge"), MaxCapacity: aws.Int32(4)}}})
	must(t, err)
	_, err = admin.CreateJobQueue(ctx, &batch.CreateJobQueueInput{JobQueueName: aws.String("fair"), Priority: aws.Int32(1), SchedulingPolicyArn: pol.Arn,
		JobQueueType:            types.JobQueueTypeSagemakerTraining,
		ServiceEnvironmentOrder: []types.ServiceEnvironmentOrder{{Order: aws.Int32(1), ServiceEnvironment: aws.String("env")}}})
	must(t, err)
	alice := signedClient(srv.Endpoint, aliceKey)
	submit := func(ident string) error {
		in := &batch.SubmitServiceJobInput{JobName: aws.String("j"), JobQueue: aws.String("fair"), ServiceJobType: types.ServiceJobTypeSagemakerTraining,
			ServiceRequestPayload: aws.String(`{"ResourceConfig":{"InstanceType":"ml.m5.xlarge","InstanceCount":1,"VolumeSizeInGB":1},"Environment":{"QSHARE_SIM_DURATION":"1s"}}`)}
		if ident != "" {
			in.ShareIdentifier = aws.String(ident)
		}
		_, err := alice.SubmitServiceJob(ctx, in)
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		err := submit("teamA")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alice submits under teamA, which her policy allows: %v", err)
		}
	}
	for _, ident := range []string{"teamB", ""} {
		if err := submit(ident); awsCode(err) != "AccessDeniedException" {
			t.Errorf("alice submits under share identifier %q, which her policy does not allow: %v, want AccessDeniedException", ident, err)
		}
	}
}
