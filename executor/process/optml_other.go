//go:build !linux

package process

import (
	"errors"
	"os"
	"syscall"
)

// optmlEnv is the variable of the /opt/ml step, which only Linux has.
const optmlEnv = "QSHARE_OPTML_EXEC"

// optmlCapable is false: mount namespaces are Linux's.
func optmlCapable() bool { return false }

func (s *supervisor) forkOptML(cfg supervisorConfig, cands []string, attr *syscall.ProcAttr) (int, string, func() string, error) {
	return 0, "", nil, errors.New("/opt/ml needs a Linux mount namespace")
}

func runOptMLStep() { os.Exit(127) }
