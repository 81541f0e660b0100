package sqlite_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"qshare"
	"qshare/internal/childtest"
	"qshare/sqlite"
	"qshare/store"
)

// TestDiskFull makes writes to the database fail for real, the way a full
// disk does, and checks that a failed commit applies nothing, says why, and
// that the store works again once the disk has room. It lowers the process's
// file size limit (RLIMIT_FSIZE: a write past it fails with EFBIG, and the Go
// runtime ignores SIGXFSZ), so it runs in a child process of its own.
func TestDiskFull(t *testing.T) {
	t.Parallel()
	childtest.Run(t, "TestDiskFullChild", diskFullChildEnv, filepath.Join(t.TempDir(), "qshare.db"))
}

const diskFullChildEnv = "QSHARE_SQLITE_DISKFULL_CHILD_DB"

func TestDiskFullChild(t *testing.T) {
	path := childtest.Arg(t, diskFullChildEnv, "TestDiskFull")
	ctx := context.Background()
	d, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	before := &store.Change{PutJobs: bigJobs("before", 10)}
	if err := d.Commit(ctx, before); err != nil {
		t.Fatal(err)
	}
	want, err := d.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}

	// Let no file grow past its present size.
	var largest int64
	for _, suffix := range []string{"", "-wal", "-shm"} {
		if fi, err := os.Stat(path + suffix); err == nil {
			largest = max(largest, fi.Size())
		}
	}
	restore := childtest.SetFileSizeLimit(t, uint64(largest))

	// A large change cannot fit; small ones beside it, in the same
	// batches, must fail or succeed whole.
	big := &store.Change{PutJobs: bigJobs("big", 3000), DeleteJobs: []string{"before-000001"}}
	var wg sync.WaitGroup
	var mu sync.Mutex
	smallOK := map[string]bool{}
	for g := range 8 {
		wg.Go(func() {
			c := &store.Change{PutJobs: bigJobs(fmt.Sprint("small", g), 1)}
			err := d.Commit(ctx, c)
			mu.Lock()
			smallOK[c.PutJobs[0].ID] = err == nil
			mu.Unlock()
		})
	}
	err = d.Commit(ctx, big)
	wg.Wait()
	if err == nil {
		t.Fatal("a commit larger than the room on disk succeeded")
	}
	t.Logf("the failed commit said: %v", err)
	if !strings.Contains(err.Error(), path) {
		t.Errorf("the error does not name the database: %v", err)
	}
	if !errors.Is(err, syscall.EFBIG) && !strings.Contains(err.Error(), "disk") && !strings.Contains(err.Error(), "full") {
		t.Errorf("the error does not say what went wrong: %v", err)
	}
	if !strings.Contains(err.Error(), "free space") {
		t.Errorf("the error does not say how to fix it: %v", err)
	}
	// Again, on the connection the store opened after the failure.
	if err := d.Commit(ctx, big); err == nil {
		t.Fatal("the second large commit succeeded")
	}
	got, err := d.Load(ctx)
	if err != nil {
		t.Fatalf("Load while the disk is full: %v", err)
	}
	ids := map[string]bool{}
	for _, j := range got.Jobs {
		ids[j.ID] = true
	}
	for _, j := range want.Jobs {
		if !ids[j.ID] {
			t.Errorf("job %s, committed before the disk filled up, is gone", j.ID)
		}
	}
	for id, ok := range smallOK {
		if ids[id] != ok {
			t.Errorf("small commit %s returned ok=%v but is present=%v", id, ok, ids[id])
		}
	}
	if len(got.Jobs) != len(want.Jobs)+countTrue(smallOK) {
		t.Errorf("after the failed commits the store holds %d jobs, want %d: part of a failed change is visible", len(got.Jobs), len(want.Jobs)+countTrue(smallOK))
	}

	// With a limit of zero every write fails, however small: this is how a
	// test can fail the writes of a running server from outside
	// (prlimit --pid PID --fsize=0).
	childtest.SetFileSizeLimit(t, 0)
	if err := d.Commit(ctx, &store.Change{PutJobs: bigJobs("tiny", 1)}); err == nil {
		t.Fatal("a commit succeeded with a file size limit of zero")
	}

	// Room again: the store recovers without being reopened.
	restore()
	if err := d.Commit(ctx, big); err != nil {
		t.Fatalf("commit after the disk has room again: %v", err)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d2, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	got, err = d2.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(want.Jobs) + countTrue(smallOK) + len(big.PutJobs) - 1; len(got.Jobs) != n {
		t.Fatalf("after recovery and reopen the store holds %d jobs, want %d", len(got.Jobs), n)
	}
	t.Logf("stats: %+v", d.Stats())
}

func countTrue(m map[string]bool) int {
	n := 0
	for _, v := range m {
		if v {
			n++
		}
	}
	return n
}

// bigJobs returns n jobs of about 2 KiB each.
func bigJobs(prefix string, n int) []qshare.Job {
	js := make([]qshare.Job, n)
	for i := range js {
		id := fmt.Sprintf("%s-%06d", prefix, i)
		js[i] = qshare.Job{ID: id, Name: id, JobQueue: "q", Status: qshare.JobSubmitted, Version: 1,
			Payload: strings.Repeat("p", 2000), CreatedAt: time.Unix(int64(i), 0).UTC()}
	}
	return js
}
