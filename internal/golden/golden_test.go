package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeT records what Check reports; Fatal stops the check as testing's does.
type fakeT struct {
	msgs  []string
	fatal bool
}

func (f *fakeT) Helper()                           {}
func (f *fakeT) Fatal(args ...any)                 { f.fail(fmt.Sprint(args...)) }
func (f *fakeT) Fatalf(format string, args ...any) { f.fail(fmt.Sprintf(format, args...)) }
func (f *fakeT) Errorf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}
func (f *fakeT) fail(msg string) {
	f.msgs = append(f.msgs, msg)
	f.fatal = true
	panic(f)
}

func check(name string, got []byte, update bool) (f *fakeT) {
	f = &fakeT{}
	defer func() {
		if r := recover(); r != nil && r != f {
			panic(r)
		}
	}()
	Check(f, "pkg", name, got, update)
	return f
}

// Check rewrites with update, passes on equal bytes, and fails, saying how
// to rewrite the file, on a missing or different one.
func TestCheck(t *testing.T) {
	t.Chdir(t.TempDir())
	if err := os.Mkdir("testdata", 0o755); err != nil {
		t.Fatal(err)
	}
	if f := check("a.txt", []byte("one\n"), false); !f.fatal || !strings.Contains(f.msgs[0], "go test ./pkg -update to create it") {
		t.Fatalf("missing file: %+v", f)
	}
	if f := check("a.txt", []byte("one\n"), true); len(f.msgs) != 0 {
		t.Fatalf("update: %+v", f)
	}
	if b, err := os.ReadFile(filepath.Join("testdata", "a.txt")); err != nil || string(b) != "one\n" {
		t.Fatalf("update wrote %q, %v", b, err)
	}
	if f := check("a.txt", []byte("one\n"), false); len(f.msgs) != 0 {
		t.Fatalf("equal bytes: %+v", f)
	}
	f := check("a.txt", []byte("two\n"), false)
	if f.fatal || len(f.msgs) != 1 || !strings.Contains(f.msgs[0], "a.txt differs") || !strings.Contains(f.msgs[0], "--- got:\ntwo\n") || !strings.Contains(f.msgs[0], "--- want:\none\n") {
		t.Fatalf("different bytes: %+v", f)
	}
}
