package process

import (
	"bufio"
	"context"
	"fmt"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"qshare/executor"
)

// A follow that races a log rotating as fast as it can: every line comes
// exactly once and in order, however the rotations fall between the
// reader's looks (a rotation during a look once had a rotated file read
// twice). The writer stays fewer files ahead of the reader than are kept,
// so nothing is dropped for want of room.
func TestFollowRacesRotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := &Executor{fs: newDataFS(dir), o: Options{PollInterval: time.Millisecond}}
	defer e.fs.close()
	path := filepath.Join(dir, fileOutput)
	const lines, perFile = 4000, 4 // 1000 rotations of files of 4 lines
	line := func(i int) string { return fmt.Sprintf("line %06d\n", i) }
	w := openRotatingLog(e.fs, path, int64(perFile*len(line(0))), MaxRotated)

	a := &attempt{Slot: executor.NewSlot()}
	r := executor.NewLogTail(context.Background(), &logFiles{e: e, a: a, id: "x", dir: dir, path: path}, true, e.o.PollInterval)
	defer r.Close()
	var read atomic.Int64
	stop, stopped := make(chan struct{}), make(chan struct{})
	defer func() { close(stop); <-stopped }() // a failed test leaves no writer behind
	go func() {
		defer close(stopped)
		for i := range lines {
			for int64(i)-read.Load() > 10*perFile {
				select {
				case <-stop:
					return
				case <-time.After(10 * time.Microsecond):
				}
			}
			if _, err := w.Write([]byte(line(i))); err != nil {
				t.Error(err)
				break
			}
		}
		w.Close()
		close(a.Done)
	}()
	s := bufio.NewScanner(r)
	n := 0
	for s.Scan() {
		if got, want := s.Text()+"\n", line(n); got != want {
			t.Fatalf("line %d of the follow is %q, want %q", n, got, want)
		}
		n++
		read.Store(int64(n))
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	if n != lines {
		t.Fatalf("the follow read %d lines, want %d", n, lines)
	}
}
