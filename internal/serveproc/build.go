package serveproc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Build compiles the qshare command into dir/qshare and returns its path,
// for the tests that run the real binary. It builds with the cgo setting of
// the go command that runs the tests, so that it reuses the packages go
// test has compiled already: forcing CGO_ENABLED=0 where cgo is on compiles
// the whole dependency graph a second time, about 80 s on a 2-core machine
// with a cold build cache, which put `go test ./...` on a fresh clone over
// five minutes. The release binary is static; .ci/run builds it, and runs
// the suites that run the binary as other users once more with
// CGO_ENABLED=0. It must run inside the qshare module; the error holds the
// compiler's output.
//
// The link itself is shared: go build writes the binary once into this
// user's cache (see sharedBinary), where a later go build finds it up to
// date and does not link again, and Build copies it into dir. About ten
// packages' tests run the binary; linking it for each took several seconds
// of CPU apiece in `go test ./...`. The copy keeps each package's binary
// its own, whatever a later build in the cache does.
func Build(dir string) (string, error) {
	bin := filepath.Join(dir, "qshare")
	shared, unlock, err := sharedBinary()
	if err != nil {
		return "", err
	}
	if shared == "" {
		// No cache to share: link into dir, as before.
		return bin, goBuild(bin)
	}
	defer unlock()
	if err := CopyExecutable(shared, bin); err != nil {
		return "", fmt.Errorf("copying the qshare binary: %v", err)
	}
	return bin, nil
}

// goBuild links qshare/cmd/qshare into bin; go build leaves bin as it is
// when it is already the binary of these sources and settings.
func goBuild(bin string) error {
	cmd := exec.Command("go", "build", "-o", bin, "qshare/cmd/qshare")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, out)
	}
	return nil
}

// sharedBinary brings the cache's binary for this checkout and these build
// settings up to date and returns its path, holding a lock that unlock
// releases: other test binaries (go test runs several packages at once)
// wait on it rather than build beside it. The cache is under
// os.UserCacheDir, private to the user, with one entry per module
// directory and setting of the environment that changes the build, so that
// two checkouts, or a CGO_ENABLED=0 run beside a cgo one, do not take
// turns relinking one file. It returns "" (and no error) where there is no
// such cache directory or module.
func sharedBinary() (path string, unlock func(), err error) {
	cache, err := os.UserCacheDir()
	if err != nil {
		return "", nil, nil
	}
	root := moduleRoot()
	if root == "" {
		return "", nil, nil
	}
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00", root)
	for _, k := range []string{"CGO_ENABLED", "GOFLAGS", "GOOS", "GOARCH", "GOAMD64", "GOEXPERIMENT", "CC"} {
		fmt.Fprintf(h, "%s=%s\x00", k, os.Getenv(k))
	}
	dir := filepath.Join(cache, "qshare", "serveproc", hex.EncodeToString(h.Sum(nil))[:16])
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return "", nil, err
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		lock.Close()
		return "", nil, err
	}
	unlock = func() { lock.Close() } // closing the file releases the lock
	path = filepath.Join(dir, "qshare")
	stampFile := filepath.Join(dir, "built-under")
	run := goTestRun()
	if b, err := os.ReadFile(stampFile); err == nil && run != "" && string(b) == run {
		if _, err := os.Stat(path); err == nil {
			return path, unlock, nil
		}
	}
	if err := goBuild(path); err != nil {
		unlock()
		return "", nil, err
	}
	if run != "" {
		os.WriteFile(stampFile, []byte(run), 0o600) //nolint:errcheck // without it, the next package builds again
	}
	return path, unlock, nil
}

// goTestRun names the go command that runs this test binary, as "pid
// start-time", or is "" where the parent process is not a go command (a
// test binary run by hand). Within one `go test` run, the go command
// compiled every package at its start, so the first package's go build of
// the binary stands for the others: each further go build, which finds
// nothing to do, still hashed every source file of the binary's packages,
// about 1.4 s of CPU, for each of about ten packages. A new run, even of
// the same sources, builds again (go build then decides).
func goTestRun() string {
	ppid := os.Getppid()
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", ppid))
	if err != nil || filepath.Base(exe) != "go" {
		return ""
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", ppid))
	if err != nil {
		return ""
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: the start time is the 20th of them (field 22).
	_, rest, ok := strings.Cut(string(stat), ") ")
	if f := strings.Fields(rest); ok && len(f) > 19 {
		return fmt.Sprintf("%d %s", ppid, f[19])
	}
	return ""
}

// moduleRoot is the directory of the go.mod that holds the working
// directory (a test runs in its package's directory), or "".
func moduleRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return ""
		}
		dir = up
	}
}

// CopyExecutable copies the file from to to, mode 0755 (a new file: one
// already at to, which may be running, is removed first).
//
// The copy is written by a child process (cp), not by this one. A file
// open for writing cannot be executed (ETXTBSY), and a descriptor this
// process holds is, for the moment between fork and exec, held too by
// every child that another goroutine starts then: a parallel test that
// starts a process while this copy is being written would leave the new
// binary "busy" for a moment after it was closed here, and running it then
// fails with "text file busy". cp's descriptors are its own.
func CopyExecutable(from, to string) error {
	if err := os.Remove(to); err != nil && !os.IsNotExist(err) {
		return err
	}
	cp, err := exec.LookPath("cp")
	if err != nil {
		return copyInProcess(from, to)
	}
	if out, err := exec.Command(cp, "--", from, to).CombinedOutput(); err != nil {
		return fmt.Errorf("cp %s %s: %v\n%s", from, to, err, out)
	}
	return os.Chmod(to, 0o755)
}

// WriteExecutable writes data to a new executable file at path, mode 0755,
// by way of CopyExecutable (so that running it at once does not fail with
// "text file busy" when other goroutines start processes meanwhile): the
// bytes go first to a file beside it that is never run.
func WriteExecutable(path string, data []byte) error {
	part := path + ".part"
	if err := os.WriteFile(part, data, 0o600); err != nil {
		return err
	}
	defer os.Remove(part)
	return CopyExecutable(part, path)
}

// copyInProcess is CopyExecutable's copy where there is no cp.
func copyInProcess(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// WithBinary is the body of a TestMain whose tests run the real binary: it
// builds qshare into a new temporary directory (its name starts with
// prefix), sets *bin to its path, calls run (m.Run) and removes the
// directory. It returns the exit code for os.Exit: run's, or 1, said on
// standard error, when the binary cannot be built.
func WithBinary(prefix string, bin *string, run func() int) int {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if *bin, err = Build(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return run()
}

// TB is the part of testing.TB that StartTest uses (so that this package,
// which the qshare command links, need not import testing).
type TB interface {
	Helper()
	Fatal(args ...any)
	Error(args ...any)
	Logf(format string, args ...any)
	Failed() bool
	Cleanup(func())
}

// StartTest starts a server as Start does, with a background context, for
// the test t: it fails t at once when the server does not come up, stops the
// server when t ends (an error of Stop fails t), and then, when t has
// failed, logs the server's output (kept in memory unless o.Output is set).
func StartTest(t TB, o Options) *Server {
	t.Helper()
	srv, err := Start(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := srv.Stop(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", srv.Log())
		}
	})
	return srv
}
