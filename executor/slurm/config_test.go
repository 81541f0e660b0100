package slurm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"qshare"
	"qshare/executor"
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

// TestRunAsRefused: a job whose principal has a Unix user other than the
// server's is refused at Start, with a reason, not run as the server's
// user; the server's own user is fine.
func TestRunAsRefused(t *testing.T) {
	e := &Executor{}
	for _, u := range []string{"root", "no-such-user-qshare", "nobody"} {
		if u == "root" && os.Geteuid() == 0 {
			continue
		}
		err := e.checkRunAs(executor.Spec{RunAs: u})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "unixUser") {
			t.Errorf("RunAs %q: %v, want an EINVALID refusal naming unixUser", u, err)
		}
	}
	if err := e.checkRunAs(executor.Spec{RunAs: strconv.Itoa(os.Geteuid())}); err != nil {
		t.Errorf("RunAs of the server's own uid: %v", err)
	}
	if err := e.checkRunAs(executor.Spec{}); err != nil {
		t.Errorf("no RunAs: %v", err)
	}
}
