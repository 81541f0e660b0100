package process

import "golang.org/x/sys/unix"

// becomeSubreaper makes the calling process the reaper of its orphaned
// descendants (PR_SET_CHILD_SUBREAPER).
func becomeSubreaper() error { return unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) }
