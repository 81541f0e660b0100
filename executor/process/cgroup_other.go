//go:build !linux

package process

import "errors"

// attemptCgroup is an attempt's cgroup: Linux only (see the Linux build);
// elsewhere attempts are contained by their process group.
type attemptCgroup struct{}

func newAttemptCgroup(string, string) (*attemptCgroup, error) {
	return nil, errors.New("cgroups are Linux's")
}
func (*attemptCgroup) enter(int) error { return nil }
func (*attemptCgroup) procs() []int    { return nil }
func (*attemptCgroup) count() int      { return 0 }
func (*attemptCgroup) kill() error     { return nil }
func (*attemptCgroup) remove() error   { return nil }
func ownCgroups() ([]string, error)    { return nil, errors.New("cgroups are Linux's") }
