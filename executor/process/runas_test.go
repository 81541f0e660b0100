package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"qshare"
)

// namedTestUser creates (once) the unprivileged user name for the tests
// of per-job users; it skips the test when that is impossible.
func namedTestUser(t *testing.T, name string) *jobUser {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("jobs of their own Unix users need a test that runs as root, to create the users and run jobs as them; run the tests as root to cover it")
	}
	if _, err := lookupJobUser(name); err != nil {
		if _, err := exec.LookPath("useradd"); err != nil {
			t.Skip("useradd is not installed: cannot create the user " + name)
		}
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name).CombinedOutput(); err != nil {
			t.Skipf("useradd %s: %v: %s", name, err, out)
		}
	}
	u, err := lookupJobUser(name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Each job runs as the user its Spec names: its processes have that uid,
// its directory is that user's alone, and another job's user can read
// nothing of it (its checkpoints included).
func TestSpecRunAs(t *testing.T) {
	alice := namedTestUser(t, "qshare-alice-test")
	bob := namedTestUser(t, "qshare-bob-test")
	data, err := os.MkdirTemp("", "qshare-specrunas")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(data)
	os.Chmod(data, 0o755)
	e := newExecutor(t, data, nil) // no --run-as: the server's user by default
	defer e.Close()

	s := spec("alice-job", 1, payloadOf(`id -u > "$SM_OUTPUT_DATA_DIR/uid"; echo secret-weights > "$SM_CHECKPOINT_DIR/ck"; echo "HOME=$HOME"`, nil))
	s.RunAs = alice.Name
	h, x := run(t, e, s)
	if !x.Succeeded() {
		b, _ := os.ReadFile(h.LogPath)
		t.Fatalf("alice's job: %+v\n%s", x, b)
	}
	jobDir := filepath.Join(data, "jobs", "alice-job")
	if b, err := os.ReadFile(filepath.Join(jobDir, "output", "data", "uid")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(int(alice.UID)) {
		t.Fatalf("alice's job ran as uid %q (%v), want %d", b, err, alice.UID)
	}
	st, err := os.Stat(jobDir)
	if err != nil || st.Mode().Perm() != 0o700 || st.Sys().(*syscall.Stat_t).Uid != alice.UID {
		t.Fatalf("alice's job directory: %v %v; want mode 0700, owned by %s", st.Mode(), err, alice.Name)
	}
	if st, err := os.Stat(filepath.Join(jobDir, "checkpoints")); err != nil || st.Sys().(*syscall.Stat_t).Uid != alice.UID {
		t.Fatalf("alice's checkpoints: %v; want them owned by %s", err, alice.Name)
	}
	if st, err := os.Stat(filepath.Join(data, "attempts")); err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("attempts/: %v; want it private to the server", err)
	}
	if b, _ := os.ReadFile(h.LogPath); alice.Home != "" && !strings.Contains(string(b), "HOME="+alice.Home) {
		t.Errorf("alice's job's log %q; want her HOME", b)
	}

	// bob's job cannot read alice's checkpoint, nor list her directory.
	ck := filepath.Join(jobDir, "checkpoints", "ck")
	sb := spec("bob-job", 1, payloadOf(`id -u > "$SM_OUTPUT_DATA_DIR/uid"; if cat "`+ck+`"; then exit 11; fi; if ls "`+jobDir+`"; then exit 12; fi; exit 0`, nil))
	sb.RunAs = strconv.Itoa(int(bob.UID)) // a uid does as well as a name
	h, x = run(t, e, sb)
	if !x.Succeeded() {
		b, _ := os.ReadFile(h.LogPath)
		t.Fatalf("bob's job read alice's files: %+v\n%s", x, b)
	}
	if b, _ := os.ReadFile(filepath.Join(data, "jobs", "bob-job", "output", "data", "uid")); strings.TrimSpace(string(b)) != strconv.Itoa(int(bob.UID)) {
		t.Fatalf("bob's job ran as uid %q, want %d", b, bob.UID)
	}
	if b, _ := os.ReadFile(h.LogPath); strings.Contains(string(b), "secret-weights") {
		t.Fatal("bob's job read alice's checkpoint")
	}

	// A job without RunAs still runs as the server's user.
	h, x = run(t, e, spec("server-job", 1, payloadOf(`id -u`, nil)))
	if b, _ := os.ReadFile(h.LogPath); !x.Succeeded() || strings.TrimSpace(string(b)) != "0" {
		t.Fatalf("a job without RunAs: %+v, log %q; want uid 0", x, b)
	}

	// Root, and a user that does not exist, are refused at Start.
	for _, who := range []string{"root", "0", "qshare-no-such-user"} {
		s := spec("refused-"+strings.ReplaceAll(who, "-", ""), 1, payloadOf(`true`, nil))
		s.RunAs = who
		if _, err := e.Start(context.Background(), s); qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "unixUser") {
			t.Errorf("Start as %s: %v; want an EINVALID error naming the unixUser", who, err)
		}
	}
}

func TestCheckUser(t *testing.T) {
	if err := CheckUser("principal x's unixUser", "qshare-no-such-user"); qshare.ErrorCodeOf(err) != qshare.EINVALID || !strings.Contains(err.Error(), "principal x's unixUser") {
		t.Errorf("a missing user: %v", err)
	}
	if err := CheckUser("principal x's unixUser", "root"); err == nil || !strings.Contains(err.Error(), "is root") {
		t.Errorf("root: %v", err)
	}
}
