package store_test

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"qshare/store"
)

// TestRegistry checks that Open hands each URL to the Opener of its scheme,
// whatever the scheme's case, passes the Opener's error through, and
// refuses what it cannot route with an error that lists the known schemes.
func TestRegistry(t *testing.T) {
	var r store.Registry
	if _, err := r.Open(context.Background(), "sqlite:///x"); err == nil || !strings.Contains(err.Error(), "(stores: none)") {
		t.Errorf("the empty registry: %v, want an error that says no store is known", err)
	}
	var got []string
	opener := func(name string) store.Opener {
		return func(_ context.Context, u *url.URL) (store.Store, error) {
			got = append(got, name+" "+u.Scheme+" "+u.Path)
			return nil, errors.New(name + " says no")
		}
	}
	r.Register("zeta", opener("zeta"))
	r.Register("Alpha+x", opener("alpha"))
	if s := r.Schemes(); !slices.Equal(s, []string{"alpha+x", "zeta"}) {
		t.Errorf("Schemes() = %v", s)
	}
	if _, err := r.Open(context.Background(), "ALPHA+X:///a/b"); err == nil || err.Error() != "alpha says no" {
		t.Errorf("the Opener's error is not passed through: %v", err)
	}
	if _, err := r.Open(context.Background(), "zeta:/c"); err == nil || err.Error() != "zeta says no" {
		t.Errorf("the Opener's error is not passed through: %v", err)
	}
	if want := []string{"alpha alpha+x /a/b", "zeta zeta /c"}; !slices.Equal(got, want) {
		t.Errorf("the Openers saw %q, want %q", got, want)
	}
	for raw, want := range map[string]string{
		"/var/lib/qshare.db":  "has no scheme",
		"beta://x":            `no store is known for the scheme "beta" (stores: alpha+x, zeta)`,
		"beta://u:pw@x/y":     `"beta://u:xxxxx@x/y"`,
		"%zz":                 "is not a URL",
		"beta://u:pw@x/%zz":   "not shown",
		"":                    "has no scheme",
		"host=db password=pw": "not shown: it may hold a password",
		// libpq and pgx also take a password from the query.
		"beta://u@x/y?sslmode=disable&password=pw": `password=xxxxx`,
		"beta://x/%zz?password=pw":                 "not shown",
		"beta://u@x/y?PassWord=pw&sslpassword=pw":  `sslpassword=xxxxx`,
	} {
		_, err := r.Open(context.Background(), raw)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Open(%q): %v, want an error that says %q", raw, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), ":pw@") || strings.Contains(err.Error(), "=pw")) {
			t.Errorf("Open(%q) shows the password: %v", raw, err)
		}
	}
}

// TestRegisterMistakes checks that wiring mistakes panic at once.
func TestRegisterMistakes(t *testing.T) {
	ok := func(context.Context, *url.URL) (store.Store, error) { return nil, nil }
	for name, f := range map[string]func(r *store.Registry){
		"empty scheme": func(r *store.Registry) { r.Register("", ok) },
		"bad scheme":   func(r *store.Registry) { r.Register("sql ite", ok) },
		"digit first":  func(r *store.Registry) { r.Register("3db", ok) },
		"nil Opener":   func(r *store.Registry) { r.Register("x", nil) },
		"twice":        func(r *store.Registry) { r.Register("x", ok); r.Register("X", ok) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			f(&store.Registry{})
		}()
	}
}
