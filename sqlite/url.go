package sqlite

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strings"

	"qshare/store"
)

// Scheme is the URL scheme of SQLite stores, for store.Registry.
const Scheme = "sqlite"

// A store URL names the database file:
//
//	sqlite:///var/lib/qshare/qshare.db   an absolute path (an empty host, then the path)
//	sqlite:/var/lib/qshare/qshare.db     the same
//	sqlite:qshare-data/qshare.db         a path relative to the server's working directory
//
// The path is percent-decoded, so a file name with '?', '#' or '%' is written
// %3F, %23, %25. A URL with a host (sqlite://host/...), a query, a fragment,
// user information or no file name is refused, rather than half understood.

// OpenURL opens the database that u, a URL of scheme sqlite, names, as Open
// does with its path and no options. It is the Opener that package server
// registers for the scheme "sqlite" (store.Registry).
func OpenURL(ctx context.Context, u *url.URL) (store.Store, error) {
	path, err := pathOf(u)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	d, err := Open(path)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return d, nil
}

// URL returns the store URL of the database file at path, made absolute:
// what OpenURL opens as Open(path) would.
func URL(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlite: %s: %w", path, err)
	}
	return (&url.URL{Scheme: Scheme, Path: filepath.ToSlash(abs)}).String(), nil
}

// pathOf returns the file path that a sqlite URL names.
func pathOf(u *url.URL) (string, error) {
	bad := func(why string) error {
		return fmt.Errorf("sqlite: store URL %q %s; give sqlite:///ABSOLUTE/PATH/qshare.db or sqlite:RELATIVE/PATH/qshare.db", store.RedactURL(u), why)
	}
	switch {
	case u.Scheme != Scheme:
		return "", bad("is not of the scheme " + Scheme)
	case u.User != nil:
		return "", bad("has user information, which a file does not take")
	case u.Host != "":
		return "", bad(fmt.Sprintf("names the host %q (a database file is local: sqlite:///PATH has an empty host)", u.Host))
	case u.RawQuery != "" || u.ForceQuery:
		return "", bad("has a query (?...), which SQLite stores take no settings from")
	case u.Fragment != "":
		return "", bad("has a fragment (#...)")
	}
	p := u.Path
	if u.Opaque != "" {
		var err error
		if p, err = url.PathUnescape(u.Opaque); err != nil {
			return "", bad(fmt.Sprintf("has a bad %%-escape (%v)", err))
		}
	}
	if p == "" {
		return "", bad("names no file")
	}
	if strings.HasSuffix(p, "/") {
		return "", bad("names a directory, not the database file")
	}
	if strings.ContainsRune(p, 0) {
		return "", bad("has a NUL byte in its path")
	}
	return filepath.FromSlash(p), nil
}
