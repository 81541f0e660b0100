package process

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// An attempt's processes must end with it. A process group does not hold
// them: a job leaves it with setsid, and a job's environment, which it
// controls, cannot mark them either. So, where the machine allows, each
// attempt runs in a cgroup of its own: every process the job starts stays
// in it, whatever session, group or environment it takes, and at the
// attempt's end (or at a stop's SIGKILL) the whole cgroup is killed and
// removed. It also counts what the attempt holds.
//
//   - cgroup v2 (the root is a cgroup2 mount): the job is cloned straight
//     into its cgroup (clone3's CLONE_INTO_CGROUP, SysProcAttr.UseCgroupFD),
//     and killed whole by writing cgroup.kill (Linux 5.14). It is counted
//     by pids.current where the pids controller is enabled, else by its
//     threads (cgroup.threads).
//   - cgroup v1 (the root holds one directory per controller, as on
//     hybrid hierarchies): a cgroup in the freezer and pids controllers.
//     The supervisor steps into it to fork the job and back out; the kill
//     freezes it, SIGKILLs every process in it and thaws it. pids.current
//     counts.
//
// Where neither can be made (no such controllers, no permission, an older
// kernel), the supervisor warns once and falls back to the process group.

// cgroupControllers are the v1 controllers an attempt's cgroup is made in:
// the freezer first (it is what kills), then pids (what counts).
var cgroupControllers = []string{"freezer", "pids"}

// cgroupHost is the cgroup hierarchy that attempts' cgroups are made in.
type cgroupHost struct {
	root string
	v2   bool
	// home is, on v1, the supervisor's own cgroup under each of
	// cgroupControllers (from /proc/self/cgroup), to go back to after it
	// has started a job from inside the job's cgroup.
	home []string
}

// openCgroups finds the hierarchy at root: v2 if root is a cgroup2 mount
// (by its filesystem's magic number), else v1's freezer and pids
// controllers under it. It fails where attempts cannot get cgroups there.
func openCgroups(root string) (*cgroupHost, error) {
	if root == "" {
		root = DefaultCgroupRoot
	}
	var st unix.Statfs_t
	if err := unix.Statfs(root, &st); err != nil {
		return nil, fmt.Errorf("no cgroup hierarchy at %s: %w", root, err)
	}
	if st.Type == unix.CGROUP2_SUPER_MAGIC {
		if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
			return nil, fmt.Errorf("%s is a cgroup2 mount without cgroup.procs: %w", root, err)
		}
		return &cgroupHost{root: root, v2: true}, nil
	}
	home, err := ownCgroups(root)
	if err != nil {
		return nil, err
	}
	return &cgroupHost{root: root, home: home}, nil
}

// attemptCgroup is an attempt's cgroup: on v1 one directory per
// controller, on v2 one directory.
type attemptCgroup struct {
	v2   bool
	dirs []string // v1: <root>/<controller>/qshare-<data>/<attemptID>; v2: <root>/qshare-<data>/<attemptID>
	fd   int      // v2: the directory, open until the job is cloned into it; -1 otherwise
}

// cgroupParent returns the directory, under each controller, of the
// attempts of the data directory dataDir: a name of its own per data
// directory, so that two servers' attempts of one ID never meet.
func cgroupParent(dataDir string) string {
	sum := sha256.Sum256([]byte(dataDir))
	return "qshare-" + hex.EncodeToString(sum[:6])
}

// attemptDir is the directory of attempt id's cgroup (on v1, the
// freezer's).
func (h *cgroupHost) attemptDir(dataDir, id string) string {
	if h.v2 {
		return filepath.Join(h.root, cgroupParent(dataDir), id)
	}
	return filepath.Join(h.root, cgroupControllers[0], cgroupParent(dataDir), id)
}

// newAttempt makes the cgroup of attempt id.
func (h *cgroupHost) newAttempt(dataDir, id string) (*attemptCgroup, error) {
	if err := pathComponent("attempt ID", id); err != nil {
		return nil, err
	}
	if h.v2 {
		return h.newAttemptV2(dataDir, id)
	}
	c := &attemptCgroup{fd: -1}
	for _, ctl := range cgroupControllers {
		base := filepath.Join(h.root, ctl)
		if st, err := os.Stat(filepath.Join(base, "cgroup.procs")); err != nil || !st.Mode().IsRegular() {
			c.remove()
			return nil, fmt.Errorf("no cgroup v1 %s controller at %s", ctl, base)
		}
		d := filepath.Join(base, cgroupParent(dataDir), id)
		if err := mkdirCgroup(d, os.MkdirAll); err != nil {
			c.remove()
			return nil, err
		}
		c.dirs = append(c.dirs, d)
	}
	return c, nil
}

// mkdirCgroup makes the cgroup directory d with mkdir, trying again a few
// times where a directory above it was removed meanwhile: the supervisor
// of a server that stopped removes the data directory's parent cgroup
// (removeParent) once it is empty, while the next server's may be making
// its first attempt's there.
func mkdirCgroup(d string, mkdir func(string, os.FileMode) error) error {
	err := mkdir(d, 0o755)
	for try := 0; errors.Is(err, os.ErrNotExist) && try < 5; try++ {
		err = mkdir(d, 0o755)
	}
	return err
}

// removeParent removes the cgroup directory of the data directory's
// attempts (cgroupParent) where it is empty: the supervisor does it as it
// exits, its attempts over, so that a host that ran many servers (a test
// run makes one per test) is not left with a directory for each. One that
// still holds an attempt's cgroup (another supervisor's, of the same data
// directory) stays: the kernel refuses to remove it.
func (h *cgroupHost) removeParent(dataDir string) {
	if h.v2 {
		os.Remove(filepath.Join(h.root, cgroupParent(dataDir))) //nolint:errcheck // busy, or gone: either is fine
		return
	}
	for _, ctl := range cgroupControllers {
		os.Remove(filepath.Join(h.root, ctl, cgroupParent(dataDir))) //nolint:errcheck // as above
	}
}

// newAttemptV2 makes the v2 cgroup of attempt id, with the pids
// controller where the hierarchy has it, and opens it for the clone.
func (h *cgroupHost) newAttemptV2(dataDir, id string) (*attemptCgroup, error) {
	parent := filepath.Join(h.root, cgroupParent(dataDir))
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return nil, err
	}
	// Counting by pids.current needs the controller enabled from the root
	// down; without it, the threads are counted.
	if b, _ := os.ReadFile(filepath.Join(h.root, "cgroup.controllers")); slices.Contains(strings.Fields(string(b)), "pids") {
		os.WriteFile(filepath.Join(h.root, "cgroup.subtree_control"), []byte("+pids"), 0) //nolint:errcheck // best effort: counting falls back to the threads
		os.WriteFile(filepath.Join(parent, "cgroup.subtree_control"), []byte("+pids"), 0) //nolint:errcheck // as above
	}
	d := filepath.Join(parent, id)
	if err := mkdirCgroup(d, func(d string, perm os.FileMode) error {
		if err := os.Mkdir(d, perm); errors.Is(err, os.ErrNotExist) {
			return os.MkdirAll(d, perm) // the parent went meanwhile (removeParent)
		} else if !errors.Is(err, os.ErrExist) {
			return err
		}
		return nil
	}); err != nil {
		return nil, err
	}
	c := &attemptCgroup{v2: true, dirs: []string{d}, fd: -1}
	if _, err := os.Stat(filepath.Join(d, "cgroup.kill")); err != nil {
		c.remove()
		return nil, fmt.Errorf("the cgroup v2 hierarchy at %s has no cgroup.kill (it needs Linux 5.14): %w", h.root, err)
	}
	fd, err := unix.Open(d, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		c.remove()
		return nil, err
	}
	c.fd = fd
	return c, nil
}

// cloneInto makes a fork with sys start inside the cgroup (v2; nothing
// on v1, where the supervisor enters the cgroup instead).
func (c *attemptCgroup) cloneInto(sys *syscall.SysProcAttr) {
	if c.v2 && c.fd >= 0 {
		sys.UseCgroupFD, sys.CgroupFD = true, c.fd
	}
}

// forked closes what the fork needed (v2: the directory's descriptor).
func (c *attemptCgroup) forked() {
	if c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
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

// count returns how many tasks the attempt holds (pids.current; on a v2
// hierarchy without the pids controller, its threads).
func (c *attemptCgroup) count() int {
	b, err := os.ReadFile(filepath.Join(c.dirs[len(c.dirs)-1], "pids.current"))
	if err != nil {
		if c.v2 {
			b, _ = os.ReadFile(filepath.Join(c.dirs[0], "cgroup.threads"))
			return len(strings.Fields(string(b)))
		}
		return len(c.procs())
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return n
}

// kill kills every process in the cgroup. It returns once the cgroup is
// empty, or an error after 10 s.
func (c *attemptCgroup) kill() error {
	if c.v2 {
		return c.killV2()
	}
	return c.killV1()
}

// killV2 writes cgroup.kill, which SIGKILLs every process of the cgroup
// and of the cgroups below it at once, forks included, and waits for
// cgroup.events to say it is no longer populated.
func (c *attemptCgroup) killV2() error {
	deadline := time.Now().Add(10 * time.Second)
	for d := time.Millisecond; ; d = min(2*d, 50*time.Millisecond) {
		if b, err := os.ReadFile(filepath.Join(c.dirs[0], "cgroup.events")); err != nil || strings.Contains(string(b), "populated 0") {
			return nil // gone, or empty
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes survive cgroup.kill in %s", len(c.procs()), c.dirs[0])
		}
		if err := os.WriteFile(filepath.Join(c.dirs[0], "cgroup.kill"), []byte("1"), 0); err != nil {
			return fmt.Errorf("killing the attempt's cgroup: %w", err)
		}
		time.Sleep(d)
	}
}

// killV1 freezes the cgroup, so none can fork while the others die, then
// SIGKILLs each process, then thaws it so that the signal is delivered.
func (c *attemptCgroup) killV1() error {
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
	c.forked()
	var errs []error
	for _, d := range c.dirs {
		// A task that has just exited (a child whose exec failed, reaped
		// already) can keep a v1 cgroup busy for a moment after.
		err := os.Remove(d)
		for wait := time.Millisecond; errors.Is(err, syscall.EBUSY) && wait < time.Second; wait *= 2 {
			time.Sleep(wait)
			err = os.Remove(d)
		}
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ownCgroups returns the supervisor's own cgroup under each of
// cgroupControllers of the v1 hierarchy at root (from /proc/self/cgroup),
// to go back to after it started a job from inside the job's cgroup.
func ownCgroups(root string) ([]string, error) {
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
		out = append(out, filepath.Join(root, ctl, p))
	}
	return out, nil
}
