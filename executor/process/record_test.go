package process

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The launch record is made exclusively and whole, with its live/ name, and
// leaves no temporary name behind: with an unnamed file (O_TMPFILE) where
// the kernel and the file system have it, and with a named temporary file
// where they do not.
func TestCreateRecordBothWays(t *testing.T) {
	for _, unnamed := range []bool{true, false} {
		root := t.TempDir()
		fs := newDataFS(root)
		dir := filepath.Join(root, "attempts", "j-1")
		os.MkdirAll(dir, 0o755)
		os.MkdirAll(filepath.Join(root, dirLive), 0o755)
		live := filepath.Join(root, dirLive, "j-1")
		old := noTmpfile.Load()
		noTmpfile.Store(!unnamed)
		lr := launchRecord{At: time.Unix(1, 0).UTC(), Dir: dir, GPUs: []string{"GPU-1"}}
		f, err := createRecord(fs, dir, lr, live)
		if err != nil {
			t.Fatalf("unnamed=%v: createRecord: %v", unnamed, err)
		}
		if err := appendRecord(f, recordLine{Exit: &exitRecord{ExitCode: 3, Reason: "r"}}); err != nil {
			t.Fatal(err)
		}
		f.Close()
		r := readRecords(fs, dir)
		if r.launch == nil || r.launch.Dir != dir || len(r.gpus) != 1 || r.exit == nil || r.exit.ExitCode != 3 {
			t.Errorf("unnamed=%v: records read back: %+v", unnamed, r)
		}
		a, errA := os.Lstat(filepath.Join(dir, fileLaunched))
		b, errB := os.Lstat(live)
		if errA != nil || errB != nil || !os.SameFile(a, b) {
			t.Errorf("unnamed=%v: live/ is not a second name of launched: %v, %v", unnamed, errA, errB)
		}
		if names := dirNames(t, dir); len(names) != 1 || names[0] != fileLaunched {
			t.Errorf("unnamed=%v: the attempt directory holds %v; want only %s", unnamed, names, fileLaunched)
		}
		if _, err := createRecord(fs, dir, launchRecord{Lost: true}, ""); !errors.Is(err, os.ErrExist) {
			t.Errorf("unnamed=%v: a second createRecord = %v; want ErrExist", unnamed, err)
		}
		if lr, _ := readLaunch(fs, dir); lr.Lost || lr.Dir != dir {
			t.Errorf("unnamed=%v: the second createRecord changed the record: %+v", unnamed, lr)
		}
		if names := dirNames(t, dir); len(names) != 1 {
			t.Errorf("unnamed=%v: after the refused create the attempt directory holds %v", unnamed, names)
		}
		noTmpfile.Store(old)
	}
}

// The toolkit's files: created exclusively in a fresh directory, left alone
// on a later attempt when they hold the same bytes, and otherwise replaced,
// never written through, whatever a job planted in their place.
func TestWriteConfig(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	fs := newDataFS(root)
	cfg := filepath.Join(root, "jobs", "j", "input", "config")
	os.MkdirAll(cfg, 0o755)
	p := filepath.Join(cfg, "hyperparameters.json")
	read := func() string { b, _ := os.ReadFile(p); return string(b) }
	if err := writeConfig(fs, p, map[string]string{"a": "1"}, 0o600, true); err != nil || read() != `{"a":"1"}` {
		t.Fatalf("fresh: %v, %q", err, read())
	}
	before, _ := os.Lstat(p)
	if err := writeConfig(fs, p, map[string]string{"a": "1"}, 0o600, false); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Lstat(p); !os.SameFile(before, after) {
		t.Errorf("a file that held the same bytes was written again")
	}
	if err := writeConfig(fs, p, map[string]string{"a": "2"}, 0o600, false); err != nil || read() != `{"a":"2"}` {
		t.Errorf("changed: %v, %q", err, read())
	}
	// Planted: a symbolic link, then a hard link to a file outside, each
	// holding the very bytes qshare writes; and something in a "fresh"
	// directory.
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte(`{"a":"2"}`), 0o600)
	os.Remove(p)
	os.Symlink(secret, p)
	if err := writeConfig(fs, p, map[string]string{"a": "2"}, 0o600, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Lstat(p); !st.Mode().IsRegular() {
		t.Errorf("a planted symbolic link was left in place")
	}
	os.Remove(p)
	if err := os.Link(secret, p); err == nil {
		if err := writeConfig(fs, p, map[string]string{"a": "2"}, 0o600, false); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Lstat(p); nlink(st) != 1 {
			t.Errorf("a planted hard link was left in place")
		}
	}
	os.Remove(p)
	os.Symlink(secret, p)
	if err := writeConfig(fs, p, map[string]string{"a": "3"}, 0o600, true); err != nil || read() != `{"a":"3"}` {
		t.Errorf("fresh over a planted link: %v, %q", err, read())
	}
	if b, _ := os.ReadFile(secret); string(b) != `{"a":"2"}` {
		t.Errorf("the file outside was written through a link: %q", b)
	}
}

// MkdirBelow makes the missing directories below an existing one, and
// refuses a link on the way as MkdirAll does.
func TestMkdirBelow(t *testing.T) {
	root, outside := t.TempDir(), t.TempDir()
	fs := newDataFS(root)
	job := filepath.Join(root, "jobs", "j")
	os.MkdirAll(job, 0o755)
	var made []string
	if err := fs.MkdirBelow(job, filepath.Join(job, "a", "b"), 0o755, func(d string) error { made = append(made, d); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(made) != 2 || !fs.IsDir(filepath.Join(job, "a", "b")) {
		t.Errorf("made %v", made)
	}
	os.Symlink(outside, filepath.Join(job, "l"))
	if err := fs.MkdirBelow(job, filepath.Join(job, "l", "x"), 0o755, nil); !isLinkErr(err) {
		t.Errorf("MkdirBelow through a link = %v", err)
	}
	if names := dirNames(t, outside); len(names) != 0 {
		t.Errorf("outside holds %v", names)
	}
}
