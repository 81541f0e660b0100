package executor

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// A LogFile's tail: without follow it ends at what the file held at
// StopHere; with follow it waits for the file to be created and written,
// and ends with all of it once the attempt has ended; Close ends a Read
// that waits.
func TestLogTail(t *testing.T) {
	path := filepath.Join(t.TempDir(), "output.log")
	open := func() (*os.File, error) {
		f, err := os.Open(path)
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return f, err
	}
	var ended atomic.Bool
	follow, err := OpenLogFile(open, ended.Load)
	if err != nil {
		t.Fatal(err)
	}
	r := NewLogTail(context.Background(), follow, true, time.Millisecond)
	got := make(chan string)
	go func() {
		b, err := io.ReadAll(r)
		if err != nil {
			t.Error(err)
		}
		got <- string(b)
	}()
	if err := os.WriteFile(path, []byte("one\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	now, err := OpenLogFile(open, ended.Load)
	if err != nil {
		t.Fatal(err)
	}
	now.StopHere()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("two\n")
	if b, err := io.ReadAll(NewLogTail(context.Background(), now, false, time.Millisecond)); err != nil || string(b) != "one\n" {
		t.Errorf("without follow: %q, %v; want what was written by StopHere", b, err)
	}
	f.WriteString("three\n")
	f.Close()
	ended.Store(true)
	if s := <-got; s != "one\ntwo\nthree\n" {
		t.Errorf("with follow: %q, want all that was written", s)
	}
	r.Close()

	waiting, _ := OpenLogFile(open, func() bool { return false })
	r = NewLogTail(context.Background(), waiting, true, time.Hour)
	go func() {
		time.Sleep(10 * time.Millisecond)
		r.Close()
	}()
	if b, err := io.ReadAll(r); err != nil || len(b) != len("one\ntwo\nthree\n") {
		t.Errorf("a follow closed while it waits: %q, %v", b, err)
	}
}
