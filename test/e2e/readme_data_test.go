package e2e_test

import (
	"archive/tar"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/internal/python"
)

// TestReadmeData runs the README's data example (its ```sh blocks that
// name s3://tour) against a real `qshare serve --executor process`: the
// AWS CLI fills the embedded store, qshare submit sends the payload, and
// once the job has SUCCEEDED the CLI's copy of s3://tour/output/ holds a
// model.tar.gz whose model.txt the training program wrote from the staged
// channel. It needs the AWS CLI on PATH, and skips without it.
func TestReadmeData(t *testing.T) {
	t.Parallel()
	if _, err := python.Program("aws"); err != nil {
		t.Skip("no aws on PATH: the README's data example uses the AWS CLI")
	}
	var lines []string
	for _, b := range fencedBlocks(t, filepath.Join(root, "README.md")) {
		if b.lang == "sh" && strings.Contains(b.text, "s3://tour") {
			lines = append(lines, strings.Split(strings.TrimSpace(b.text), "\n")...)
		}
	}
	if len(lines) < 6 {
		t.Fatalf("README.md: want the data example's lines (s3://tour), found %q", lines)
	}
	e := newEnv(t, "--executor", "process", "--gpus", "none")
	work := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(filepath.Join(root, "examples"), filepath.Join(work, "examples")))
	env := append(os.Environ(), "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	submitted, copied := "", false
	// Each run of consecutive aws lines runs in one Python, each line
	// through the CLI's own driver (internal/python.AWSCLI): a start of
	// aws each cost about a second of CPU.
	var awsLines []string
	runAWS := func() {
		t.Helper()
		if len(awsLines) == 0 {
			return
		}
		var cmds []python.CLICommand
		for _, l := range awsLines {
			cmds = append(cmds, python.CLICommand{Args: strings.Fields(l)[1:], Env: env, Dir: work})
		}
		res := python.RunCLI(t, cmds)
		for i, line := range awsLines {
			if r := res[i]; r.Code != 0 {
				t.Fatalf("%s: exit status %d\n%s%s", line, r.Code, r.Stdout, r.Stderr)
			}
			if strings.Contains(line, "s3 ls") && !strings.Contains(res[i].Stdout, "/output/model.tar.gz") {
				t.Errorf("%s lists no model.tar.gz:\n%s", line, res[i].Stdout)
			}
			copied = copied || strings.Contains(line, "fit-output")
		}
		awsLines = nil
	}
	for _, line := range lines {
		line = strings.ReplaceAll(line, "http://127.0.0.1:8750", e.Srv.Endpoint)
		args := strings.Fields(line)
		if args[0] == "aws" {
			awsLines = append(awsLines, line)
			continue
		}
		runAWS()
		switch {
		case args[0] == "export":
			env = append(env, args[1:]...) // KEY=VALUE, none quoted
		case args[0] == "./qshare":
			out, errOut, code := e.Srv.Command(bin, work, args[1:]...)
			if code != nil {
				t.Fatalf("%s: %v\n%s%s", line, code, out, errOut)
			}
			if args[1] == "submit" {
				submitted = strings.TrimSpace(out[strings.LastIndex(out, " ")+1:])
				e.awaitSucceeded(submitted)
			}
		default:
			t.Fatalf("README.md: a line of the data example that this test does not run: %s", line)
		}
	}
	runAWS()
	if submitted == "" || !copied {
		t.Fatalf("README.md: the data example submits no job or copies no output")
	}
	models, _ := filepath.Glob(filepath.Join(work, "fit-output", "*", "output", "model.tar.gz"))
	if len(models) != 1 {
		t.Fatalf("fit-output holds %d model.tar.gz, want 1", len(models))
	}
	f, err := os.Open(models[0])
	must(err)
	defer f.Close()
	zr, err := gzip.NewReader(f)
	must(err)
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		must(err)
		if h.Name == "model.txt" {
			b, _ := io.ReadAll(tr)
			if got := strings.TrimSpace(string(b)); got != "rows=4" {
				t.Fatalf("model.txt holds %q, want rows=4 (the staged train.csv's lines)", got)
			}
			return
		}
	}
}

// awaitSucceeded waits until job id has SUCCEEDED, and fails the test if
// it ends otherwise.
func (e *env) awaitSucceeded(id string) {
	e.t.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		j := e.describe(id)
		switch j.Status {
		case "SUCCEEDED":
			return
		case "FAILED":
			e.t.Fatalf("job %s FAILED: %s", id, j.StatusReason)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("job %s is still %s after 3 minutes", id, j.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
