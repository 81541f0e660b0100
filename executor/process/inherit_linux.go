package process

import (
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseInheritedOnExec marks every descriptor above standard error
// close-on-exec. A descriptor that whoever started this process left open
// (a shell's `7</root-only-secret`, a pipe of the launcher's) is otherwise
// passed on by every fork and exec: from the server to its supervisor, and
// from the supervisor into every job, as every job's user. The descriptors
// this process opens itself are close-on-exec already (Go opens them so),
// and what a child must get it gets as its standard streams or
// exec.Cmd.ExtraFiles, which are passed whatever this flag says. qshare
// calls it first thing in the server (cmd/qshare's main), the supervisor
// (MaybeSupervise) and the Slurm step runner (slurm.MaybeStep).
//
// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11) marks them all in
// one call; where it is missing (ENOSYS, or EINVAL on 5.9 and 5.10), each
// descriptor that /proc/self/fd lists is marked, and without /proc each
// number up to the descriptor limit.
func CloseInheritedOnExec() {
	if !noCloseRange && unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC) == nil {
		return
	}
	if ents, err := os.ReadDir("/proc/self/fd"); err == nil {
		for _, e := range ents {
			if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
				setCloexec(fd)
			}
		}
		return
	}
	var lim unix.Rlimit
	max := uint64(1 << 16)
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil && lim.Cur < max {
		max = lim.Cur
	}
	for fd := 3; uint64(fd) < max; fd++ {
		setCloexec(fd)
	}
}

// noCloseRange makes CloseInheritedOnExec take its fallback, as on a kernel
// without close_range: for the tests of the fallback.
var noCloseRange = false

// setCloexec sets FD_CLOEXEC on fd if it is open.
func setCloexec(fd int) {
	if fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil && fl&unix.FD_CLOEXEC == 0 {
		unix.FcntlInt(uintptr(fd), unix.F_SETFD, fl|unix.FD_CLOEXEC) //nolint:errcheck // it was open a moment ago
	}
}
