package sqlite_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/sqlite"
	"qshare/store"
)

func TestOpenTwiceRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qshare.db")
	d, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if d2, err := sqlite.Open(path); err == nil {
		d2.Close()
		t.Fatal("a second Open of a database in use succeeded")
	} else {
		if !errors.Is(err, store.ErrLocked) {
			t.Errorf("the error does not wrap store.ErrLocked: %v", err)
		}
		for _, want := range []string{path, "in use by another qshare server", fmt.Sprintf("pid %d", os.Getpid())} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not say %q (the database, that it is in use, and by whom): %v", want, err)
			}
		}
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
	d, err = sqlite.Open(path)
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	d.Close()
}

// TestOpenThroughSymlinkRefused: a database opened through a symbolic link
// to its file is the same database (SQLite follows the link, so both opens
// would share its WAL), and a second Open must be refused whichever name it
// uses: two servers on one database would each start the same jobs.
func TestOpenThroughSymlinkRefused(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "data", "qshare.db")
	d, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	link := filepath.Join(dir, "other.db")
	if err := os.Symlink(path, link); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	if err := os.Symlink(filepath.Join(dir, "data"), filepath.Join(dir, "linkdir")); err != nil {
		t.Fatal(err)
	}
	// A link made before its database exists: the first Open goes
	// through it and creates the file.
	early := filepath.Join(dir, "early.db")
	if err := os.Symlink("data/new.db", early); err != nil {
		t.Fatal(err)
	}
	d3, err := sqlite.Open(early)
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	for _, other := range []string{link, filepath.Join(dir, "linkdir", "qshare.db"), filepath.Join(dir, "data", "new.db")} {
		if d2, err := sqlite.Open(other); err == nil {
			d2.Close()
			t.Errorf("a second Open through %s, a link to a database in use, succeeded", other)
		} else if !errors.Is(err, store.ErrLocked) {
			t.Errorf("Open through %s: %v, want store.ErrLocked", other, err)
		}
	}
}

func TestOpenCreatesDirectory(t *testing.T) {
	// Characters that mean something in a URI or a DSN must reach the file name intact.
	path := filepath.Join(t.TempDir(), "a b", "c?d#e%20f&_pragma=x", "qshare.db")
	d, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Path() != path {
		t.Errorf("Path() = %q, want %q", d.Path(), path)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(dir, "garbage.db")
	if err := os.WriteFile(garbage, []byte(strings.Repeat("this is not a database\n", 400)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"empty path", "", "empty database path"},
		{"directory is a file", filepath.Join(file, "qshare.db"), "cannot create its directory"},
		{"not a database", garbage, "not a qshare database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := sqlite.Open(tc.path)
			if err == nil {
				d.Close()
				t.Fatal("Open succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("Open: %v\nwant an error that says %q", err, tc.want)
			}
		})
	}
}

func TestSchemaVersion(t *testing.T) {
	path := filepath.Join(t.TempDir(), "qshare.db")
	d, err := sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	raw, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	var n, v int
	if err := raw.QueryRow(`SELECT COUNT(*), MAX(version) FROM schema_version`).Scan(&n, &v); err != nil {
		t.Fatal(err)
	}
	if n != 4 || v != 4 {
		t.Fatalf("schema_version holds %d rows up to version %d, want 4 rows up to version 4", n, v)
	}
	// Opening again applies nothing.
	d, err = sqlite.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()
	if err := raw.QueryRow(`SELECT COUNT(*) FROM schema_version`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("reopening changed schema_version: %d rows, %v", n, err)
	}
	// A database from a newer qshare is refused, and left alone.
	if _, err := raw.ExecContext(context.Background(), `INSERT INTO schema_version (version, applied_at) VALUES (99, 'later')`); err != nil {
		t.Fatal(err)
	}
	if d, err := sqlite.Open(path); err == nil {
		d.Close()
		t.Fatal("Open accepted a database with a newer schema")
	} else if !strings.Contains(err.Error(), "newer qshare") {
		t.Errorf("the error does not say what to do: %v", err)
	}
}
