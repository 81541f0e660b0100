package e2e_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAWSCLIExample runs the README's AWS CLI lines (its ```sh block of
// `aws batch` commands) against a real server, with the server's endpoint
// and a real job ID put in, and checks what they answer. It needs an `aws`
// on PATH that knows the quota-share operations (AWS CLI 1.45.11 with
// botocore 1.43.11 does); without one it is skipped, since CI installs no
// Python packages.
func TestAWSCLIExample(t *testing.T) {
	t.Parallel()
	aws, err := exec.LookPath("aws")
	if err != nil {
		t.Skip("no aws on PATH")
	}
	if out, err := exec.Command(aws, "batch", "list-quota-shares", "help").CombinedOutput(); err != nil {
		t.Skipf("this aws does not know list-quota-shares: %v\n%s", err, out)
	}
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
	run := func(line string) []byte {
		t.Helper()
		line = strings.ReplaceAll(line, "http://127.0.0.1:8750", e.Srv.Endpoint)
		line = strings.ReplaceAll(line, "JOB_ID", id)
		args := strings.Fields(line)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, aws, args[1:]...)
		// The server checks no signatures, but the CLI signs and so wants
		// credentials; no profile or config file of the machine's.
		cmd.Env = append(os.Environ(), "AWS_ACCESS_KEY_ID=qshare", "AWS_SECRET_ACCESS_KEY=qshare",
			"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_PAGER=")
		out, err := cmd.Output()
		if err != nil {
			stderr := ""
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("%s: %v\n%s%s", line, err, out, stderr)
		}
		return out
	}
	for _, line := range lines {
		out := run(line)
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
