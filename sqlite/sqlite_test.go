package sqlite_test

import (
	"context"
	"path/filepath"
	"testing"

	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// TestConformance runs the store suite on SQLite as the server opens it: by
// URL, through a store.Registry with the scheme sqlite registered.
func TestConformance(t *testing.T) {
	var reg store.Registry
	reg.Register(sqlite.Scheme, sqlite.OpenURL)
	storetest.Run(t, func(t *testing.T) string {
		u, err := sqlite.URL(filepath.Join(t.TempDir(), "qshare.db"))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}, reg.Open)
}

// TestConformanceNoGroupCommit runs the suite with one transaction per
// commit, the path the group-commit writer takes when it is not loaded.
func TestConformanceNoGroupCommit(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	storetest.Run(t, func(t *testing.T) string { return filepath.Join(t.TempDir(), "qshare.db") },
		func(_ context.Context, path string) (store.Store, error) {
			d, err := sqlite.Open(path, sqlite.WithMaxBatch(1))
			if err != nil {
				return nil, err
			}
			return d, nil
		})
}
