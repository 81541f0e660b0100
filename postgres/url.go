package postgres

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"strings"

	"qshare/store"
)

// Scheme and SchemeLong are the URL schemes of PostgreSQL stores, for
// store.Registry: postgres://USER[:PASSWORD]@HOST:PORT/DB?PARAMS, with the
// parameters pgx and libpq know (sslmode, connect_timeout, search_path,
// ...). A password is better given through PGPASSWORD or a ~/.pgpass file
// than in the URL, where a process listing can show it; either way no
// message of this package prints it.
const (
	Scheme     = "postgres"
	SchemeLong = "postgresql"
)

// StoreURL reports whether raw is the URL of a PostgreSQL store (scheme
// postgres or postgresql), and returns it parsed: qshare serve leads or
// stands by on such a store, and check-events reads its event log.
func StoreURL(raw string) (*url.URL, bool) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != Scheme && u.Scheme != SchemeLong) {
		return nil, false
	}
	return u, true
}

// OpenURL opens the store that u, a URL of scheme postgres or postgresql,
// names, as Open does with no options. It is the Opener that package server
// registers for both schemes (store.Registry).
func OpenURL(ctx context.Context, u *url.URL) (store.Store, error) {
	d, err := OpenURLOptions(ctx, u)
	if err != nil {
		return nil, err // not a typed nil in the interface
	}
	return d, nil
}

// OpenURLOptions is OpenURL with Open's options: it checks u as OpenURL
// does and opens it with opts.
func OpenURLOptions(ctx context.Context, u *url.URL, opts ...Option) (*DB, error) {
	if u.Scheme != Scheme && u.Scheme != SchemeLong {
		return nil, fmt.Errorf("postgres: store URL %q is not of the scheme %s or %s", store.RedactURL(u), Scheme, SchemeLong)
	}
	if u.Fragment != "" {
		return nil, fmt.Errorf("postgres: store URL %q has a fragment (#...), which names nothing in a database", store.RedactURL(u))
	}
	if u.Opaque != "" {
		return nil, fmt.Errorf("postgres: store URL %q has no //: give postgres://USER@HOST:PORT/DATABASE", store.RedactURL(u))
	}
	return Open(ctx, u.String(), opts...)
}

// kvPasswordRE finds the password of a key=value connection string.
var kvPasswordRE = regexp.MustCompile(`(?i)(\bpassword\s*=\s*)('(?:[^'\\]|\\.)*'|\S*)`)

// passwordsOf returns the passwords that connString holds: a URL's in its
// user information and in its query (password, sslpassword), a key=value
// string's password.
func passwordsOf(connString string) []string {
	var pws []string
	if u, err := url.Parse(connString); err == nil && u.Scheme != "" {
		if u.User != nil {
			if p, _ := u.User.Password(); p != "" {
				pws = append(pws, p)
			}
		}
		for k, vs := range u.Query() {
			if strings.Contains(strings.ToLower(k), "password") {
				for _, v := range vs {
					if v != "" {
						pws = append(pws, v)
					}
				}
			}
		}
		return pws
	}
	if m := kvPasswordRE.FindStringSubmatch(connString); m != nil {
		if p := strings.Trim(m[2], "'"); p != "" {
			pws = append(pws, p)
		}
	}
	return pws
}

// redactErr returns err with any copy of connString's password in its
// message (as given, or percent-encoded) replaced by xxxxx: a driver's
// messages may quote the connection string. It still wraps err.
func redactErr(err error, connString string) error {
	if err == nil {
		return nil
	}
	return &redactedError{msg: redactMsg(err.Error(), connString), err: err}
}

// redactedError is an error whose message was redacted.
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// redactMsg replaces connString's password in msg.
func redactMsg(msg, connString string) string {
	for _, pw := range passwordsOf(connString) {
		msg = strings.ReplaceAll(msg, pw, "xxxxx")
		if esc := url.QueryEscape(pw); esc != pw {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
		if esc := url.PathEscape(pw); esc != pw {
			msg = strings.ReplaceAll(msg, esc, "xxxxx")
		}
	}
	return msg
}
