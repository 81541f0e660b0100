package process

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// An attempt's processes must end with it. A process group does not hold
// them: a job leaves it with setsid, and a job's environment, which it
// controls, cannot mark them either. So, where the machine allows, each
// attempt runs in a cgroup of its own, of cgroup v1's freezer and pids
// controllers (the machines qshare runs on mount v1 or hybrid hierarchies):
// every process the job starts stays in it, whatever session, group or
// environment it takes, and at the attempt's end (or at a stop's SIGKILL)
// the cgroup is frozen, every process in it is killed, and it is thawed and
// removed. The pids controller counts what the attempt holds (pids.current).
// Where the cgroups cannot be made (no such controllers, no permission), the
// supervisor warns once and falls back to the process group.

// cgroupRoot is where the v1 controllers are mounted.
var cgroupRoot = "/sys/fs/cgroup"

// cgroupControllers are the v1 controllers an attempt's cgroup is made in:
// the freezer first (it is what kills), then pids (what counts).
var cgroupControllers = []string{"freezer", "pids"}

// attemptCgroup is an attempt's cgroup, one directory per controller.
type attemptCgroup struct {
	dirs []string // <root>/<controller>/qshare-<data>/<attemptID>
}

// cgroupParent returns the directory, under each controller, of the
// attempts of the data directory dataDir: a name of its own per data
// directory, so that two servers' attempts of one ID never meet.
func cgroupParent(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return "qshare-" + hex.EncodeToString(sum[:6])
}

// newAttemptCgroup makes the cgroup of attempt id.
func newAttemptCgroup(dataDir, id string) (*attemptCgroup, error) {
	if err := pathComponent("attempt ID", id); err != nil {
		return nil, err
	}
	c := &attemptCgroup{}
	for _, ctl := range cgroupControllers {
		base := filepath.Join(cgroupRoot, ctl)
		if st, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil || !st.Mode().IsRegular() {
			c.remove()
			return nil, fmt.Errorf("no cgroup v1 %s controller at %s", ctl, base)
		}
		d := filepath.Join(base, cgroupParent(dataDir), id)
		if err := os.MkdirAll(d, 0o755); err != nil {
			c.remove()
			return nil, err
		}
		c.dirs = append(c.dirs, d)
	}
	return c, nil
}

// enter moves the process pid (with all its threads) into the cgroup.
func (c *attemptCgroup) enter(pid int) error {
	for _, d := range c.dirs {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0); err != nil {
			return err
		}
	}
	return nil
}

// procs lists the processes in the cgroup, the supervisor itself left
// out (it is there for a moment when it forks a job, or if it could not
// leave).
func (c *attemptCgroup) procs() []int {
	b, _ := os.ReadFile(filepath.Join(c.dirs[0], "cgroup.procs"))
	var out []int
	self := os.Getpid()
	for _, f := range strings.Fields(string(b)) {
		if pid, err := strconv.Atoi(f); err == nil && pid != self {
			out = append(out, pid)
		}
	}
	return out
}

// count returns how many tasks the attempt holds (pids.current).
func (c *attemptCgroup) count() int {
	b, err := os.ReadFile(filepath.Join(c.dirs[len(c.dirs)-1], "pids.current"))
	if err != nil {
		return len(c.procs())
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// kill kills every process in the cgroup: frozen first, so none can fork
// while the others die, then SIGKILL to each, then thawed so that the
// signal is delivered. It returns once the cgroup is empty, or an error
// after 10 s.
func (c *attemptCgroup) kill() error {
	state := filepath.Join(c.dirs[0], "freezer.state")
	deadline := time.Now().Add(10 * time.Second)
	for {
		pids := c.procs()
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes survive SIGKILL in %s", len(pids), c.dirs[0])
		}
		os.WriteFile(state, []byte("FROZEN"), 0) //nolint:errcheck // without it, the kill below still works, forks racing it
		for i := 0; i < 100; i++ {
			if b, _ := os.ReadFile(state); strings.TrimSpace(string(b)) != "FREEZING" {
				break
			}
			time.Sleep(time.Millisecond)
		}
		for _, pid := range c.procs() {
			syscall.Kill(pid, syscall.SIGKILL)
		}
		os.WriteFile(state, []byte("THAWED"), 0) //nolint:errcheck // a frozen process cannot die
		time.Sleep(2 * time.Millisecond)
	}
}

// remove removes the cgroup's directories (they must be empty).
func (c *attemptCgroup) remove() error {
	var errs []error
	for _, d := range c.dirs {
		if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ownCgroups returns the supervisor's own cgroup under each of
// cgroupControllers (from /proc/self/cgroup), to go back to after it has
// started a job from inside the job's cgroup.
func ownCgroups() ([]string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return nil, err
	}
	own := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		parts := strings.SplitN(l, ":", 3)
		if len(parts) != 3 {
			continue
		}
		for _, ctl := range strings.Split(parts[1], ",") {
			own[ctl] = parts[2]
		}
	}
	var out []string
	for _, ctl := range cgroupControllers {
		p, ok := own[ctl]
		if !ok {
			return nil, fmt.Errorf("this process is in no cgroup of the %s controller", ctl)
		}
		out = append(out, filepath.Join(cgroupRoot, ctl, p))
	}
	return out, nil
}
