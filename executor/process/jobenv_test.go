package process

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"qshare"
	"qshare/executor/executortest"
)

// The server's environment holds secrets; a job sees only PATH, HOME, LANG
// and TZ of it, plus what --pass-env names (issue 14, finding 4). Nor does a
// job ever get qshare's own variables from the server, QSHARE_SUPERVISE
// least of all: with it, a job that runs qshare would turn into a
// supervisor.
func TestAttackServerEnvironmentStaysWithTheServer(t *testing.T) {
	server := []string{
		"PATH=" + os.Getenv("PATH"), "HOME=/home/server", "LANG=C.UTF-8", "TZ=UTC",
		"AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
		"GITHUB_TOKEN=ghp_secret", "HTTPS_PROXY=http://user:pw@proxy:3128",
		SupervisorEnv + "=/somewhere", "QSHARE_ADDR=127.0.0.1:8750",
	}
	for _, pass := range [][]string{nil, {"GITHUB_TOKEN"}} {
		e := newExecutor(t, t.TempDir(), func(o *Options) { o.Env = server; o.PassEnv = pass })
		h, x := run(t, e, spec("env", 1, payloadOf(`env -0`, func(p map[string]any) {
			p["Environment"] = map[string]string{"MINE": "1"}
		})))
		e.Close()
		if !x.Succeeded() {
			t.Fatalf("exit %+v", x)
		}
		env := executortest.ReadEnv(t, h.LogPath)
		for k, v := range map[string]string{"PATH": os.Getenv("PATH"), "HOME": "/home/server", "LANG": "C.UTF-8", "TZ": "UTC", "MINE": "1", "QSHARE_JOB_ID": "env"} {
			if env[k] != v {
				t.Errorf("pass %v: %s = %q, want %q", pass, k, env[k], v)
			}
		}
		for _, k := range []string{"AWS_SECRET_ACCESS_KEY", "HTTPS_PROXY", SupervisorEnv, "QSHARE_ADDR"} {
			if v, ok := env[k]; ok {
				t.Errorf("pass %v: the job sees the server's %s=%q", pass, k, v)
			}
		}
		if got, want := env["GITHUB_TOKEN"], map[bool]string{true: "ghp_secret"}[pass != nil]; got != want {
			t.Errorf("pass %v: GITHUB_TOKEN = %q, want %q", pass, got, want)
		}
	}
	if _, err := New(context.Background(), Options{DataDir: t.TempDir(), GPUs: []string{"none"}, PassEnv: []string{SupervisorEnv}}); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("New with PassEnv %s = %v; want EINVALID", SupervisorEnv, err)
	}
}

// A payload that sets QSHARE_SUPERVISE is refused by the executor too (the
// API refuses it at submit), and a supervisor never hands it down.
func TestAttackPayloadCannotMakeASupervisor(t *testing.T) {
	e := newExecutor(t, t.TempDir(), nil)
	defer e.Close()
	p := payloadOf(`env -0`, func(p map[string]any) {
		p["Environment"] = map[string]string{SupervisorEnv: "/tmp"}
	})
	if err := e.Validate(p, nil); qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), SupervisorEnv) {
		t.Errorf("Validate = %v; want a ClientException naming %s", err, SupervisorEnv)
	}
	if _, err := e.Start(context.Background(), spec("sup", 1, p)); err == nil {
		t.Errorf("Start of a payload that sets %s succeeded", SupervisorEnv)
	}
	// The supervisor runs with QSHARE_SUPERVISE set; its jobs do not see it.
	h, x := run(t, e, spec("plain", 1, payloadOf(`env -0`, nil)))
	if !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	if v, ok := executortest.ReadEnv(t, h.LogPath)[SupervisorEnv]; ok {
		t.Errorf("the job sees %s=%q", SupervisorEnv, v)
	}
}

// jobTestUser creates (once) the unprivileged user that --run-as tests run
// jobs as; it skips the test when that is impossible.
func jobTestUser(t *testing.T) *jobUser {
	t.Helper()
	return namedTestUser(t, "qshare-job-test")
}

// With RunAs, the job runs as that user: `id -u` says so, it can write its
// model, output and checkpoint directories, it cannot read a file only root
// may read, and it cannot touch the attempt's records or its log.
func TestRunAsUser(t *testing.T) {
	u := jobTestUser(t)
	// Not t.TempDir: its directories are private to root, and the job's user
	// must reach its directory.
	data, err := os.MkdirTemp("", "qshare-runas")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(data)
	os.Chmod(data, 0o755)
	secret := filepath.Join(data, "root-only")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, data, func(o *Options) { o.RunAs = u.Name })
	defer e.Close()
	sc := `id -u > "$SM_OUTPUT_DATA_DIR/uid"; id -G > "$SM_OUTPUT_DATA_DIR/groups"
echo m > "$SM_MODEL_DIR/model.bin" && echo c > "$SM_CHECKPOINT_DIR/ck" && echo o > "$SM_OUTPUT_DIR/o" || exit 10
if cat "` + secret + `"; then exit 11; fi
if echo x > "` + filepath.Join(data, "attempts") + `/$QSHARE_ATTEMPT_ID/output.log"; then exit 12; fi
echo "HOME=$HOME"
exit 0`
	h, x := run(t, e, spec("runas", 1, payloadOf(sc, nil)))
	if !x.Succeeded() {
		b, _ := os.ReadFile(h.LogPath)
		t.Fatalf("exit %+v; log:\n%s", x, b)
	}
	b, err := os.ReadFile(filepath.Join(data, "jobs", "runas", "output", "data", "uid"))
	if err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(int(u.UID)) {
		t.Errorf("the job ran as uid %q (%v), want %d", b, err, u.UID)
	}
	logb, _ := os.ReadFile(h.LogPath)
	if strings.Contains(string(logb), "SECRET") {
		t.Errorf("the job read a root-only file")
	}
	if u.Home != "" && !strings.Contains(string(logb), "HOME="+u.Home+"\n") {
		t.Errorf("log %q; want the job user's HOME %s", logb, u.Home)
	}
	for _, d := range []string{"model", "output", "checkpoints"} {
		st, err := os.Stat(filepath.Join(data, "jobs", "runas", d))
		if err != nil || st.Sys().(*syscall.Stat_t).Uid != u.UID {
			t.Errorf("%s: %v; want a directory owned by %s", d, err, u.Name)
		}
	}
	if st, err := os.Stat(filepath.Join(data, "attempts", "runas-a1")); err != nil || st.Sys().(*syscall.Stat_t).Uid != 0 {
		t.Errorf("the attempt's directory: %v; want it owned by root", err)
	}
	if st, err := os.Stat(filepath.Join(data, "attempts")); err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("attempts/: %v, %v; want it private to the server (0700): it holds every job's log", st.Mode(), err)
	}
	// A data directory that the job's user cannot reach is refused at New.
	os.Chmod(data, 0o700)
	defer os.Chmod(data, 0o755)
	if _, err := New(context.Background(), Options{DataDir: data, GPUs: []string{"none"}, RunAs: u.Name}); qshare.ErrorCodeOf(err) != qshare.EINVALID {
		t.Errorf("New over a data directory the job user cannot enter: %v; want EINVALID", err)
	}
}

// RunAs refuses root, a missing user, and a server that is not root.
func TestRunAsRefusals(t *testing.T) {
	for _, name := range []string{"root", "0", "qshare-no-such-user-x"} {
		_, err := New(context.Background(), Options{DataDir: t.TempDir(), GPUs: []string{"none"}, RunAs: name})
		if qshare.ErrorCodeOf(err) != qshare.EINVALID {
			t.Errorf("RunAs %q: %v; want EINVALID", name, err)
		}
	}
}
