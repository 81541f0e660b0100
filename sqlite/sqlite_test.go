package sqlite_test

import (
	"path/filepath"
	"strings"
	"testing"

	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// openIn returns a storetest open function that keeps each test's database
// under dir, named after the test, so that a second open in one test opens
// the same file again.
func openIn(dir string, opts ...sqlite.Option) func(t *testing.T) store.Store {
	return func(t *testing.T) store.Store {
		path := filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"), "qshare.db")
		d, err := sqlite.Open(path, opts...)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		t.Cleanup(func() {
			if err := d.Close(); err != nil {
				t.Errorf("Close: %v", err)
			}
		})
		return d
	}
}

func TestConformance(t *testing.T) {
	storetest.Run(t, openIn(t.TempDir()))
}

// TestConformanceNoGroupCommit runs the suite with one transaction per
// commit, the path the group-commit writer takes when it is not loaded.
func TestConformanceNoGroupCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	storetest.Run(t, openIn(t.TempDir(), sqlite.WithMaxBatch(1)))
}
