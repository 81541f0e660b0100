package process

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"qshare/internal/cgrouptest"
	"qshare/internal/serveproc"
)

// The cgroup tests run on the host's v1 hierarchy (freezer and pids, as on
// these machines) and on a cgroup2 hierarchy that the test mounts in a
// temporary directory (Linux lets a v1 host mount one beside), so that the
// v2 path (clone into the cgroup, cgroup.kill) runs for real on either.

// cgroupRoots returns the hierarchies to test on: "v1" (the host's) where
// it has freezer and pids, and "v2", mounted for the test; each skips with
// a message where it cannot be had.
func cgroupRoots(t *testing.T) map[string]func(t *testing.T) string {
	return map[string]func(t *testing.T) string{
		"v1": func(t *testing.T) string {
			h, err := openCgroups(DefaultCgroupRoot)
			if err != nil || h.v2 {
				t.Skipf("no cgroup v1 freezer and pids controllers at %s (%v): the v2 case covers a cgroup2 host", DefaultCgroupRoot, err)
			}
			return DefaultCgroupRoot
		},
		"v2": func(t *testing.T) string { return cgrouptest.MountV2(t) },
	}
}

// onEachHierarchy runs f as a subtest on each of cgroupRoots, with the
// hierarchy's root; as root only, else it skips saying why.
func onEachHierarchy(t *testing.T, f func(t *testing.T, root string)) {
	if os.Geteuid() != 0 {
		t.Skip("the attempts' cgroups need a supervisor that runs as root; run the tests as root to cover it")
	}
	for name, root := range cgroupRoots(t) {
		t.Run(name, func(t *testing.T) { f(t, root(t)) })
	}
}

// gone waits up to 5 s for pid, which was started with marker on its
// command line, to be gone (or a zombie, dead but not yet reaped), and
// reports whether it is.
func gone(pid int, marker string) bool {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
		if err != nil || !strings.Contains(string(cmd), marker) {
			return true
		}
		if st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(st), ") Z") {
			return true
		}
	}
	syscall.Kill(pid, syscall.SIGKILL)
	return false
}

// TestStrayProcessesEndWithTheAttempt: a job leaves a process behind in a
// session of its own, with an empty environment (so nothing marks it as
// the job's), ignoring SIGTERM, and exits 0 (end), or is stopped (stop).
// The attempt's end must take that process with it, and its cgroup must be
// removed (issue 30, point 4); on cgroup v1 and on v2.
func TestStrayProcessesEndWithTheAttempt(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("the attempts' cgroups need a supervisor that runs as root; run the tests as root to cover it")
	}
	for name, root := range cgroupRoots(t) {
		for _, stop := range []bool{false, true} {
			t.Run(name+"/"+map[bool]string{false: "end", true: "stop"}[stop], func(t *testing.T) {
				root := root(t)
				data := t.TempDir()
				e := newExecutor(t, data, func(o *Options) { o.CgroupRoot = root })
				defer e.Close()
				then := "sleep 0.2; exit 0"
				if stop {
					then = "exec sleep 100003"
				}
				s := spec("stray", 1, payloadOf(`setsid env -i sh -c 'trap "" TERM; exec sleep 100001' & echo $! > "$SM_OUTPUT_DATA_DIR/pid"; echo ready; `+then, nil))
				h, err := e.Start(context.Background(), s)
				if err != nil {
					t.Fatal(err)
				}
				waitForLog(t, h.LogPath, "ready\n", time.Minute)
				b, err := os.ReadFile(filepath.Join(data, "jobs", "stray", "output", "data", "pid"))
				if err != nil {
					t.Fatal(err)
				}
				pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
				if stop {
					if x, err := stopAndWait(t, e, s.AttemptID, 300*time.Millisecond); err != nil || !x.Stopped {
						t.Fatalf("stop: %+v, %v", x, err)
					}
				} else {
					ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
					defer cancel()
					if x, err := e.Wait(ctx, s.AttemptID); err != nil || !x.Succeeded() {
						t.Fatalf("exit %+v, %v", x, err)
					}
				}
				if !gone(pid, "100001") {
					t.Fatalf("the job's process %d (setsid env -i, ignoring SIGTERM) outlived its attempt", pid)
				}
				noCgroupLeft(t, root, data, s.AttemptID)
				if log, _ := os.ReadFile(filepath.Join(data, fileSupLog)); len(log) > 0 {
					t.Errorf("the supervisor logged (a fallback to the process group, or a cgroup it could not kill or remove):\n%s", log)
				}
			})
		}
	}
}

// TestAttemptCgroupCountsAndKills: a cgroup holds what is started in it
// and what that forks, counts it, and kills it whole; on v1 and on v2.
func TestAttemptCgroupCountsAndKills(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	for name, root := range cgroupRoots(t) {
		t.Run(name, func(t *testing.T) {
			h, err := openCgroups(root(t))
			if err != nil {
				t.Fatal(err)
			}
			cg, err := h.newAttempt(t.TempDir(), "count-a1")
			if err != nil {
				t.Fatal(err)
			}
			defer cg.remove()
			sys := &syscall.SysProcAttr{Setsid: true}
			cg.cloneInto(sys)
			cmd := exec.Command("/bin/sh", "-c", "sleep 0.1; sleep 100 & sleep 100 & wait")
			cmd.SysProcAttr = sys
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cg.forked()
			if !cg.v2 {
				cg.enter(cmd.Process.Pid)
			}
			// What it forks after it is in the cgroup is in too.
			deadline := time.Now().Add(10 * time.Second)
			for cg.count() < 3 && time.Now().Before(deadline) {
				time.Sleep(20 * time.Millisecond)
			}
			if n := cg.count(); n < 3 {
				t.Errorf("counted %d tasks, want at least 3", n)
			}
			if err := cg.kill(); err != nil {
				t.Fatal(err)
			}
			cmd.Wait()
			if n := len(cg.procs()); n != 0 {
				t.Errorf("%d processes left after kill", n)
			}
			if err := cg.remove(); err != nil {
				t.Errorf("removing the killed cgroup: %v", err)
			}
		})
	}
}

// TestFailedStartLeavesNoCgroup: an attempt whose program cannot be run
// (here an executable file of no format the kernel knows, which it
// refuses at the exec: ENOEXEC) fails with CannotStartError and leaves
// no cgroup behind; and once the executor has closed, its supervisor
// removes the data directory's parent cgroup as it exits; on cgroup v1
// and on v2.
func TestFailedStartLeavesNoCgroup(t *testing.T) {
	onEachHierarchy(t, func(t *testing.T, root string) {
		data := t.TempDir()
		prog := filepath.Join(t.TempDir(), "no-format")
		if err := serveproc.WriteExecutable(prog, []byte{0, 1, 2, 3, 'n', 'o', 't', 'E', 'L', 'F'}); err != nil {
			t.Fatal(err)
		}
		os.Chmod(filepath.Dir(prog), 0o755)
		e := newExecutor(t, data, func(o *Options) { o.CgroupRoot = root })
		defer e.Close()
		s := spec("noexec", 1, payloadOf([]string{prog}, nil))
		if _, err := e.Start(context.Background(), s); err == nil {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			x, err := e.Wait(ctx, s.AttemptID)
			if err != nil || x.Succeeded() || !strings.Contains(x.Reason, "CannotStartError") {
				t.Fatalf("exit %+v, %v; want CannotStartError", x, err)
			}
		} else if !strings.Contains(err.Error(), "CannotStartError") {
			t.Fatalf("Start: %v; want CannotStartError", err)
		}
		noCgroupLeft(t, root, data, s.AttemptID)
		// The supervisor, its server gone and its attempts over, removes
		// the data directory's parent cgroup as it exits.
		e.Close()
		hc, err := openCgroups(root)
		if err != nil {
			t.Fatal(err)
		}
		parent := filepath.Dir(hc.attemptDir(data, s.AttemptID))
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(parent); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s is still there 10 s after the executor closed", parent)
			}
		}
	})
}

// noCgroupLeft fails t if attempt id of the data directory data still has
// a cgroup under root, with the supervisor's log.
func noCgroupLeft(t *testing.T, root, data, id string) {
	t.Helper()
	hc, err := openCgroups(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(hc.attemptDir(data, id)); err == nil {
		log, _ := os.ReadFile(filepath.Join(data, fileSupLog))
		t.Errorf("the attempt's cgroup was left behind; the supervisor's log:\n%s", log)
	}
}
