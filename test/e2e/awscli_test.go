package e2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/internal/python"
)

// TestAWSCLIExample runs the README's AWS CLI lines (its ```sh block of
// `aws batch` commands) against a real server, with the server's endpoint
// and a real job ID put in, and checks what they answer. It needs an `aws`
// on PATH that knows the quota-share operations (AWS CLI 1.45.11 with
// botocore 1.43.11 does); without one it is skipped (python.RunCLI), since
// CI installs no Python packages.
func TestAWSCLIExample(t *testing.T) {
	t.Parallel()
	var lines []string
	for _, b := range fencedBlocks(t, filepath.Join(root, "README.md")) {
		if b.lang != "sh" {
			continue
		}
		for _, l := range strings.Split(strings.TrimSpace(b.text), "\n") {
			if strings.HasPrefix(l, "aws batch ") {
				lines = append(lines, l)
			}
		}
	}
	if len(lines) < 2 {
		t.Fatalf("README.md: want the list-quota-shares and update-service-job lines of the AWS CLI example, found %q", lines)
	}

	e := exampleEnv(t)
	id := strings.TrimSpace(e.Submit("QS1", "cli", 1))
	id = id[strings.LastIndex(id, " ")+1:]
	// The lines run one after the other in one Python, each through the
	// CLI's own driver (internal/python.AWSCLI): a start of aws each cost
	// about a second of CPU. The server checks no signatures, but the CLI
	// signs and so wants credentials; no profile or config file of the
	// machine's.
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID=qshare", "AWS_SECRET_ACCESS_KEY=qshare",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
	var cmds []python.CLICommand
	for i, line := range lines {
		line = strings.ReplaceAll(line, "http://127.0.0.1:8750", e.Srv.Endpoint)
		lines[i] = strings.ReplaceAll(line, "JOB_ID", id)
		cmds = append(cmds, python.CLICommand{Args: strings.Fields(lines[i])[1:], Env: env})
	}
	res := python.RunCLI(t, cmds)
	for i, line := range lines {
		if r := res[i]; r.Code != 0 {
			t.Fatalf("%s: exit status %d\n%s%s", line, r.Code, r.Stdout, r.Stderr)
		}
		out := []byte(res[i].Stdout)
		switch {
		case strings.Contains(line, "list-quota-shares"):
			var v struct {
				QuotaShares []struct {
					QuotaShareName string `json:"quotaShareName"`
				} `json:"quotaShares"`
			}
			if err := json.Unmarshal(out, &v); err != nil {
				t.Fatalf("%s: %v\n%s", line, err, out)
			}
			var names []string
			for _, s := range v.QuotaShares {
				names = append(names, s.QuotaShareName)
			}
			if strings.Join(names, ",") != "QS1,QS2,QS3" {
				t.Errorf("%s: quota shares %v, want QS1, QS2, QS3", line, names)
			}
		case strings.Contains(line, "update-service-job"):
			var v struct {
				JobID string `json:"jobId"`
			}
			if err := json.Unmarshal(out, &v); err != nil || v.JobID != id {
				t.Fatalf("%s: answered %s (%v), want the job's ID %s", line, out, err, id)
			}
			if j := e.describe(id); j.SchedulingPriority != 9 {
				t.Errorf("after %s the job's priority is %d, want 9", line, j.SchedulingPriority)
			}
		default:
			t.Errorf("README.md: an AWS CLI line this test does not check: %s", line)
		}
	}
}
