//go:build !linux

package process

import (
	"errors"
	"syscall"
)

// optmlCapable is false: mount namespaces are Linux's.
func optmlCapable() bool { return false }

func (s *supervisor) forkOptML(cfg supervisorConfig, cands []string, attr *syscall.ProcAttr) (int, string, error) {
	return 0, "", errors.New("/opt/ml needs a Linux mount namespace")
}
