package process

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestStrayProcessesEndWithTheAttempt: a job leaves a process behind in a
// session of its own, with an empty environment (so nothing marks it as
// the job's), and exits 0. The attempt's end must take that process with
// it (issue 30, point 4).
func TestStrayProcessesEndWithTheAttempt(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the attempts' cgroups need a supervisor that runs as root; run the tests as root to cover it")
	}
	if _, err := ownCgroups(); err != nil {
		t.Skipf("no cgroup v1 freezer and pids controllers here (%v): attempts fall back to their process group", err)
	}
	data := t.TempDir()
	e := newExecutor(t, data, nil)
	defer e.Close()
	s := spec("stray", 1, payloadOf(`setsid env -i sleep 100001 & echo $! > "$SM_OUTPUT_DATA_DIR/pid"; sleep 0.2; exit 0`, nil))
	_, x := run(t, e, s)
	if !x.Succeeded() {
		t.Fatalf("exit %+v", x)
	}
	b, err := os.ReadFile(filepath.Join(data, "jobs", "stray", "output", "data", "pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	deadline := time.Now().Add(5 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if st, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat"); strings.Contains(string(st), ") Z") {
			break // a zombie: dead, not yet reaped
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the job's process %d (setsid env -i sleep) outlived its attempt", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(cgroupRoot, "freezer", cgroupParent(data), s.AttemptID)); err == nil {
		t.Error("the attempt's cgroup was not removed")
	}
}

// TestAttemptCgroupCountsAndKills: a cgroup holds what is put in it and
// what that forks, counts it, and kills it whole.
func TestAttemptCgroupCountsAndKills(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("cgroups need root")
	}
	if _, err := ownCgroups(); err != nil {
		t.Skipf("no cgroup v1 freezer and pids controllers here: %v", err)
	}
	cg, err := newAttemptCgroup(t.TempDir(), "count-a1")
	if err != nil {
		t.Fatal(err)
	}
	defer cg.remove()
	pid, err := syscall.ForkExec("/bin/sh", []string{"sh", "-c", "sleep 0.1; sleep 100 & sleep 100 & wait"}, &syscall.ProcAttr{Sys: &syscall.SysProcAttr{Setsid: true}})
	if err != nil {
		t.Fatal(err)
	}
	cg.enter(pid)
	// What it forks after the move is in too.
	time.Sleep(300 * time.Millisecond)
	if n := cg.count(); n < 3 {
		t.Errorf("pids.current %d", n)
	}
	if err := cg.kill(); err != nil {
		t.Fatal(err)
	}
	var ws syscall.WaitStatus
	syscall.Wait4(pid, &ws, 0, nil)
	if n := len(cg.procs()); n != 0 {
		t.Errorf("%d processes left after kill", n)
	}
}
