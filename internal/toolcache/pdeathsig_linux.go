package toolcache

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes cmd's process get SIGKILL when the process that
// started it dies (a test binary killed at its -timeout), so that no
// server outlives the test or benchmark that started it.
func dieWithParent(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL
}
