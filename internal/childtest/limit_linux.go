package childtest

import (
	"syscall"
	"testing"
)

// SetFileSizeLimit sets the soft file size limit (RLIMIT_FSIZE) of the
// process to n bytes, the way a full disk behaves: a write past it fails
// with EFBIG (the Go runtime ignores SIGXFSZ). It is for a child's test
// (see Run): the limit holds for the whole process. restore sets the limit
// back to what it was before this call.
func SetFileSizeLimit(t *testing.T, n uint64) (restore func()) {
	t.Helper()
	var old syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_FSIZE, &old); err != nil {
		t.Fatal(err)
	}
	set := func(l syscall.Rlimit) {
		if err := syscall.Setrlimit(syscall.RLIMIT_FSIZE, &l); err != nil {
			t.Fatal(err)
		}
	}
	small := old
	small.Cur = n
	set(small)
	return func() { set(old) }
}
