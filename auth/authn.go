package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"qshare"
)

// AuthConfig says how an Authenticator finds its principals.
type AuthConfig struct {
	// File is the path of the auth file (qshare serve --auth). Required.
	File string
	// Region is the region requests must be signed for, and AccountID the
	// account of the principals' ARNs (arn:aws:iam::ACCOUNT:user/NAME).
	Region, AccountID string
	// BodyLimit is the Verifier's: the most bytes a route reads of a body.
	BodyLimit func(r *http.Request) int64
	// WriteError writes a refusal in the API's wire form (api.WriteError).
	// Required.
	WriteError func(http.ResponseWriter, error)
	// Log receives a record per refused request and per reload; nil
	// discards them.
	Log *slog.Logger
	// PublicPaths are request paths served without authentication: the
	// health probes (/healthz, /readyz), which tell nothing but whether the
	// server is up and ready, and which a prober cannot sign.
	PublicPaths []string
	// PublicPrefixes are path prefixes served without authentication: the
	// dashboard's own files (/ui/), a page, a script and a style sheet that
	// hold no data, so that a browser can load the page that then signs
	// every request for data itself.
	PublicPrefixes []string
	// PendingBodies bounds the bytes of request bodies held, all requests
	// together, while their signatures are not yet checked (Verifier's
	// Pending); 0 means DefaultPendingBodies.
	PendingBodies int64
	// CheckPrincipal, when set, is asked about every principal of the file,
	// at start and on each reload; an error refuses the file, as a
	// malformed one is (qshare serve checks with it that each unixUser is
	// one its executor can run jobs as).
	CheckPrincipal func(*Principal) error
}

// DefaultPendingBodies is AuthConfig.PendingBodies' default: 64 bodies
// of the API's largest (1 MiB) awaiting their signature check at once.
const DefaultPendingBodies = 64 << 20

// Authenticator is qshare serve --auth: it verifies every request's SigV4
// signature against the principals of the auth file, puts the principal in
// the request's context for Authorize, and reloads the file on demand
// (Reload, on SIGHUP), swapping the keyring atomically. It is safe for
// concurrent use.
type Authenticator struct {
	cfg      AuthConfig
	log      *slog.Logger
	keys     atomic.Pointer[Keyring]
	verifier *Verifier
	reloadMu sync.Mutex
	limits   limiter
	// throttleLog bounds the log lines of principals refused by their own
	// rate limit (refuseThrottled), one budget a principal.
	throttleLog refusalBudget
	// reloaded is closed, and replaced, at each reload that puts a file
	// in force (Reloaded).
	reloaded atomic.Pointer[chan struct{}]
}

// NewAuthenticator loads the auth file (LoadFile) and returns an
// Authenticator over it, or the file's error.
func NewAuthenticator(cfg AuthConfig) (*Authenticator, error) {
	if cfg.WriteError == nil {
		return nil, errors.New("auth: AuthConfig.WriteError is required")
	}
	a := &Authenticator{cfg: cfg, log: cfg.Log}
	k, err := a.load()
	if err != nil {
		return nil, err
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	a.keys.Store(k)
	ch := make(chan struct{})
	a.reloaded.Store(&ch)
	a.verifier = NewVerifier(cfg.Region, a.keys.Load)
	a.verifier.BodyLimit = cfg.BodyLimit
	pending := cfg.PendingBodies
	if pending <= 0 {
		pending = DefaultPendingBodies
	}
	a.verifier.Pending = NewByteBudget(pending)
	return a, nil
}

// jobAuthenticator returns an Authenticator over the job keys j rather
// than an auth file, for the Guard (JobKeys).
func jobAuthenticator(j *JobKeys, writeError func(http.ResponseWriter, error), log *slog.Logger) *Authenticator {
	a := &Authenticator{cfg: AuthConfig{Region: j.region, WriteError: writeError, Log: log}, log: log}
	ch := make(chan struct{})
	a.reloaded.Store(&ch)
	a.verifier = NewVerifier(j.region, j.Keys)
	return a
}

// Verifier returns the Verifier the Authenticator uses, so that a test
// can set its clock.
func (a *Authenticator) Verifier() *Verifier { return a.verifier }

// Keys returns the keyring in force.
func (a *Authenticator) Keys() *Keyring { return a.keys.Load() }

// Reload reads the auth file again and, if it is valid, puts it in force
// for every later request. A file that is not valid changes nothing: the
// keyring in force stays, and the error says why.
func (a *Authenticator) Reload() error {
	a.reloadMu.Lock()
	defer a.reloadMu.Unlock()
	k, err := a.load()
	if err != nil {
		a.log.Error("the auth file was not reloaded; the one loaded before stays in force", "err", err)
		return err
	}
	a.keys.Store(k)
	next := make(chan struct{})
	close(*a.reloaded.Swap(&next))
	a.log.Info("auth file reloaded", "file", a.cfg.File, "principals", len(k.names), "accessKeys", len(k.keys))
	return nil
}

// load reads the auth file and asks CheckPrincipal about each principal.
func (a *Authenticator) load() (*Keyring, error) {
	k, err := LoadFile(a.cfg.File, a.cfg.AccountID)
	if err != nil || a.cfg.CheckPrincipal == nil {
		return k, err
	}
	for _, n := range k.Principals() {
		if err := a.cfg.CheckPrincipal(k.names[n]); err != nil {
			return nil, fmt.Errorf("auth file %s: %w", a.cfg.File, err)
		}
	}
	return k, nil
}

// principalKey is the context key of a request's *Principal.
type principalKey struct{}

// Wrap returns next behind authentication: a request whose signature does
// not verify is refused with the Verifier's error, and next sees the
// others with their principal in the context (PrincipalFrom, Authorize).
func (a *Authenticator) Wrap(next http.Handler) http.Handler {
	return a.WrapService(Service, next)
}

// WrapService is Wrap for a route of the signing name service ("batch",
// "s3", "sts"...): the request's credential scope must name it. qshare
// serve's router wraps each route that is not public so, with its
// service's name.
func (a *Authenticator) WrapService(service string, next http.Handler) http.Handler {
	public := map[string]bool{}
	for _, p := range a.cfg.PublicPaths {
		public[p] = true
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if public[r.URL.Path] || a.publicPrefix(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		p, keyID, secret, err := a.verifier.verify(r, service)
		if err != nil {
			refuse(w, r, a.log, a.cfg.WriteError, err)
			return
		}
		notePrincipal(r.Context(), p)
		if err := a.limits.allow(p, a.verifier.now()); err != nil {
			a.refuseThrottled(w, r, err, p.Name)
			return
		}
		ctx := context.WithValue(WithPrincipal(r.Context(), p), grantKey{}, &grant{a: a, keyID: keyID, secret: secret, owner: p})
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// grant is what a request was authenticated with, for Recheck.
type grant struct {
	a             *Authenticator
	keyID, secret string
	owner         *Principal
}

type grantKey struct{}

// Reloaded returns a channel that is closed at the next reload of the
// auth file that authenticated the request ctx belongs to, or nil (never
// ready) for a request with no principal. A request that lasts (a
// followed log) waits on it and then asks Recheck whether it may go on;
// it takes the channel before it asks, so that no reload falls between.
func Reloaded(ctx context.Context) <-chan struct{} {
	g, _ := ctx.Value(grantKey{}).(*grant)
	if g == nil {
		return nil
	}
	return *g.a.reloaded.Load()
}

// Recheck decides again, with the auth file in force now, whether the
// request ctx belongs to may go on with action on resources: its access
// key must still be in the file, with the same secret and owner (else
// EUNKNOWNKEY), and the owner's policies there must allow it (else
// EDENIED, as Authorize says). nil for a request with no principal.
func Recheck(ctx context.Context, action string, resources ...string) error {
	g, _ := ctx.Value(grantKey{}).(*grant)
	if g == nil {
		return nil
	}
	now, ok := g.a.verifier.Keys().keys[g.keyID]
	if !ok || now.owner.ARN != g.owner.ARN || now.secret != g.secret {
		return qshare.Errorf(qshare.EUNKNOWNKEY, "The security token included in the request is invalid: access key %s is no longer in this server's auth file, or no longer %s's", quote(g.keyID), g.owner.Name)
	}
	resources = orAny(resources)
	if d := EvaluateKeys(now.owner.Policies, action, resources, keysFrom(ctx)); d != Allowed {
		return qshare.Errorf(qshare.EDENIED, "%s", deniedMessage(now.owner.ARN, action, resources[len(resources)-1], d))
	}
	return nil
}

// publicPrefix reports whether path is under one of the PublicPrefixes.
func (a *Authenticator) publicPrefix(path string) bool {
	for _, p := range a.cfg.PublicPrefixes {
		if strings.HasPrefix(path, p) {
			return true
		}
	}
	return false
}

// WithPrincipal returns ctx carrying p as the authenticated caller; p must
// not be nil. Authorize then decides with p's policies.
func WithPrincipal(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the authenticated caller of a request, or nil when
// the server runs without authentication.
func PrincipalFrom(ctx context.Context) *Principal {
	p, _ := ctx.Value(principalKey{}).(*Principal)
	return p
}

// Authorize decides whether the caller of the request ctx belongs to may
// perform action (such as batch:SubmitServiceJob) on resources (ARNs, or
// "*" for an operation on no one resource), by Evaluate. It returns nil
// when it may, and when the server runs without authentication (no
// principal in ctx); otherwise a *qshare.Error with code EDENIED
// (AccessDeniedException) in AWS's words, naming the last resource. Either
// way it names the action and resources in the request's audit line, which
// is written for a mutating action only, with authentication or without.
func Authorize(ctx context.Context, action string, resources ...string) error {
	resources = orAny(resources)
	noteAuthorization(ctx, action, resources)
	p := PrincipalFrom(ctx)
	if p == nil {
		return nil
	}
	d := EvaluateKeys(p.Policies, action, resources, keysFrom(ctx))
	if d == Allowed {
		return nil
	}
	return qshare.Errorf(qshare.EDENIED, "%s", deniedMessage(p.ARN, action, resources[len(resources)-1], d))
}

// May reports whether the caller of the request ctx belongs to may
// perform action on resources, as Authorize decides, but without a
// refusal and without naming the action in the request's audit line: for
// a route that shows each caller only the items it may read (the
// dashboard's views) and asks once per item. It is true without
// authentication.
func May(ctx context.Context, action string, resources ...string) bool {
	p := PrincipalFrom(ctx)
	return p == nil || EvaluateKeys(p.Policies, action, orAny(resources), keysFrom(ctx)) == Allowed
}

// orAny is resources, or "*" when there are none.
func orAny(resources []string) []string {
	if len(resources) == 0 {
		return []string{"*"}
	}
	return resources
}

// Require returns next behind Authorize(action, "*"): for a route, such as
// /metrics, that concerns no one resource.
func Require(action string, next http.Handler, writeError func(http.ResponseWriter, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := Authorize(r.Context(), action, "*"); err != nil {
			writeError(w, err)
			return
		}
		next.ServeHTTP(w, r)
	})
}
