package process

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// identity names a process across time: a pid alone may be reused, a pid
// with its start time (clock ticks since boot) and the boot ID may not.
type identity struct {
	PID    int    `json:"pid"`
	Start  uint64 `json:"start"`
	BootID string `json:"bootID"`
}

// procStat returns the start time and state letter of pid from
// /proc/<pid>/stat.
func procStat(pid int) (start uint64, state byte, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces and
	// parentheses itself: the fields that follow start after the last ')'.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); starttime is field 22.
	if len(f) < 20 {
		return 0, 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	start, err = strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/stat: starttime: %w", pid, err)
	}
	return start, f[0][0], nil
}

// procPgrp returns the process group of pid (field 5 of /proc/<pid>/stat).
func procPgrp(pid int) (int, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("unreadable /proc/%d/stat", pid)
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 {
		return 0, fmt.Errorf("short /proc/%d/stat", pid)
	}
	return strconv.Atoi(f[2])
}

var bootIDOnce = func() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}()

// identify returns the identity of a running process.
func identify(pid int) (identity, error) {
	start, _, err := procStat(pid)
	if err != nil {
		return identity{}, err
	}
	return identity{PID: pid, Start: start, BootID: bootIDOnce}, nil
}

// alive reports whether the process id names is still running: same boot,
// same pid, same start time, and not a zombie.
func (id identity) alive() bool {
	if id.PID <= 0 || id.BootID != bootIDOnce {
		return false
	}
	start, state, err := procStat(id.PID)
	return err == nil && start == id.Start && state != 'Z' && state != 'X'
}

// signal sends sig to the process if it is still the one id names.
func (id identity) signal(sig syscall.Signal) error {
	if !id.alive() {
		return syscall.ESRCH
	}
	return syscall.Kill(id.PID, sig)
}

// signalGroup sends sig to the process group the process id names leads,
// if that process is still the one id names. The job's group lives on
// after its leader exits only while it has members; those are killed by the
// supervisor, so a group signal is only sent while the leader is verified.
func (id identity) signalGroup(sig syscall.Signal) error {
	if !id.alive() {
		return syscall.ESRCH
	}
	return syscall.Kill(-id.PID, sig)
}

// signalName returns the conventional name of a signal ("SIGKILL").
func signalName(s syscall.Signal) string {
	if n, ok := signalNames[s]; ok {
		return n
	}
	return "SIG" + strconv.Itoa(int(s))
}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGILL: "SIGILL",
	syscall.SIGTRAP: "SIGTRAP", syscall.SIGABRT: "SIGABRT", syscall.SIGBUS: "SIGBUS", syscall.SIGFPE: "SIGFPE",
	syscall.SIGKILL: "SIGKILL", syscall.SIGUSR1: "SIGUSR1", syscall.SIGSEGV: "SIGSEGV", syscall.SIGUSR2: "SIGUSR2",
	syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM", syscall.SIGTERM: "SIGTERM", syscall.SIGXCPU: "SIGXCPU",
	syscall.SIGXFSZ: "SIGXFSZ", syscall.SIGSYS: "SIGSYS",
}
