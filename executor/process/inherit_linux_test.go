package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// leakFD opens path as a descriptor that is not close-on-exec, as a shell's
// `7<path` leaves one to the server it starts, and closes it at the end.
func leakFD(t *testing.T, path string) int {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

// TestCloseInheritedOnExec marks a descriptor that was not close-on-exec,
// with close_range and with its fallback.
func TestCloseInheritedOnExec(t *testing.T) {
	for _, fallback := range []bool{false, true} {
		fd := leakFD(t, os.DevNull)
		noCloseRange = fallback
		CloseInheritedOnExec()
		noCloseRange = false
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || fl&unix.FD_CLOEXEC == 0 {
			t.Errorf("fallback=%v: descriptor %d has flags %#x (%v): not close-on-exec", fallback, fd, fl, err)
		}
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil {
			t.Errorf("fallback=%v: the descriptor was closed, not marked: %v", fallback, err)
		}
	}
}

// TestSupervisorPassesNoInheritedDescriptor starts a job from a process
// that holds a descriptor of a secret file that is not close-on-exec (the
// executor's supervisor inherits it, as from a server started with
// `7</root-only-secret`): the job must not hold it.
func TestSupervisorPassesNoInheritedDescriptor(t *testing.T) {
	secret := filepath.Join(t.TempDir(), "secret")
	os.WriteFile(secret, []byte("root-only-secret"), 0o600)
	fd := leakFD(t, secret)
	e := newExecutor(t, t.TempDir(), nil)
	defer e.Close()
	n := strconv.Itoa(fd)
	s := spec("fdjob", 1, payloadOf(`ls /proc/$$/fd > "$SM_OUTPUT_DATA_DIR/fds"; cat /proc/$$/fd/`+n+` > "$SM_OUTPUT_DATA_DIR/leak" 2>/dev/null; exit 0`, nil))
	_, x := run(t, e, s)
	if x.ExitCode != 0 {
		t.Fatalf("exit %+v", x)
	}
	out := filepath.Join(e.o.DataDir, "jobs", "fdjob", "output", "data")
	if b, _ := os.ReadFile(filepath.Join(out, "leak")); strings.Contains(string(b), "secret") {
		t.Errorf("the job read the inherited descriptor %d: %q", fd, b)
	}
	b, _ := os.ReadFile(filepath.Join(out, "fds"))
	for _, f := range strings.Fields(string(b)) {
		if f == n {
			t.Errorf("the job holds descriptor %d, which its supervisor inherited; its descriptors: %s", fd, strings.Fields(string(b)))
		}
	}
}
