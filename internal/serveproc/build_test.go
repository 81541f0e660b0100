package serveproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"qshare/internal/longtest"
)

// TestCopyExecutableWhileForking: a binary that CopyExecutable has just
// copied runs at once, while other goroutines start processes without
// pause. A copy written through a descriptor of this process failed here
// with "text file busy" within the first 60 runs in each of three tries
// (the child of a fork made while the file was open still held it), as a
// CI run's bench test did; the copy by a child process of its own passed
// 600 runs.
func TestCopyExecutableWhileForking(t *testing.T) {
	prog, err := exec.LookPath("true")
	if err != nil {
		t.Skip("no true program to copy")
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	for range 3 {
		wg.Go(func() {
			for {
				select {
				case <-stop:
					return
				default:
					exec.Command(prog).Run()
				}
			}
		})
	}
	dir := t.TempDir()
	to := filepath.Join(dir, "true")
	for i := range longtest.Pick(60, 600) {
		if err := CopyExecutable(prog, to); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(to).CombinedOutput(); err != nil {
			t.Fatalf("run %d of the copy: %v %s", i, err, out)
		}
	}
	part := filepath.Join(dir, "written")
	if err := WriteExecutable(part, []byte("#!/bin/sh\necho written\n")); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(part).Output(); err != nil || string(out) != "written\n" {
		t.Fatalf("the written script: %q %v", out, err)
	}
	if _, err := os.Stat(part + ".part"); !os.IsNotExist(err) {
		t.Errorf("WriteExecutable left its part file: %v", err)
	}
}
