package server

import (
	"strings"
	"testing"
)

// TestParseExecutors: the executors file's names, kinds and settings, two
// of one kind, and a clear error, with the file's line, for each mistake.
func TestParseExecutors(t *testing.T) {
	base := DefaultSettings()
	good := `# two of one kind, and one of another
box-a: {kind: process, gpus: "0,1", runAs: jobs, passEnv: [HTTP_PROXY]}
box-b:
  kind: process
  gpus: "2"
sim: {kind: simulated}
hpc: {kind: slurm, slurmConfig: /etc/qshare/slurm.yaml}
`
	named, err := parseExecutors("x.yaml", []byte(good), base)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, n := range named {
		got = append(got, n.name+"="+n.s.Executor+"/"+n.s.GPUs+"/"+n.s.RunAs+"/"+strings.Join(n.s.PassEnv, ",")+"/"+n.s.SlurmConfig)
		if n.s.DataDir != base.DataDir || n.s.Executors != "" {
			t.Errorf("%s: the server's settings were not kept: %+v", n.name, n.s)
		}
	}
	want := "box-a=process/0,1/jobs/HTTP_PROXY/ box-b=process/2/// hpc=slurm/////etc/qshare/slurm.yaml sim=simulated////"
	if strings.Join(got, " ") != want {
		t.Fatalf("got  %s\nwant %s", strings.Join(got, " "), want)
	}
	if note := executorsNote(named); note != "executors box-a (process), box-b (process), hpc (slurm), sim (simulated)" {
		t.Errorf("note = %q", note)
	}

	for _, c := range []struct{ doc, want string }{
		{"", "it is empty"},
		{"- a\n- b\n", "line 1: it must map each executor's name"},
		{"a: {kind: process}\nb: {kind: podman}\n", `line 2: executor b: kind "podman" is not known`},
		{"a:\n  kind: process\n  slurmConfig: x.yaml\n", `line 3: executor a: "slurmConfig" is not a setting of a process executor: it takes kind and runAs, passEnv, gpus, instanceTypes`},
		{"a: {kind: simulated, gpu: 1}\n", `line 1: executor a: "gpu" is not a setting of a simulated executor: it takes kind and simDuration`},
		{"a: {gpus: '0'}\n", "line 1: executor a has no kind"},
		{"\nhpc: {kind: slurm}\n", "line 2: executor hpc: a slurm executor needs slurmConfig"},
		{"a: {kind: process}\na: {kind: simulated}\n", "line 2: executor a is named twice"},
		{"'bad name': {kind: process}\n", `line 1: "bad name" is not a valid executor name`},
		{"a: process\n", "line 1: executor a: give its settings as a mapping"},
		{"a: {kind: process, passEnv: {x: 1}}\n", "line 1: executor a: yaml: unmarshal errors"},
		{"a: [", "yaml:"},
	} {
		_, err := parseExecutors("x.yaml", []byte(c.doc), base)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "executors file x.yaml") {
			t.Errorf("%q: got %v, want ...%s...", c.doc, err, c.want)
		}
	}
}

// TestServerExecutors: --executor alone is one executor named default, and
// an executor setting given to the server beside --executors is refused.
func TestServerExecutors(t *testing.T) {
	s := DefaultSettings()
	s.Executor = "simulated"
	named, err := serverExecutors(s)
	if err != nil || len(named) != 1 || named[0].name != "default" || named[0].s.Executor != "simulated" {
		t.Fatalf("got %+v, %v", named, err)
	}
	if note := executorsNote(named); note != "executor simulated" {
		t.Errorf("note = %q", note)
	}
	s.Executor = "nope"
	if _, err := serverExecutors(s); err == nil || !strings.Contains(err.Error(), `--executor "nope" is not known`) {
		t.Errorf("unknown kind: %v", err)
	}
	s.Executors, s.GPUs, s.RunAs = "/nonexistent.yaml", "0", "jobs"
	if _, err := serverExecutors(s); err == nil || !strings.Contains(err.Error(), "give gpus, runAs in the file") {
		t.Errorf("flags beside the file: %v", err)
	}
	s.GPUs, s.RunAs = "", ""
	if _, err := serverExecutors(s); err == nil || !strings.Contains(err.Error(), "--executors: open /nonexistent.yaml") {
		t.Errorf("missing file: %v", err)
	}
}
