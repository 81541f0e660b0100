package security_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"qshare/internal/serveproc"
)

// TestHostilePrivateFilesOutsideState: an --events or --audit log, or the
// --auth file, given outside the data directory's state/, where alice
// could read it, change it or replace it, stops the start with a message
// that names the file and the fix; given where only the server's user may
// change it, new logs are created 0600 (issue 30, point 3). Before, the
// logs were opened wherever they were, whatever their mode, owner or
// directory.
func TestHostilePrivateFilesOutsideState(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	alice := ensureUser(t, "qshare-alice-test")
	uid, _ := strconv.Atoi(alice.Uid)
	gid, _ := strconv.Atoi(alice.Gid)
	dir := t.TempDir()
	auth := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(auth, []byte(authFileText(false)), 0o600))
	mkdir := func(name string, mode os.FileMode) string {
		d := filepath.Join(dir, name)
		must(t, os.Mkdir(d, 0o700))
		must(t, os.Chmod(d, mode))
		return d
	}
	file := func(d, name string, mode os.FileMode) string {
		p := filepath.Join(d, name)
		must(t, os.WriteFile(p, nil, 0o600))
		must(t, os.Chmod(p, mode))
		return p
	}
	open := mkdir("open", 0o777)                   // anyone may replace what is in it
	sticky := mkdir("sticky", 0o777|os.ModeSticky) // as /tmp
	alices := mkdir("alices", 0o755)               // alice's own directory
	must(t, os.Chown(alices, uid, gid))            //
	mine := mkdir("mine", 0o755)                   // the server's user's
	alicesFile := file(mine, "alices.jsonl", 0o600)
	must(t, os.Chown(alicesFile, uid, gid))
	aliceAuth := file(mine, "alice-auth.yaml", 0o600)
	must(t, os.WriteFile(aliceAuth, []byte(authFileText(false)), 0o600))
	must(t, os.Chown(aliceAuth, uid, gid))
	link := filepath.Join(sticky, "link.jsonl")
	must(t, os.Symlink(file(mine, "target.jsonl", 0o600), link))

	for _, c := range []struct {
		name string
		args []string
		want []string
	}{
		{"events in a directory others may write", []string{"--events", filepath.Join(open, "events.jsonl")},
			[]string{"--events " + filepath.Join(open, "events.jsonl"), "the directory " + open + " may be written by its group or others", "chmod go-w"}},
		{"audit readable by others", []string{"--auth", auth, "--audit", file(mine, "audit.log", 0o644)},
			[]string{"--audit " + filepath.Join(mine, "audit.log"), "(mode 0644)", "chmod 600"}},
		{"events owned by alice", []string{"--events", alicesFile},
			[]string{"--events " + alicesFile + " is owned by uid " + alice.Uid, "chown it to the server's user"}},
		{"audit in alice's directory", []string{"--auth", auth, "--audit", filepath.Join(alices, "audit.log")},
			[]string{"--audit " + filepath.Join(alices, "audit.log"), "the directory " + alices + " is owned by uid " + alice.Uid}},
		{"events through a link in a sticky directory", []string{"--events", link},
			[]string{"--events " + link + " is a symbolic link"}},
		{"auth owned by alice", []string{"--auth", aliceAuth},
			[]string{"--auth " + aliceAuth + " is owned by uid " + alice.Uid}},
		{"auth writable by its group", []string{"--auth", file(mine, "auth-g.yaml", 0o620)},
			[]string{"--auth " + filepath.Join(mine, "auth-g.yaml"), "(mode 0620)", "chmod 600"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second) // a server that starts is killed
			defer cancel()
			args := append([]string{"serve", "--addr", "127.0.0.1:0", "--data-dir", filepath.Join(dir, "data"), "--executor", "simulated"}, c.args...)
			out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
			if err == nil || ctx.Err() != nil {
				t.Fatalf("qshare %s started (%v)\n%s", strings.Join(args, " "), err, out)
			}
			for _, w := range append(c.want, "state/") {
				if !strings.Contains(string(out), w) {
					t.Errorf("the refusal does not say %q:\n%s", w, out)
				}
			}
		})
	}

	// Where only the server's user may change them, new logs are made
	// 0600, even in a sticky directory that everyone may write.
	events, audit := filepath.Join(sticky, "events.jsonl"), filepath.Join(mine, "audit.log.new")
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "warn", "--auth", auth, "--audit", audit, "--events", events}})
	setupTraining(t, signedClient(srv.Endpoint, adminKey), "ml.m5.xlarge")
	for _, p := range []string{events, audit} {
		st, err := os.Stat(p)
		must(t, err)
		if st.Mode().Perm() != 0o600 {
			t.Errorf("%s is %04o, want 0600", p, st.Mode().Perm())
		}
	}
}
