package slurm

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"qshare"
	"qshare/executor"
	"qshare/executor/process"
	"qshare/internal/jobuser"
)

func TestParseConfig(t *testing.T) {
	good := `sharedDir: /shared/qshare
account: ml-lab
instanceTypes:
  ml.p4d.24xlarge: {partition: gpu, gres: "gpu:a100:8", cpus: 96, memory: 1100G}
  ml.m5.large: {partition: cpu, cpus: 2, memory: 8G, shareNodes: true}
`
	c, err := ParseConfig([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if c.InstanceTypes["ml.p4d.24xlarge"].GPUs() != 8 || c.InstanceTypes["ml.m5.large"].GPUs() != 0 || c.Account != "ml-lab" {
		t.Errorf("parsed %+v", c)
	}
	for _, tc := range []struct{ text, want string }{
		{"", "sharedDir is missing"},
		{"sharedDir: /s\n", "instanceTypes is empty"},
		{"sharedDir: /s\nbogus: 1\n", "field bogus not found"},
		{"sharedDir: /s\ninstanceTypes:\n  t: {gres: gpu:1}\n", "instanceTypes.t.partition"},
		{"sharedDir: /s\ninstanceTypes:\n  t: {partition: 'a b'}\n", "instanceTypes.t.partition"},
		{"sharedDir: /s\ninstanceTypes:\n  t: {partition: p, gres: 'gpu:x; rm'}\n", "instanceTypes.t.gres"},
		{"sharedDir: /s\ninstanceTypes:\n  t: {partition: p, memory: lots}\n", "instanceTypes.t.memory"},
		{"sharedDir: /s\ninstanceTypes:\n  t: {partition: p, cpus: -1}\n", "instanceTypes.t.cpus"},
		{"sharedDir: /s\ninstanceTypes:\n  t: {partition: p, shareNodes: true}\n", "shareNodes but no cpus or memory"},
		{"sharedDir: /s\naccount: 'a;b'\ninstanceTypes:\n  t: {partition: p}\n", "account"},
		{"sharedDir: [1]\n", "not valid YAML"},
	} {
		_, err := ParseConfig([]byte(tc.text))
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseConfig(%q) = %v, want EINVALID containing %q", tc.text, err, tc.want)
		}
	}
}

func TestLoadConfigResolvesSharedDir(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "slurm.yaml")
	os.WriteFile(p, []byte("sharedDir: jobs\ninstanceTypes:\n  t: {partition: p}\n"), 0o644)
	c, err := LoadConfig(p)
	if err != nil || c.SharedDir != filepath.Join(dir, "jobs") {
		t.Errorf("LoadConfig = %+v, %v; want sharedDir beside the file", c, err)
	}
	if _, err := LoadConfig(filepath.Join(dir, "missing.yaml")); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("LoadConfig(missing) = %v", err)
	}
}

func TestValidateNamesTheProblem(t *testing.T) {
	e := &Executor{o: Options{Config: testConfig("/s")}}
	for _, tc := range []struct{ payload, want string }{
		{`{"TrainingJobName":"t","ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":1}}`, "ContainerEntrypoint"},
		{payloadOf("true", "ml.c5.huge", 1, nil), `instance type "ml.c5.huge" is not in the Slurm executor's configuration`},
		{payloadOf("true", "ml.m5.large", 1, map[string]string{"QSHARE_STOP_GRACE": "soon"}), "QSHARE_STOP_GRACE"},
		{payloadOf("true", "ml.m5.large", 1, map[string]string{"A=B": "x"}), "Environment key"},
	} {
		err := e.Validate(tc.payload, qshare.Capacity{})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Validate(%s) = %v, want EINVALID containing %q", tc.payload, err, tc.want)
		}
	}
}

func TestParseSqueue(t *testing.T) {
	out := "12" + sep + "RUNNING" + sep + "None" + sep + "0" + sep + "qshare abc a-1" + "\n" +
		"13" + sep + "FAILED" + sep + "NonZeroExitCode" + sep + "768" + sep + "a|b" + sep + "c\n"
	m, err := parseSqueue(out)
	if err != nil {
		t.Fatal(err)
	}
	if m[12].State != "RUNNING" || m[12].Comment != "qshare abc a-1" || m[13].WaitStat != 768 || m[13].Comment != "a|b"+sep+"c" {
		t.Errorf("parsed %+v", m)
	}
	if _, err := parseSqueue("slurm_load_jobs error: something\n"); err == nil {
		t.Error("a message was read as a job")
	}
}

// TestParseSacct: sacct's rows in sacctFormat, the job name (which may
// hold the delimiter) last, the exit code "code:signal" as a wait status;
// what is not such a row is an error, not a job.
func TestParseSacct(t *testing.T) {
	out := "12" + sep + "CANCELLED by 0" + sep + "0:15" + sep + "None" + sep + "qshare-a-1\n" +
		"13" + sep + "NODE_FAIL" + sep + "3:0" + sep + "NodeDown" + sep + "a|b" + sep + "c\n"
	rows, err := parseSacct(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []jobState{{ID: 12, State: "CANCELLED by 0", WaitStat: 15, Name: "qshare-a-1"},
		{ID: 13, State: "NODE_FAIL", Reason: "NodeDown", WaitStat: 3 << 8, Name: "a|b" + sep + "c"}}
	if len(rows) != 2 || rows[0] != want[0] || rows[1] != want[1] {
		t.Errorf("parsed %+v, want %+v", rows, want)
	}
	for _, bad := range []string{"Slurm accounting storage is disabled\n", "x" + sep + "FAILED" + sep + "1:0" + sep + "None" + sep + "n\n",
		"1" + sep + "FAILED" + sep + "1" + sep + "None" + sep + "n\n", "1" + sep + "FAILED" + sep + "1:300" + sep + "None" + sep + "n\n"} {
		if _, err := parseSacct(bad); err == nil {
			t.Errorf("parseSacct(%q) read it as a job", bad)
		}
	}
	conf := "AccountingStorageHost   = localhost\nAccountingStorageType   = accounting_storage/slurmdbd\n"
	if got := configValue(conf, "AccountingStorageType"); got != "accounting_storage/slurmdbd" {
		t.Errorf("configValue = %q", got)
	}
}

// TestRunAsRefused: a job whose principal's Unix user is root, does not
// exist, or (for a server that is not root) is another user is refused at
// Start with a reason naming the setting; none, or the server's own user
// when that is not root, is fine.
func TestRunAsRefused(t *testing.T) {
	e := &Executor{}
	bad := []string{"root", "no-such-user-qshare"}
	if os.Geteuid() != 0 {
		bad = append(bad, "nobody")
	}
	for _, u := range bad {
		_, err := e.userFor(executor.Spec{RunAs: u})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "unixUser") {
			t.Errorf("RunAs %q: %v, want an EINVALID refusal naming unixUser", u, err)
		}
	}
	own := []executor.Spec{{}}
	if os.Geteuid() != 0 { // root is refused even as the server's own user
		own = append(own, executor.Spec{RunAs: strconv.Itoa(os.Geteuid())})
	}
	for _, s := range own {
		if u, err := e.userFor(s); err != nil || u != nil {
			t.Errorf("RunAs %q: %v, %v; want the server's own user", s.RunAs, u, err)
		}
	}
}

// TestRunAs: a job whose Spec names a user runs as that user on the
// node (sbatch --uid), can write its own directories and not read a
// root-only file; a job.json the job replaced is not believed (after a
// restart the executor finds the batch job by name and comment instead),
// and the exit is still recorded.
func TestRunAs(t *testing.T) {
	t.Parallel() // its jobs share nodes (see TestMain)
	c := testCluster(t)
	u := jobuser.Lookup(t)
	// The job's user must reach the shared directory and run the step
	// runner, a copy of this binary.
	top, secret := jobuser.Dir(t, "qshare-slurm-runas-")
	step := filepath.Join(top, "step")
	jobuser.CopySelf(t, step)
	shared := filepath.Join(top, "shared")
	opts := Options{Config: testConfig(shared), Env: c.Env(), Step: []string{step}}
	e, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	s := testSpec("runas", "ml.m5.large", 1, `echo "uid=$(id -u)"; touch "$SM_CHECKPOINT_DIR/ck" "$SM_MODEL_DIR/m" || exit 10
if cat `+secret+` 2>/dev/null; then exit 11; fi
d=$(dirname "$SM_INPUT_CONFIG_DIR"); d=$(dirname "$d")
echo '{"slurmJob": 999999}' > "$d/job.json.new" && mv -f "$d/job.json.new" "$d/job.json" && echo "replaced job.json"
echo ready; sleep 1; exit 3`)
	s.RunAs = u.Username
	h, err := e.Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	if !eventually(time.Minute, func() bool { b, _ := os.ReadFile(h.LogPath); return strings.Contains(string(b), "ready\n") }) {
		b, _ := os.ReadFile(filepath.Join(filepath.Dir(h.LogPath), "slurm.log"))
		t.Fatalf("the job did not print ready within a minute; its slurm.log: %q", b)
	}
	e.Close()
	// A new executor (a restart) does not take the job's job.json.
	e2, err := New(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer e2.Close()
	if r, err := e2.Recover(ctx, executor.Handle{AttemptID: s.AttemptID}); err != nil || r == executor.Lost {
		t.Fatalf("Recover = %v, %v", r, err)
	}
	x, err := e2.Wait(ctx, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(h.LogPath)
	t.Logf("exit %+v; log %q", x, b)
	if x.ExitCode != 3 {
		t.Errorf("exit = %+v, want code 3 (10: it could not write its directories; 11: it read a root-only file)", x)
	}
	if !strings.Contains(string(b), "uid="+u.Uid+"\n") || !strings.Contains(string(b), "replaced job.json") {
		t.Errorf("log %q, want the job's uid %s and its replaced job.json", b, u.Uid)
	}
	if rec, err := e2.readRecord(s.AttemptID); err != nil || rec.SlurmJob == 999999 {
		t.Errorf("job.json after the restart: %+v, %v; want the server's own record of the real job", rec, err)
	}
}

// TestExitReasons: how an attempt's end reads from the step runners'
// records and Slurm's word on the batch job (squeue's, or sacct's for a
// job squeue forgot): Slurm's own ends (TIMEOUT, a cancel outside qshare)
// are named before what the record says, a node failure is Lost whatever
// the record, and with neither record nor word the attempt is Lost.
func TestExitReasons(t *testing.T) {
	dir := t.TempDir()
	e := &Executor{root: dir, fs: process.NewBeneath(dir)}
	defer e.fs.Close()
	rec := exitRecord{Host: "n1", ExitCode: -1, Signal: "SIGTERM"}
	b, _ := json.Marshal(rec)
	if err := os.MkdirAll(e.attemptDir("rec"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.attemptDir("rec"), "exit-n1.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	const term = "Essential process terminated by signal SIGTERM"
	for _, tc := range []struct {
		attempt string // "rec" has a record of SIGTERM, "none" none
		j       jobState
		known   bool
		lost    bool
		reason  string
	}{
		{"rec", jobState{State: "TIMEOUT"}, true, false, "Slurm ended the batch job 9: TIMEOUT: " + term},
		{"rec", jobState{State: "CANCELLED by 0"}, true, false, "The batch job 9 was cancelled in Slurm, not by qshare (scancel): " + term},
		{"rec", jobState{State: "NODE_FAIL", Reason: "NodeDown"}, true, true, "Slurm ended the batch job 9: NODE_FAIL (NodeDown): a node of the job failed, so the attempt is requeued without using a retry"},
		{"rec", jobState{State: "FAILED"}, true, false, term},
		{"rec", jobState{}, false, false, term},
		{"none", jobState{State: "TIMEOUT"}, true, false, "Slurm ended the batch job 9: TIMEOUT"},
		{"none", jobState{State: "CANCELLED by 0"}, true, false, "The batch job 9 was cancelled in Slurm, not by qshare (scancel)"},
		{"none", jobState{}, false, true, "Lost: batch job 9 ended (no longer known to Slurm) without the step runner recording how the command ended (see slurm.log of the attempt in the shared directory)"},
	} {
		a := &attempt{id: tc.attempt, rec: jobRecord{SlurmJob: 9}}
		x := e.exitOf(a, tc.j, tc.known)
		if x.Lost != tc.lost || x.Reason != tc.reason || x.Succeeded() {
			t.Errorf("%s, %+v, known %v: exit %+v; want lost %v, reason %q", tc.attempt, tc.j, tc.known, x, tc.lost, tc.reason)
		}
	}
}
