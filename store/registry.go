package store

import (
	"context"
	"fmt"
	"net/url"
	"regexp"
	"sort"
	"strings"
)

// Opener opens the store that u names. The Registry calls it with a parsed
// URL whose Scheme is the one the Opener was registered for; everything else
// in u (path, host, query) is the Opener's to interpret, and an Opener must
// reject with a clear error what it does not understand rather than ignore
// it. The Store it returns is owned by the caller, who must Close it; when
// another server owns the storage, the error wraps ErrLocked. On error it
// returns a nil Store.
type Opener func(ctx context.Context, u *url.URL) (Store, error)

// Registry chooses a store by URL: each backend registers an Opener for its
// URL scheme ("sqlite", later "postgres"), and Open hands a URL to the
// Opener of its scheme. The zero Registry is empty and ready to use.
//
// cmd/qshare builds the one Registry the server uses, registering each store
// it links, so that the daemon only ever sees a Store. Register all schemes
// before the first Open; Open may then be called concurrently.
type Registry struct {
	openers map[string]Opener
}

// schemeRE is what RFC 3986 allows in a scheme (url.Parse lowers it).
var schemeRE = regexp.MustCompile(`^[a-z][a-z0-9+.-]*$`)

// Register makes open the Opener of URLs whose scheme is scheme (compared
// without regard to case, as url.Parse lowers schemes). It panics if scheme
// is not a valid URL scheme, if open is nil, or if the scheme already has an
// Opener: each is a mistake in the program's wiring, not in its input.
func (r *Registry) Register(scheme string, open Opener) {
	scheme = strings.ToLower(scheme)
	if !schemeRE.MatchString(scheme) {
		panic(fmt.Sprintf("store: Register: %q is not a URL scheme", scheme))
	}
	if open == nil {
		panic("store: Register: nil Opener for " + scheme)
	}
	if _, dup := r.openers[scheme]; dup {
		panic("store: Register: the scheme " + scheme + " is registered twice")
	}
	if r.openers == nil {
		r.openers = map[string]Opener{}
	}
	r.openers[scheme] = open
}

// Schemes returns the registered schemes, sorted.
func (r *Registry) Schemes() []string {
	out := make([]string, 0, len(r.openers))
	for s := range r.openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Open opens the store that rawURL names, through the Opener registered for
// its scheme. A string that is not a URL, has no scheme, or has a scheme
// nothing is registered for is refused with an error that quotes it (its
// password, if any, redacted) and lists the known schemes; the Opener's own errors are returned as it gave them
// (they name the store, and wrap ErrLocked when another server owns it).
func (r *Registry) Open(ctx context.Context, rawURL string) (Store, error) {
	known := strings.Join(r.Schemes(), ", ")
	if known == "" {
		known = "none"
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		shown := rawURL
		if strings.Contains(shown, "@") || strings.Contains(strings.ToLower(shown), "password") {
			shown = "(not shown: it may hold a password)"
		}
		return nil, fmt.Errorf("store %q is not a URL (%v); give, for example, sqlite:///var/lib/qshare/qshare.db (stores: %s)", shown, unwrapURLError(err), known)
	}
	if u.Scheme == "" {
		shown := RedactURL(u)
		if strings.Contains(strings.ToLower(rawURL), "password") { // a libpq key=value string, say
			shown = "(not shown: it may hold a password)"
		}
		return nil, fmt.Errorf("store %q has no scheme; give a URL such as sqlite:///var/lib/qshare/qshare.db (stores: %s)", shown, known)
	}
	open, ok := r.openers[u.Scheme]
	if !ok {
		return nil, fmt.Errorf("store %q: no store is known for the scheme %q (stores: %s)", RedactURL(u), u.Scheme, known)
	}
	return open(ctx, u)
}

// unwrapURLError drops url.Error's own quoting of the whole URL, which the
// caller's message already gives.
func unwrapURLError(err error) error {
	if ue, ok := err.(*url.Error); ok {
		return ue.Err
	}
	return err
}

// RedactURL returns u as a string for messages, without any password in
// it: the password of its user information, and the value of every query
// parameter whose name holds "password" (password, sslpassword: libpq and
// pgx read both from the query as well), are shown as xxxxx. Every message
// that quotes a store's URL goes through it.
func RedactURL(u *url.URL) string {
	if u.RawQuery == "" {
		return u.Redacted()
	}
	c := *u
	pairs := strings.Split(c.RawQuery, "&")
	for i, p := range pairs {
		k, _, ok := strings.Cut(p, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		if ok && strings.Contains(strings.ToLower(name), "password") {
			pairs[i] = k + "=xxxxx"
		}
	}
	c.RawQuery = strings.Join(pairs, "&")
	return c.Redacted()
}
