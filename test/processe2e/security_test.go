package processe2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/batch/types"

	"qshare/internal/jobuser"
)

// The server's environment holds a cloud secret and a token; a job sees
// neither (issue 14, finding 4), unless --pass-env names it. A server that
// runs as root with no --run-as says at start that jobs run as root.
func TestAttackServerEnvironment(t *testing.T) {
	skipShort(t)
	secrets := []string{"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "CI_TOKEN=tok-123"}
	for _, pass := range []bool{false, true} {
		o := serverOpts{env: secrets}
		if pass {
			o.args = []string{"--pass-env", "CI_TOKEN"}
		}
		s := startServer(t, newDataDir(t), o)
		oneShare(s, 1, false)
		id := s.submit(job{name: "env", share: "s", script: `env | sort`})
		s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
		out := s.mustLogs(id, 1)
		if strings.Contains(out, "AWS_SECRET_ACCESS_KEY") || strings.Contains(out, "EXAMPLEKEY") {
			t.Errorf("pass %v: the job saw the server's AWS secret:\n%s", pass, out)
		}
		if got := strings.Contains(out, "CI_TOKEN=tok-123\n"); got != pass {
			t.Errorf("pass %v: the job sees CI_TOKEN: %v; log:\n%s", pass, got, out)
		}
		if !strings.Contains(out, "PATH=") || strings.Contains(out, "QSHARE_SUPERVISE") {
			t.Errorf("pass %v: log:\n%s", pass, out)
		}
		warned := strings.Contains(s.proc.Log(), "every job runs as root")
		if root := os.Geteuid() == 0; warned != root {
			t.Errorf("server as uid %d without --run-as: warned %v; its log:\n%s", os.Geteuid(), warned, s.proc.Log())
		}
		s.stop()
	}
}

// --run-as: a job submitted to a server that runs as root runs as the
// unprivileged user, cannot read a root-only file, and the server warns no
// more (issue 14, finding 2: a job ran `id; head /etc/shadow` as root).
func TestRunAs(t *testing.T) {
	skipShort(t)
	u := jobuser.Lookup(t)
	name := jobuser.Name
	// The job's user must be able to enter the data directory.
	base, secret := jobuser.Dir(t, "qshare-runas-e2e")
	data := filepath.Join(base, "data")
	t.Cleanup(func() { killLeftovers(t, data) })
	s := startServer(t, data, serverOpts{args: []string{"--run-as", name}})
	oneShare(s, 1, false)
	id := s.submit(job{name: "whoami", share: "s", script: `id -u; cat "` + secret + `" || echo "cannot read it"; echo ok > "$SM_MODEL_DIR/model"`})
	s.AwaitStatus(id, types.ServiceJobStatusSucceeded)
	out := s.mustLogs(id, 1)
	if !strings.HasPrefix(out, u.Uid+"\n") || strings.Contains(out, "SECRET") || !strings.Contains(out, "cannot read it") {
		t.Errorf("log:\n%s\nwant uid %s, and the root-only file unread", out, u.Uid)
	}
	if strings.Contains(s.proc.Log(), "every job runs as root") {
		t.Errorf("warned about root jobs with --run-as")
	}
}

// A job whose first attempt replaces input/config with a link to a
// directory outside the data directory, and fails: its retry wrote the
// toolkit's files there (issue 14, finding 3). Now the retry fails to start,
// with a reason that names input/config and no server path, and nothing is
// written outside.
func TestAttackConfigLinkRetry(t *testing.T) {
	skipShort(t)
	outside := t.TempDir()
	data := newDataDir(t)
	s := startServer(t, data, serverOpts{})
	oneShare(s, 1, false)
	retry := &types.ServiceJobRetryStrategy{Attempts: aws.Int32(2)}
	id := s.submit(job{name: "plant", share: "s", retry: retry,
		script: `rm -rf "$SM_INPUT_CONFIG_DIR" && ln -s "` + outside + `" "$SM_INPUT_CONFIG_DIR"; exit 3`})
	d := s.AwaitStatus(id, types.ServiceJobStatusFailed)
	reasons := attemptReasons(d)
	if len(reasons) != 2 || !strings.Contains(reasons[1], "CannotStartAttempt: input/config in the job's directory is a link") ||
		strings.Contains(reasons[1], data) || strings.Contains(reasons[1], os.TempDir()) {
		t.Errorf("attempts %q; want the retry refused for the link, naming no server path", reasons)
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 0 {
		t.Errorf("the retry wrote %d files outside the data directory", len(ents))
	}
}
