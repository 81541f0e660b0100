package process

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/executor"
)

// These tests are attacks, each by a real job: the job plants a link (or a
// hard link) in its own directory, and the next attempt of the job, which
// the executor prepares in the same directory, must neither write through
// it nor read through it, must fail with a reason that names the planted
// path relative to the job's directory (never a server path), and must
// leave what the link points to as it was.

// plant runs attempt 1 of job, whose command plants something, and checks
// it succeeded.
func plant(t *testing.T, e *Executor, job, cmd string) {
	t.Helper()
	_, x := run(t, e, spec(job, 1, payloadOf(cmd, nil)))
	if !x.Succeeded() {
		t.Fatalf("the planting attempt failed: %+v", x)
	}
}

// retryRefused starts attempt 2 of job and checks that it is refused with a
// reason naming want and no server path.
func retryRefused(t *testing.T, e *Executor, data, job, want string) {
	t.Helper()
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := e.Start(context.Background(), spec(job, 2, payloadOf(`touch "`+marker+`"`, nil)))
	if err == nil {
		e.Wait(context.Background(), job+"-a2")
		t.Fatalf("attempt 2 started in a directory with a planted link")
	}
	msg := err.Error()
	t.Logf("attempt 2 refused: %s", msg)
	if !strings.Contains(msg, want) || !strings.Contains(msg, "link") {
		t.Errorf("Start: %q; want a reason that names %s and the link", msg, want)
	}
	if strings.Contains(msg, data) || strings.Contains(msg, os.TempDir()) {
		t.Errorf("Start: %q exposes a server path", msg)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Errorf("attempt 2 ran")
	}
}

// linkAttack is the first half of most attacks, on a fresh data directory
// and an executor on it (closed when the test ends): attempt 1 of job runs
// cmd(outside), which plants a link to outside, a directory outside the
// data directory, and attempt 2 must be refused (retryRefused). It returns
// the executor and outside.
func linkAttack(t *testing.T, job string, cmd func(outside string) string, want string) (*Executor, string) {
	t.Helper()
	data, outside := t.TempDir(), t.TempDir()
	// The jobs plant their links through the SM_* paths, as host paths:
	// what is attacked is the executor's writes on the host, which are the
	// same with or without /opt/ml (a hard link to a host file cannot be
	// made through the /opt/ml bind, another mount).
	e := newExecutor(t, data, func(o *Options) { o.NoOptML = true })
	t.Cleanup(func() { e.Close() })
	plant(t, e, job, cmd(outside))
	retryRefused(t, e, data, job, want)
	return e, outside
}

// nothingOutside checks that the attempts created nothing in outside.
func nothingOutside(t *testing.T, outside string) {
	t.Helper()
	if names := dirNames(t, outside); len(names) != 0 {
		t.Errorf("the attempt created %v outside the data directory", names)
	}
}

// dirNames lists the names in dir.
func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// A job replaces input/config with a link to a directory outside the data
// directory: the next attempt's hyperparameters.json, resourceconfig.json
// and inputdataconfig.json were written there (issue 14, finding 3).
func TestAttackConfigDirectoryLink(t *testing.T) {
	_, outside := linkAttack(t, "cfg", func(outside string) string {
		return `rm -rf "$SM_INPUT_CONFIG_DIR" && ln -s "` + outside + `" "$SM_INPUT_CONFIG_DIR"`
	}, "input/config in the job's directory is a link")
	nothingOutside(t, outside)
}

// The same one level up (input) and for a file: a link planted in place of
// hyperparameters.json, pointing at a file outside, is replaced, never
// written through; so is a hard link to such a file.
func TestAttackConfigFileLinks(t *testing.T) {
	e, outside := linkAttack(t, "up", func(outside string) string {
		return `rm -rf "$SM_INPUT_DIR" && ln -s "` + outside + `" "$SM_INPUT_DIR"`
	}, "input")

	victim := filepath.Join(outside, "hostname")
	const content = "victim-host\n"
	if err := os.WriteFile(victim, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, how := range []string{"ln -s", "ln"} {
		job := map[string]string{"ln -s": "sym", "ln": "hard"}[how]
		plant(t, e, job, `rm -f "$SM_INPUT_CONFIG_DIR/hyperparameters.json" && `+how+` "`+victim+`" "$SM_INPUT_CONFIG_DIR/hyperparameters.json"`)
		h, x := run(t, e, spec(job, 2, payloadOf(`cat "$SM_INPUT_CONFIG_DIR/hyperparameters.json"`, nil)))
		if !x.Succeeded() {
			t.Errorf("%s: attempt 2: %+v", how, x)
		}
		if b, _ := os.ReadFile(victim); string(b) != content {
			t.Errorf("%s: the file outside now holds %q", how, b)
		}
		if b, _ := os.ReadFile(h.LogPath); string(b) != "{}" {
			t.Errorf("%s: attempt 2 read hyperparameters %q, want {}", how, b)
		}
	}
}

// A job replaces its checkpoint directory (or a directory above a nested
// CheckpointConfig.LocalPath) with a link.
func TestAttackCheckpointLink(t *testing.T) {
	e, outside := linkAttack(t, "ck", func(outside string) string {
		return `rmdir "$SM_CHECKPOINT_DIR" && ln -s "` + outside + `" "$SM_CHECKPOINT_DIR"`
	}, "checkpoints")

	nested := func(cmd string) string {
		return payloadOf(cmd, func(p map[string]any) {
			p["CheckpointConfig"] = map[string]string{"LocalPath": "/opt/ml/ck/deep/er"}
		})
	}
	if _, x := run(t, e, spec("nest", 1, nested(`rm -rf ck && ln -s "`+outside+`" ck`))); !x.Succeeded() {
		t.Fatalf("planting: %+v", x)
	}
	if _, err := e.Start(context.Background(), spec("nest", 2, nested(`true`))); err == nil || !strings.Contains(err.Error(), "ck") {
		t.Errorf("Start with a link above the checkpoint directory: %v", err)
	}
	nothingOutside(t, outside)
}

// A job that fails links SM_OUTPUT_DIR/failure to a file it must not see:
// the supervisor, which may run as root, reads the failure file for the
// attempt's reason, and must not read it through a link.
func TestAttackFailureFileLink(t *testing.T) {
	data := t.TempDir()
	secret := filepath.Join(t.TempDir(), "shadow")
	if err := os.WriteFile(secret, []byte("root:SECRET-HASH:19000::::::\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newExecutor(t, data, nil)
	defer e.Close()
	for i, how := range []string{"ln -s", "ln"} {
		s := spec("ff", i+1, payloadOf(how+` "`+secret+`" "$SM_OUTPUT_DIR/failure"; exit 3`, nil))
		_, x := run(t, e, s)
		if x.ExitCode != 3 || strings.Contains(x.Reason, "SECRET") {
			t.Errorf("%s: exit %+v; want code 3 and a reason without the linked file's content", how, x)
		}
		os.Remove(filepath.Join(data, "jobs", "ff", "output", "failure"))
	}
}

// A job replaces its whole directory (jobs/<jobID>) with a link: the next
// attempt is refused too, whatever the link points to.
func TestAttackJobDirectoryLink(t *testing.T) {
	_, outside := linkAttack(t, "whole", func(outside string) string {
		return `d=$(pwd); cd / && mv "$d" "$d.old" && ln -s "` + outside + `" "$d"`
	}, "the job's directory is a link")
	nothingOutside(t, outside)
}

// dataFS itself: without openat2 (walkOpen, the fallback of old kernels and
// other systems), links are refused the same way.
func TestDataFSWalkRefusesLinks(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	os.MkdirAll(filepath.Join(root, "a", "b"), 0o755)
	os.Symlink(outside, filepath.Join(root, "a", "l"))
	os.WriteFile(filepath.Join(outside, "f"), []byte("x"), 0o644)
	os.Symlink(filepath.Join(outside, "f"), filepath.Join(root, "a", "b", "f"))
	fs := newDataFS(root)
	for _, walk := range []bool{false, true} {
		old := noOpenat2.Load()
		noOpenat2.Store(walk)
		for _, p := range []string{"a/l/f", "a/b/f", "a/l"} {
			if _, err := fs.ReadFile(filepath.Join(root, p)); !isLinkErr(err) {
				t.Errorf("walk=%v: ReadFile(%s) = %v; want a refused link", walk, p, err)
			}
		}
		if err := fs.Mkdir(filepath.Join(root, "a", "l"), 0o755); !isLinkErr(err) {
			t.Errorf("walk=%v: Mkdir over a link = %v", walk, err)
		}
		if err := fs.MkdirAll(filepath.Join(root, "a", "l", "x", "y"), 0o755, nil); !isLinkErr(err) {
			t.Errorf("walk=%v: MkdirAll through a link = %v", walk, err)
		}
		if _, err := fs.ReadFile(filepath.Join(root, "a", "..", "..", "etc", "hostname")); err == nil {
			t.Errorf("walk=%v: a path out of the root was read", walk)
		}
		if err := fs.WriteFile(filepath.Join(root, "a", "b", "new"), []byte("ok"), 0o644); err != nil {
			t.Errorf("walk=%v: WriteFile: %v", walk, err)
		}
		noOpenat2.Store(old)
	}
	if names := dirNames(t, outside); len(names) != 1 {
		t.Errorf("outside holds %v", names)
	}
	var _ executor.Executor = (*Executor)(nil)
}
