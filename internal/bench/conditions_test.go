package bench

import (
	"bytes"
	"os"
	"runtime"
	"strings"
	"testing"
)

// TestConditions: the e2e report names the file system of its directories
// and the load average, and its table prints them.
func TestConditions(t *testing.T) {
	if fsName(0xEF53) != "ext4" || fsName(0x01021994) != "tmpfs" || fsName(0x1234) != "0x1234" {
		t.Errorf("fsName: %q %q %q", fsName(0xEF53), fsName(0x01021994), fsName(0x1234))
	}
	if runtime.GOOS == "linux" {
		if fs := FileSystem(t.TempDir()); fs == "" {
			t.Error("FileSystem of a temporary directory is empty")
		}
		if _, err := os.Stat("/dev/shm"); err == nil {
			if fs := FileSystem("/dev/shm"); fs != "tmpfs" {
				t.Errorf("/dev/shm is on %q, not tmpfs", fs)
			}
		}
		if FileSystem("/no/such/dir") != "" {
			t.Error("FileSystem of a missing directory is not empty")
		}
		if LoadAverage() < 0 {
			t.Error("no load average on Linux")
		}
	}
	report, err := Aggregate([]any{
		E2EResult{Jobs: 1, TmpDir: "/tmp", TmpFS: "ext4", LoadAvg: 0.5},
		E2EResult{Jobs: 1, TmpDir: "/tmp", TmpFS: "ext4", LoadAvg: 1.5},
	})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := Table(&b, "e2e", report, E2ERows()); err != nil {
		t.Fatal(err)
	}
	table := strings.Join(strings.Fields(b.String()), " ")
	for _, want := range []string{"$TMPDIR (data of both halves) /tmp", "its file system ext4", "load average at start (1 min) 1.00 0.50–1.50"} {
		if !strings.Contains(table, want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}
