package process

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// optmlEnv turns a binary into the step between the supervisor and a job
// that runs with /opt/ml: the supervisor forks its own binary with it set,
// as root and in a new mount namespace, and that step binds the job's
// directory at /opt/ml, drops to the job's user and executes the job.
// Mounts cannot be made by syscall.ForkExec between its unshare and its
// exec, hence the step.
const optmlEnv = "QSHARE_OPTML_EXEC"

// The descriptors the step is given after stdin, stdout and stderr.
const (
	optmlJobFD  = 3 // a detached mount of the job's directory, opened beneath the data directory
	optmlSpecFD = 4 // a pipe carrying the optmlSpec, as JSON
	// optmlErrFD is a pipe closed on exec: the step writes there why the
	// job could not start, and the supervisor reads it to the end (EOF
	// alone: the job runs), as syscall.ForkExec does for its own errors.
	optmlErrFD = 5
)

// optmlSpec is what the step executes once /opt/ml is bound.
type optmlSpec struct {
	// Cands are the programs to try in turn, as forkAs does.
	Cands []string `json:"cands"`
	Argv  []string `json:"argv"`
	Env   []string `json:"env"`
	Dir   string   `json:"dir"`
	User  *jobUser `json:"user,omitempty"`
}

// optmlCapable reports whether this process can give a job /opt/ml of its
// own: only root can make a mount namespace and bind in it without a user
// namespace, which the step does not use (a user namespace would map the
// job's files to nobody).
func optmlCapable() bool { return os.Geteuid() == 0 }

// forkOptML starts the job of cfg through the step: attr is what the job
// would have been started with. why is "" once the job runs, or why it
// did not (the step then exits 127); the caller reads it after the fork. The step is the supervisor's own binary
// (/proc/self/exe, which names it even after an upgrade replaced the file),
// forked with CLONE_NEWNS and without attr's credentials: it must be root
// to mount, and drops to cfg.User itself before the job runs.
func (s *supervisor) forkOptML(cfg supervisorConfig, cands []string, attr *syscall.ProcAttr) (pid int, path string, why func() string, err error) {
	// The job's directory is opened here, beneath the data directory and
	// following no link, so that the step binds what the executor
	// prepared, whatever the job's user did to the path since.
	fd, _, err := s.fs.open("bind at /opt/ml", cfg.OptML, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, "", nil, fmt.Errorf("cannot open the job's directory to bind it at %s: %w", optmlRoot, err)
	}
	defer unix.Close(fd)
	// A detached copy of that mount, rooted at the job's directory: the
	// step is in a mount namespace of its own, where a bind from a
	// descriptor of the host's namespace is refused, but a detached tree
	// can be attached anywhere (move_mount).
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return 0, "", nil, fmt.Errorf("cannot copy the job's directory's mount to bind it at %s (open_tree needs Linux 5.2): %w", optmlRoot, err)
	}
	defer unix.Close(tree)
	b, err := json.Marshal(optmlSpec{Cands: cands, Argv: cfg.Command, Env: cfg.Env, Dir: cfg.Dir, User: cfg.User})
	if err != nil {
		return 0, "", nil, err
	}
	pr, pw, err := os.Pipe()
	if err != nil {
		return 0, "", nil, err
	}
	defer pr.Close()
	er, ew, err := os.Pipe()
	if err != nil {
		pw.Close()
		return 0, "", nil, err
	}
	defer ew.Close()
	sys := *attr.Sys
	sys.Credential = nil
	sys.Unshareflags |= unix.CLONE_NEWNS // Go marks / MS_REC|MS_PRIVATE in the child at once
	step := &syscall.ProcAttr{
		Dir:   "/",
		Env:   []string{optmlEnv + "=1"},
		Files: []uintptr{attr.Files[0], attr.Files[1], attr.Files[2], uintptr(tree), pr.Fd(), ew.Fd()},
		Sys:   &sys,
	}
	pid, err = syscall.ForkExec("/proc/self/exe", []string{cfg.Command[0]}, step)
	if err != nil {
		pw.Close()
		er.Close()
		return 0, "", nil, fmt.Errorf("cannot start a mount namespace for /opt/ml: %w", err)
	}
	go func() {
		pw.Write(b) // a step that died early gets EPIPE, which the supervisor handles
		pw.Close()
	}()
	why = func() string {
		b, _ := io.ReadAll(er)
		er.Close()
		return strings.TrimSpace(string(b))
	}
	return pid, cands[0], why, nil
}

// runOptMLStep is the step of forkOptML, in the new mount namespace. It
// never returns: it executes the job, or exits 127 after saying why on
// stderr, which is the job's log.
func runOptMLStep() {
	unix.CloseOnExec(optmlErrFD)
	fail := func(format string, args ...any) {
		msg := "CannotStartError: " + fmt.Sprintf(format, args...)
		fmt.Fprintln(os.Stderr, "qshare: "+msg)
		unix.Write(optmlErrFD, []byte(msg))
		os.Exit(127)
	}
	f := os.NewFile(optmlSpecFD, "spec")
	b, err := io.ReadAll(f)
	f.Close() // through f, so that no finalizer closes the number again
	if err != nil {
		fail("reading what to run: %v", err)
	}
	var sp optmlSpec
	if err := json.Unmarshal(b, &sp); err != nil || len(sp.Argv) == 0 || len(sp.Cands) == 0 {
		fail("bad instructions from the supervisor: %v", err)
	}
	if err := bindOptML(optmlJobFD); err != nil {
		fail("cannot show the job's directory at %s: %v", optmlRoot, err)
	}
	unix.Close(optmlJobFD)
	if u := sp.User; u != nil {
		groups := make([]int, len(u.Groups))
		for i, g := range u.Groups {
			groups[i] = int(g)
		}
		if err := syscall.Setgroups(groups); err != nil {
			fail("setgroups: %v", err)
		}
		if err := syscall.Setgid(int(u.GID)); err != nil {
			fail("setgid %d: %v", u.GID, err)
		}
		if err := syscall.Setuid(int(u.UID)); err != nil {
			fail("setuid %d: %v", u.UID, err)
		}
	}
	// Entered with the job's rights, as the supervisor's fork does.
	if err := os.Chdir(sp.Dir); err != nil {
		fail("%v", err)
	}
	for _, p := range sp.Cands {
		if err = syscall.Exec(p, sp.Argv, sp.Env); !notThisOne(err) {
			fail("cannot run %s: %v", p, err)
		}
	}
	fail("cannot run %q: %v", sp.Argv[0], errUnseen)
}

// bindOptML attaches the detached mount jobFD (the job's directory) at /opt/ml in this mount
// namespace, which must be the step's own. Propagation is made private
// again first (Go's fork did it already), so that nothing mounted here
// shows on the host. A host without /opt/ml gets the empty directory
// /opt/ml (0755, root's), once, as a mount point: nothing of the host's is
// hidden by a mount over a directory that exists there. A /opt/ml that is
// a link or not a directory is refused.
func bindOptML(jobFD int) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("making mount propagation private: %w", err)
	}
	for _, d := range []string{"/opt", optmlRoot} {
		if err := unix.Mkdir(d, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("creating the mount point %s: %w", d, err)
		}
	}
	target, err := unix.Open(optmlRoot, unix.O_PATH|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%s is not a directory: %w", optmlRoot, err)
	}
	defer unix.Close(target)
	// Both through their descriptors: the source is what the supervisor
	// opened beneath the data directory, the target what was just checked.
	return unix.MoveMount(jobFD, "", target, "", unix.MOVE_MOUNT_F_EMPTY_PATH|unix.MOVE_MOUNT_T_EMPTY_PATH)
}
