// Package gputest fakes a host's NVIDIA GPUs for tests: an nvidia-smi script
// that answers the query the gpu package makes, as a real one would.
package gputest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/internal/serveproc"
)

// WriteFakeSMI writes an nvidia-smi script that reports n GPUs (index i, UUID
// GPU-fake-000i, an NVIDIA H200) into a new temporary directory, and returns
// that directory.
func WriteFakeSMI(t testing.TB, n int) string {
	t.Helper()
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("#!/bin/sh\necho 'index, uuid, name, memory.total [MiB]'\n")
	for i := range n {
		fmt.Fprintf(&b, "echo '%d, GPU-fake-%04d, NVIDIA H200, 143771 MiB'\n", i, i)
	}
	if err := serveproc.WriteExecutable(filepath.Join(dir, "nvidia-smi"), []byte(b.String())); err != nil {
		t.Fatal(err)
	}
	return dir
}

// FakeSMI puts a fake nvidia-smi reporting n GPUs first on PATH for the rest
// of the test.
func FakeSMI(t testing.TB, n int) {
	t.Helper()
	dir := WriteFakeSMI(t, n)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))
}
