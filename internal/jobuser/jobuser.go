// Package jobuser gives the tests that run jobs as a second Unix user (the
// run-as tests of the process executor end to end and of the Slurm
// executor) that user, and a directory with a root-only secret in it that
// the user can reach. It is a test harness: no product package imports it.
package jobuser

import (
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"testing"

	"qshare/internal/serveproc"
)

// Name is the unprivileged user that the tests run jobs as.
const Name = "qshare-job-test"

// Lookup returns the user Name, created with useradd when it is missing.
// It skips t, saying why, where the tests do not run as root (a server must
// be root to run jobs as another user) or the user cannot be created.
func Lookup(t testing.TB) *user.User {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("jobs of a second Unix user need a server that runs as root; run the tests as root to cover it")
	}
	if _, err := user.Lookup(Name); err != nil {
		if out, err := exec.Command("useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", Name).CombinedOutput(); err != nil {
			t.Skipf("cannot create the user %s that jobs run as: %v: %s", Name, err, out)
		}
	}
	u, err := user.Lookup(Name)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Dir returns a new temporary directory (mode 0755, not t.TempDir's
// root-only one, so that the job's user can enter it), removed when t
// ends, and the path of the file "root-only" in it, which only root may
// read and which holds "SECRET".
func Dir(t testing.TB, prefix string) (dir, secret string) {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	secret = filepath.Join(dir, "root-only")
	if err := os.WriteFile(secret, []byte("SECRET\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir, secret
}

// CopySelf copies the running test binary to path, mode 0755, so that the
// job's user can run it there (as a step runner, say), where the binary
// itself may lie in a directory only root may enter.
func CopySelf(t testing.TB, path string) {
	t.Helper()
	if err := serveproc.CopyExecutable(os.Args[0], path); err != nil {
		t.Fatal(err)
	}
}
