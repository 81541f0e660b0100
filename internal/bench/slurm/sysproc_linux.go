package slurm

import "syscall"

// sysProcAttr puts a daemon in its own process group and kills it if the
// harness dies first, so that no daemon outlives a crashed benchmark.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
