//go:build !linux

package process

import (
	"errors"
	"syscall"
)

// attemptCgroup is an attempt's cgroup: Linux only (see the Linux build);
// elsewhere attempts are contained by their process group.
type attemptCgroup struct{ v2 bool }

// cgroupHost is where attempts' cgroups are made: none here.
type cgroupHost struct{ home []string }

func openCgroups(string) (*cgroupHost, error) { return nil, errors.New("cgroups are Linux's") }
func (*cgroupHost) removeParent(string)       {}
func (*cgroupHost) newAttempt(string, string) (*attemptCgroup, error) {
	return nil, errors.New("cgroups are Linux's")
}
func (*attemptCgroup) enter(int) error                { return nil }
func (*attemptCgroup) procs() []int                   { return nil }
func (*attemptCgroup) count() int                     { return 0 }
func (*attemptCgroup) kill() error                    { return nil }
func (*attemptCgroup) remove() error                  { return nil }
func (*attemptCgroup) cloneInto(*syscall.SysProcAttr) {}
func (*attemptCgroup) forked()                        {}
