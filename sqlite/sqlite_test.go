package sqlite_test

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"qshare/sqlite"
	"qshare/store"
	"qshare/store/storetest"
)

// registry is a store.Registry with the scheme sqlite registered, as qshare
// serve --store opens stores.
func registry() *store.Registry {
	var reg store.Registry
	reg.Register(sqlite.Scheme, sqlite.OpenURL)
	return &reg
}

// TestConformance runs the store suite on SQLite as the server opens it: by
// URL, through a store.Registry with the scheme sqlite registered.
func TestConformance(t *testing.T) {
	t.Parallel()
	reg := registry()
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
	t.Parallel()
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

// TestURL opens databases by URL through a registry, as qshare serve
// --store does: absolute and relative paths, escapes, and URL forms that are
// refused with an error that says why and what to give instead.
func TestURL(t *testing.T) {
	reg := registry()
	ctx := context.Background()
	dir := t.TempDir()

	// sqlite.URL and OpenURL agree, through characters a URL escapes.
	odd := filepath.Join(dir, "a b", "c?d#e%20f&x=y", "qshare.db")
	u, err := sqlite.URL(odd)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(u, "sqlite:///") {
		t.Errorf("URL(%q) = %q, want sqlite:///...", odd, u)
	}
	for _, raw := range []string{u, "SQLite://" + strings.TrimPrefix(u, "sqlite://"), "sqlite:" + strings.TrimPrefix(u, "sqlite://")} {
		s, err := reg.Open(ctx, raw)
		if err != nil {
			t.Fatalf("Open(%q): %v", raw, err)
		}
		if got := s.(*sqlite.DB).Path(); got != odd {
			t.Errorf("Open(%q) opened %q, want %q", raw, got, odd)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}

	// A relative path is relative to the working directory.
	t.Chdir(dir)
	s, err := reg.Open(ctx, "sqlite:rel/dir/my%20db.sqlite")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := s.(*sqlite.DB).Path(), filepath.Join(dir, "rel", "dir", "my db.sqlite"); got != want {
		t.Errorf("sqlite:rel/dir/my%%20db.sqlite opened %q, want %q", got, want)
	}
	// Open by URL holds the store like Open does.
	if s2, err := reg.Open(ctx, "sqlite:./rel/dir/my%20db.sqlite"); err == nil {
		s2.Close()
		t.Error("a second open by another spelling of the same file succeeded")
	} else if !errors.Is(err, store.ErrLocked) {
		t.Errorf("a second open: %v, want store.ErrLocked", err)
	}
	s.Close()

	for _, tc := range []struct{ url, want string }{
		{"sqlite:", "names no file"},
		{"sqlite://", "names no file"},
		{"sqlite:///", "names a directory"},
		{"sqlite:///tmp/dir/", "names a directory"},
		{"sqlite://host/tmp/qshare.db", `names the host "host"`},
		{"sqlite://localhost/tmp/qshare.db", `names the host "localhost"`},
		{"sqlite://user:secret@/tmp/qshare.db", "user information"},
		{"sqlite:///tmp/qshare.db?_pragma=synchronous(OFF)", "has a query"},
		{"sqlite:///tmp/qshare.db?", "has a query"},
		{"sqlite:///tmp/qshare.db#frag", "has a fragment"},
		{"sqlite:bad%zzescape", "bad %-escape"},
		{"sqlite:///bad%zz", "is not a URL"},
		{"sqlite:///tmp/a%00b", "NUL"},
		{"/tmp/qshare.db", "has no scheme"},
		{"qshare-data/qshare.db", "has no scheme"},
		{"postgres://db.example/qshare", `no store is known for the scheme "postgres" (stores: sqlite)`},
		{"::", "is not a URL"},
		{"postgres://user:secret@db/qshare", "no store is known"},
		{"postgres://user:secret@db/%zz", "not shown"},
	} {
		s, err := reg.Open(ctx, tc.url)
		if err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", tc.url)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Open(%q): %v\nwant an error that says %q", tc.url, err, tc.want)
		}
		if strings.Contains(err.Error(), "secret") {
			t.Errorf("Open(%q): the error shows the password: %v", tc.url, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "tmp")); err == nil {
		t.Error("a refused URL created a file")
	}
}

// TestOpenURLCancelled checks that OpenURL does not open the database for a
// context that has ended.
func TestOpenURLCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	path := filepath.Join(t.TempDir(), "qshare.db")
	if s, err := sqlite.OpenURL(ctx, &url.URL{Scheme: sqlite.Scheme, Path: path}); err == nil {
		s.Close()
		t.Fatal("OpenURL with a cancelled context succeeded")
	} else if !errors.Is(err, context.Canceled) {
		t.Fatalf("OpenURL: %v, want context.Canceled", err)
	}
	if _, err := os.Stat(path); err == nil {
		t.Error("OpenURL with a cancelled context created the database")
	}
}
