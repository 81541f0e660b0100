package python

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// CLICommand is one AWS CLI command line: its arguments after "aws", its
// whole environment (NAME=VALUE), and the directory it runs in ("": the
// test binary's).
type CLICommand struct {
	Args, Env []string
	Dir       string
}

// CLIResult is what one AWS CLI command did: its exit status, and what it
// wrote on standard output and standard error.
type CLIResult struct {
	Code           int
	Stdout, Stderr string
}

// clidriver runs AWS CLI commands (JSON on stdin: [{Args, Env}]) one after
// the other, each through a CLI driver of its own in a fresh environment,
// as the aws program's own main does, and prints their results as JSON.
const clidriver = `
import io, json, os, sys, contextlib
import awscli
from awscli.clidriver import create_clidriver
aws, cwd = sys.argv[1], os.getcwd()
data = os.path.join(os.path.dirname(os.path.abspath(awscli.__file__)), "data")
out = []
for c in json.load(sys.stdin):
    env = dict(kv.split("=", 1) for kv in c["Env"])
    # What importing awscli does with the command's environment.
    paths = [os.path.expanduser(os.path.expandvars(p)) for p in env.get("AWS_DATA_PATH", "").split(os.pathsep) if "AWS_DATA_PATH" in env]
    env["AWS_DATA_PATH"] = os.pathsep.join(paths + [data])
    os.environ.clear()
    os.environ.update(env)
    sys.argv = [aws] + c["Args"]
    os.chdir(c["Dir"] or cwd)
    o, e = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(o), contextlib.redirect_stderr(e):
        try:
            code = create_clidriver().main(c["Args"])
        except SystemExit as x:
            code = x.code if isinstance(x.code, int) else 1
    out.append({"Code": code, "Stdout": o.getvalue(), "Stderr": e.getvalue()})
sys.__stdout__.write(json.dumps(out))
`

// AWSCLI runs the AWS CLI commands cmds one after the other with aws, the
// program Program("aws") found. Where that is the AWS CLI of a Python
// program (aws-cli v1, as here), they run in one Python process, each
// through the CLI's own driver as aws would run it: each start of aws
// imports the CLI and botocore again, about a second of CPU, for commands
// that take a few milliseconds. Otherwise each runs as aws.
func AWSCLI(ctx context.Context, aws string, cmds []CLICommand) ([]CLIResult, error) {
	if py := interpreter(aws); py != "" {
		in, err := json.Marshal(cmds)
		if err != nil {
			return nil, err
		}
		cmd := exec.CommandContext(ctx, py, "-c", clidriver, aws)
		cmd.Stdin = bytes.NewReader(in)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("the AWS CLI's driver in %s: %v\n%s", py, err, stderr.String())
		}
		var res []CLIResult
		if err := json.Unmarshal(out, &res); err != nil || len(res) != len(cmds) {
			return nil, fmt.Errorf("the AWS CLI's driver in %s printed %q (%v)\n%s", py, out, err, stderr.String())
		}
		return res, nil
	}
	res := make([]CLIResult, len(cmds))
	for i, c := range cmds {
		cmd := exec.CommandContext(ctx, aws, c.Args...)
		cmd.Env, cmd.Dir = c.Env, c.Dir
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			res[i].Code = ee.ExitCode()
		} else if err != nil {
			return nil, err
		}
		res[i].Stdout, res[i].Stderr = o.String(), e.String()
	}
	return res, nil
}

// interpreter returns the Python that the program aws is a script of, when
// that Python imports the CLI's driver; else "".
func interpreter(aws string) string {
	f, err := os.Open(aws)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, _ := bufio.NewReader(f).ReadString('\n')
	py, ok := strings.CutPrefix(strings.TrimSpace(line), "#!")
	if !ok || strings.ContainsAny(py, " \t") || !strings.Contains(py, "python") {
		return ""
	}
	f2, _ := imports.LoadOrStore(py+"\x00awscli.clidriver", onceImport(py, "awscli.clidriver"))
	if !f2.(func() bool)() {
		return ""
	}
	return py
}

// RunCLI is AWSCLI for a test: the program aws on PATH (Program), two
// minutes for all of cmds, t failed on an error and skipped, with why,
// without aws or when the CLI does not know an operation of cmds (an
// invalid choice: an older CLI than the one the test was written for).
func RunCLI(t testing.TB, cmds []CLICommand) []CLIResult {
	t.Helper()
	aws, err := Program("aws")
	if err != nil {
		t.Skipf("no aws on PATH: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := AWSCLI(ctx, aws, cmds)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Code != 0 && strings.Contains(r.Stderr, "Invalid choice") {
			t.Skipf("this aws does not know aws %s: %s", strings.Join(cmds[i].Args, " "), r.Stderr)
		}
	}
	return res
}
