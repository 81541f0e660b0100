package python

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"qshare/internal/serveproc"
)

// TestProgramPastShim: a program PATH finds in a pyenv shims directory
// resolves to what `pyenv which` names; one elsewhere to itself.
func TestProgramPastShim(t *testing.T) {
	dir := t.TempDir()
	shims, bin, real := filepath.Join(dir, "shims"), filepath.Join(dir, "bin"), filepath.Join(dir, "versions", "qshare-tool")
	for _, d := range []string{shims, bin, filepath.Dir(real)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write := func(p, text string) {
		if err := serveproc.WriteExecutable(p, []byte(text)); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(shims, "qshare-shimmed-tool"), "#!/bin/sh\nexit 1\n")
	write(filepath.Join(bin, "qshare-plain-tool"), "#!/bin/sh\nexit 0\n")
	write(real, "#!/bin/sh\nexit 0\n")
	write(filepath.Join(bin, "pyenv"), "#!/bin/sh\n[ \"$1 $2\" = 'which qshare-shimmed-tool' ] && echo '"+real+"'\n")
	t.Setenv("PATH", shims+string(os.PathListSeparator)+bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	if p, err := Program("qshare-shimmed-tool"); err != nil || p != real {
		t.Errorf("Program of a shim = %q, %v; want %q", p, err, real)
	}
	if p, err := Program("qshare-plain-tool"); err != nil || p != filepath.Join(bin, "qshare-plain-tool") {
		t.Errorf("Program of a plain program = %q, %v", p, err)
	}
	if _, err := Program("qshare-no-such-tool"); err == nil {
		t.Error("Program of a missing program gave no error")
	}
}

func TestWith(t *testing.T) {
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("no python3")
	}
	if _, ok := With("json"); !ok {
		t.Error("python3 cannot import json")
	}
	if _, ok := With("qshare_no_such_module"); ok {
		t.Error("python3 imports a module that does not exist")
	}
}

// TestAWSCLI runs two commands through the AWS CLI, where one is installed
// (in one Python process where it is a Python program), and through a
// stand-in shell script: each gets its own environment, and its own exit
// status and output, as aws run on its own gives them.
func TestAWSCLI(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "aws")
	if err := serveproc.WriteExecutable(fake, []byte("#!/bin/sh\n[ \"$1\" = configure ] && sed -n 's/^region = //p' \"$AWS_CONFIG_FILE\" && exit 0\necho \"Invalid choice: $2\" >&2\nexit 252\n")); err != nil {
		t.Fatal(err)
	}
	cmds := make([]CLICommand, 2)
	for i, region := range []string{"eu-west-3", "us-east-1"} {
		conf := filepath.Join(dir, region)
		if err := os.WriteFile(conf, []byte("[default]\nregion = "+region+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		cmds[i].Env = append(os.Environ(), "AWS_CONFIG_FILE="+conf)
	}
	cmds[0].Args = []string{"configure", "get", "region"}
	cmds[1].Args = []string{"batch", "qshare-no-such-operation"}
	check := func(name string, res []CLIResult, want []CLIResult) {
		t.Helper()
		if r := res[0]; r.Code != 0 || r.Stdout != "eu-west-3\n" {
			t.Errorf("%s configure get region: %+v, want eu-west-3 from the command's own config file", name, r)
		}
		if r := res[1]; r.Code == 0 || !strings.Contains(r.Stderr, "Invalid choice") {
			t.Errorf("%s batch qshare-no-such-operation: %+v, want a failure that says invalid choice", name, r)
		}
		for i := range want {
			if res[i] != want[i] {
				t.Errorf("%s %s: %+v, but aws on its own: %+v", name, cmds[i].Args, res[i], want[i])
			}
		}
	}
	res, err := AWSCLI(t.Context(), fake, cmds)
	if err != nil {
		t.Fatal(err)
	}
	check("stand-in", res, nil)
	aws, err := Program("aws")
	if err != nil {
		t.Skip("no aws on PATH")
	}
	if interpreter(aws) == "" {
		t.Logf("%s is no Python script that imports awscli: its commands run one by one", aws)
	}
	var alone []CLIResult
	for _, c := range cmds {
		cmd := exec.Command(aws, c.Args...)
		cmd.Env = c.Env
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		cmd.Run()
		alone = append(alone, CLIResult{Code: cmd.ProcessState.ExitCode(), Stdout: o.String(), Stderr: e.String()})
	}
	res, err = AWSCLI(t.Context(), aws, cmds)
	if err != nil {
		t.Fatal(err)
	}
	check("aws", res, alone)
}
