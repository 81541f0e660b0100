package process

import (
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// New marks jobs/ and attempts/ as tops of directory hierarchies where the
// file system has the attribute, so that each job's directory is placed on
// its own (see markTopDir).
func TestNewMarksTopDirectories(t *testing.T) {
	dir := t.TempDir()
	probe := filepath.Join(dir, "probe")
	os.Mkdir(probe, 0o755)
	if err := markTopDir(probe); err != nil {
		t.Skipf("this file system has no top-directory attribute: %v", err)
	}
	e := newExecutor(t, dir, nil)
	defer e.Close()
	for _, d := range []string{"jobs", "attempts"} {
		f, err := os.Open(filepath.Join(dir, d))
		if err != nil {
			t.Fatal(err)
		}
		flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS)
		f.Close()
		if err != nil || flags&fsTopdirFL == 0 {
			t.Errorf("%s: flags %#x, %v; want the top-directory attribute", d, flags, err)
		}
	}
}
