package storetest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"qshare"
	"qshare/store"
)

// Exclusive ownership (see store.Store): a second open of storage that is
// open fails with store.ErrLocked, both in this process and from another
// one, and ownership ends with Close or with the owner's death.

// holdEnv names, in a child process started by testExclusiveAfterCrash, the
// location the child must open and hold until it is killed.
const holdEnv = "QSHARE_STORETEST_HOLD"

// heldLine is what the child prints once it owns the store.
const heldLine = "storetest: the child holds the store"

// childMarker is the job the child commits while it holds the store, so the
// parent can tell its writes were durable.
var childMarker = qshare.Job{ID: "held-by-child", Name: "held-by-child", JobQueue: "q", Status: qshare.JobRunnable, Version: 1, CreatedAt: base}

// holdChild is the child's side of testExclusiveAfterCrash. In the child
// (holdEnv is set), it runs the one subtest the parent asked for, which
// opens the location, commits childMarker, says so on stdout and waits to be
// killed; it then reports true, and Run runs nothing else. In any other
// process it reports false.
func holdChild(t *testing.T, open func(context.Context, string) (store.Store, error)) bool {
	loc := os.Getenv(holdEnv)
	if loc == "" {
		return false
	}
	t.Run("ExclusiveAfterCrash", func(t *testing.T) {
		s, err := open(context.Background(), loc)
		if err != nil {
			fmt.Fprintln(os.Stderr, "storetest child: open:", err)
			os.Exit(2)
		}
		if err := s.Commit(context.Background(), &store.Change{PutJobs: []qshare.Job{childMarker}}); err != nil {
			fmt.Fprintln(os.Stderr, "storetest child: commit:", err)
			os.Exit(3)
		}
		fmt.Fprintln(os.Stdout, heldLine)
		// The parent kills the child long before this; the bound only keeps a
		// child whose parent died from lingering.
		time.Sleep(time.Minute)
		os.Exit(4)
	})
	return true
}

// testExclusive opens the storage a second time while it is open.
func testExclusive(t *testing.T, h *harness) {
	h.commit(fullChange())
	for try := range 2 { // a refused open must not weaken the owner's hold
		s2, err := h.openFn(context.Background(), h.loc)
		if err == nil {
			if s2 != nil {
				s2.Close()
			}
			t.Fatalf("open %d of storage that is open succeeded; want an error wrapping store.ErrLocked", try+2)
		}
		if !errors.Is(err, store.ErrLocked) {
			t.Fatalf("open %d of storage that is open failed with %q, which does not wrap store.ErrLocked", try+2, err)
		}
		if s2 != nil {
			t.Errorf("a refused open returned a Store (%T) as well as its error", s2)
		}
		if try == 0 {
			t.Logf("the second open says: %v", err)
		}
	}
	// The owner is untouched by the refused opens.
	h.commit(&store.Change{PutJobs: []qshare.Job{job(1, base)}})
	h.check()
	if err := h.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	h.s = h.open() // free again after Close
	h.check()
}

// retryLocked calls open until it fails with no store.ErrLocked, for up
// to 20 s: a store or log whose lock lives in a server (PostgreSQL's
// session lock) frees it when that server notices a killed owner's
// dead connection, which on a loaded machine can take a moment after
// the kill. Any other error is not retried.
func retryLocked(open func() error) error {
	err := open()
	for deadline := time.Now().Add(20 * time.Second); errors.Is(err, store.ErrLocked) && time.Now().Before(deadline); {
		time.Sleep(200 * time.Millisecond)
		err = open()
	}
	return err
}

// testExclusiveAfterCrash runs the test binary again as a child that opens
// the storage and holds it; while it lives, this process cannot open it;
// once it is killed (SIGKILL: it gets no chance to release anything), this
// process opens it, with what the child committed.
func testExclusiveAfterCrash(t *testing.T, h *harness) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	h.commit(fullChange())
	if err := h.s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	cmd, stdout, stderr := StartChild(t, runPattern(t.Name()), holdEnv+"="+h.loc)
	held := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if sc.Text() == heldLine {
				held <- true
				break
			}
		}
		close(held)
		for sc.Scan() { // keep the pipe drained
		}
	}()
	select {
	case ok := <-held:
		if !ok {
			err := cmd.Wait()
			t.Fatalf("the child ended (%v) without holding the store: %s", err, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the child did not hold the store within 60 s: %s", stderr.String())
	}

	// Owned by another process: refused.
	if s2, err := h.openFn(context.Background(), h.loc); err == nil {
		if s2 != nil {
			s2.Close()
		}
		t.Fatal("opened storage that another process holds")
	} else if !errors.Is(err, store.ErrLocked) {
		t.Fatalf("opening storage that another process holds failed with %q, which does not wrap store.ErrLocked", err)
	} else {
		t.Logf("while the child holds it, open says: %v", err)
	}

	if err := cmd.Process.Kill(); err != nil { // SIGKILL where there are signals
		t.Fatal(err)
	}
	cmd.Wait() //nolint:errcheck // killed on purpose
	if !Signaled(cmd) {
		t.Fatalf("the child ended on its own (%v) before it was killed: %s", cmd.ProcessState, stderr.String())
	}

	// The dead owner blocks nothing, and what it committed is there.
	var s store.Store
	err := retryLocked(func() (err error) {
		s, err = h.openFn(context.Background(), h.loc)
		return err
	})
	if err != nil {
		t.Fatalf("open after the owner was killed: %v", err)
	}
	h.s = s
	t.Cleanup(func() { s.Close() }) //nolint:errcheck // a second Close
	h.m.apply(&store.Change{PutJobs: []qshare.Job{childMarker}})
	h.check()
}
