package process

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// optmlCapable reports whether this process can give a job /opt/ml of its
// own: only root can make a mount namespace and bind in it without a user
// namespace, which is not used (a user namespace would map the job's files
// to nobody).
func optmlCapable() bool { return os.Geteuid() == 0 }

// forkOptML starts the job of cfg, found by locate (cands), with attr, in a
// mount namespace of its own where the job's directory is at /opt/ml.
//
// Mounts cannot be made by syscall.ForkExec between its fork and its exec,
// so the namespace is made by a thread of the supervisor instead: a
// goroutine locked to its thread unshares that thread's mount namespace
// (and its root and working directory, which go with it), binds the job's
// directory at /opt/ml there, and forks the job from that thread, which
// the child inherits the namespace of. The thread is never handed back:
// the goroutine ends locked, so the Go runtime ends the thread with it,
// and no other goroutine ever runs in that namespace (the runtime also
// never clones a new thread from a locked one); see onDisposableThread. The job then drops to its
// user, enters its directory and executes as a job without /opt/ml does
// (forkAs): the kernel looks its program up as its user, inside the
// namespace.
//
// An earlier version re-executed the supervisor's binary as a step that
// did the same before executing the job: some 70 to 90 ms of CPU a job
// (the Go runtime's start and every package's init), most of what a
// trivial job cost (docs/executors.md, "CPU per job").
func (s *supervisor) forkOptML(cfg supervisorConfig, cands []string, attr *syscall.ProcAttr) (pid int, path string, err error) {
	// The job's directory is opened here, beneath the data directory and
	// following no link, so that what is bound is what the executor
	// prepared, whatever the job's user did to the path since.
	fd, _, err := s.fs.open("bind at /opt/ml", cfg.OptML, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return 0, "", fmt.Errorf("cannot open the job's directory to bind it at %s: %w", optmlRoot, err)
	}
	defer unix.Close(fd)
	// A detached copy of that mount, rooted at the job's directory: in a
	// mount namespace of its own, a bind from a descriptor of the host's
	// namespace is refused, but a detached tree can be attached anywhere
	// (move_mount).
	tree, err := unix.OpenTree(fd, "", unix.OPEN_TREE_CLONE|unix.O_CLOEXEC|unix.AT_EMPTY_PATH)
	if err != nil {
		return 0, "", fmt.Errorf("cannot copy the job's directory's mount to bind it at %s (open_tree needs Linux 5.2): %w", optmlRoot, err)
	}
	defer unix.Close(tree)
	onDisposableThread(func() {
		pid, path, err = forkInNamespace(tree, cands, cfg.Command, attr)
	})
	return pid, path, err
}

// onDisposableThread runs fn on a thread that ends with it, locked to it
// throughout: fn may leave the thread in a state that no other goroutine
// may run in (a job's mount namespace). That thread is never the main
// thread, which the Go runtime cannot end: a goroutine that ends locked to
// it parks it for good, in whatever state fn left.
func onDisposableThread(fn func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the runtime ends the thread when this goroutine ends
		if unix.Gettid() == unix.Getpid() {
			// The main thread: held by this goroutine, which keeps the
			// next one off it, and handed back untouched.
			onDisposableThread(fn)
			runtime.UnlockOSThread()
			return
		}
		fn()
	}()
	<-done
}

// forkInNamespace is forkOptML's work on its disposable thread, which it
// leaves in the job's mount namespace.
func forkInNamespace(tree int, cands, argv []string, attr *syscall.ProcAttr) (int, string, error) {
	// CLONE_NEWNS unshares the thread's root and working directory too
	// (CLONE_FS), which the other threads share: they keep theirs.
	if err := unix.Unshare(unix.CLONE_NEWNS); err != nil {
		return 0, "", fmt.Errorf("cannot start a mount namespace for %s: %w", optmlRoot, err)
	}
	if err := bindOptML(tree); err != nil {
		return 0, "", fmt.Errorf("cannot show the job's directory at %s: %w", optmlRoot, err)
	}
	return forkAs(cands, argv, attr)
}

// bindOptML attaches the detached mount jobFD (the job's directory) at
// /opt/ml in this thread's mount namespace, which must be the job's own,
// unshared just before. Propagation is made private first, recursively,
// so that nothing mounted here shows on the host. A host without /opt/ml
// gets the empty directory /opt/ml (0755, root's), once, as a mount point:
// nothing of the host's is hidden by a mount over a directory that exists
// there. A /opt/ml that is a link or not a directory is refused.
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
