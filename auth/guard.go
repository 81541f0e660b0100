// Package auth decides who may talk to qshare's server at all. It sits in
// front of every route the server has (the AWS Batch operations and tag
// routes of package api, the log endpoint of package logstream, and any
// later extension) as an http.Handler wrapper, and refuses a request before
// any route sees it, before its body is read.
//
// Its first piece is the Guard, which closes the server to browsers and to
// other local users while qshare has no authentication:
//
//   - Host: a request must name the server's own address (for a loopback
//     listener: localhost, 127.0.0.1 or [::1], with the port) or a name it is
//     told to answer to, so that a DNS-rebinding page finds nothing.
//   - Origin and Sec-Fetch-Site: a request that a browser sent for a page of
//     another origin is refused, unless that origin is allowed.
//   - Content-Type: a request with a body must say application/json, which
//     is what the AWS SDKs and CLI send and what no cross-site "simple"
//     request can carry without a CORS preflight (which qshare never grants).
//   - The peer's user: without authentication, a connection from a local Unix
//     user other than the server's own (and other than root) is refused. On
//     Linux the user of a TCP connection is read from /proc/net/tcp and
//     /proc/net/tcp6, once per connection; elsewhere it cannot be learned,
//     and the Guard says so in its Warnings.
//
// Refusals use the AWS error shape the SDKs read: 403 AccessDeniedException,
// or 400 ClientException for a wrong Content-Type, written by the function the
// server passes in (api.WriteError), so the one error table stays in api.
//
// Its second piece is authentication (qshare serve --auth FILE): the
// Authenticator verifies each request's AWS Signature Version 4 with the
// AWS SDK's own signer against the access keys of the auth file (Keyring,
// LoadFile), and puts the request's Principal in its context; each route
// then asks Authorize whether that principal's IAM-style policies (Policy,
// Evaluate) allow the action on the resources it concerns. With
// authentication on, the same-user rule is off.
package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"os/user"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"qshare"
)

// Config says what a Guard lets through.
type Config struct {
	// Addr is the address the server listens on, HOST:PORT, as the
	// listener reports it (so port 0 has become the real port). Required.
	Addr string
	// AllowHosts are more names the server answers to in the Host header
	// (qshare serve --allow-host): a name alone allows it on any port, a
	// NAME:PORT only on that port.
	AllowHosts []string
	// AllowOrigins are the web origins (scheme://host[:port]) whose pages
	// may call the server from a browser (qshare serve --allow-origin). The
	// server's own origin is always allowed.
	AllowOrigins []string
	// SameUserOnly refuses a connection from a local Unix user other than
	// the server's own and root. It is what stands in for authentication
	// when there is none: qshare serve sets it without --auth, and --auth
	// turns it off (and sets Authenticator).
	SameUserOnly bool
	// Authenticator, when not nil, authenticates every request that passes
	// the Guard's own checks (qshare serve --auth), after them.
	Authenticator *Authenticator
	// JobKeys, with SameUserOnly, are the S3 keys of running attempts: a
	// request of another local user that is signed for s3 with one of them
	// is let through, authenticated as the attempt's principal, instead of
	// refused (jobs run with --run-as reach the embedded S3 store).
	JobKeys *JobKeys
	// TLS says the server speaks HTTPS, so that a Host header without a
	// port means port 443, not 80.
	TLS bool
	// Audit, when not nil, receives a line for every mutating request and
	// every refused one (qshare serve --audit), written before the
	// response.
	Audit *Audit
	// WriteError writes a refusal in the API's wire form: a *qshare.Error
	// with code EDENIED (403 AccessDeniedException) or EINVALID (400
	// ClientException). Required; qshare serve passes api.WriteError.
	WriteError func(http.ResponseWriter, error)
	// Log receives one record per refused request; nil discards them.
	Log *slog.Logger
	// BodyTypes, when set, returns the media types of a body that the
	// request's route takes besides application/json ("*": any), for a
	// service whose own protocol sends them (awsQuery forms, S3 objects).
	// The Origin and Sec-Fetch-Site checks come first, so that a type a
	// browser can send cross-site reaches no route from another site.
	BodyTypes func(*http.Request) []string
}

// Guard is an http.Handler wrapper that refuses what Config does not allow.
// Install it on the server with Install (or set both Wrap and ConnContext
// yourself): the same-user rule needs ConnContext to see each connection.
// It is safe for concurrent use.
type Guard struct {
	cfg     Config
	log     *slog.Logger
	port    string
	hosts   map[string]bool // host names and IPs (lower case, no brackets) on the server's port
	anyPort map[string]bool // --allow-host names without a port
	exact   map[string]bool // --allow-host NAME:PORT, lower case
	origins map[string]bool // --allow-origin, canonical
	uid     int             // the server's effective uid
	uname   string          // and its user name, for messages
	// refusals is each peer's budget of refusals (listen.go).
	refusals refusalBudget
	// jobAuth authenticates the requests signed with JobKeys.
	jobAuth *Authenticator
}

// New returns a Guard for cfg, or an error naming the setting (--allow-host,
// --allow-origin) that is not valid.
func New(cfg Config) (*Guard, error) {
	if cfg.WriteError == nil {
		return nil, errors.New("auth: Config.WriteError is required")
	}
	host, port, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("auth: listen address %q is not HOST:PORT: %w", cfg.Addr, err)
	}
	g := &Guard{cfg: cfg, log: cfg.Log, port: port, hosts: map[string]bool{}, anyPort: map[string]bool{},
		exact: map[string]bool{}, origins: map[string]bool{}, uid: os.Geteuid()}
	if g.log == nil {
		g.log = slog.New(slog.DiscardHandler)
	}
	g.uname = strconv.Itoa(g.uid)
	if u, err := user.LookupId(g.uname); err == nil {
		g.uname = u.Username
	}
	host = strings.ToLower(host)
	g.hosts[host] = true
	if ip, err := netip.ParseAddr(host); host == "localhost" || (err == nil && (ip.IsLoopback() || ip.IsUnspecified())) {
		for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
			g.hosts[h] = true
		}
	}
	for _, h := range cfg.AllowHosts {
		n := strings.ToLower(strings.TrimSpace(h))
		if hh, pp, err := net.SplitHostPort(n); err == nil {
			if !validHostName(hh) || !validPort(pp) {
				return nil, fmt.Errorf("--allow-host %q is not valid: give a host name or IP, optionally with :PORT", h)
			}
			g.exact[net.JoinHostPort(hh, pp)] = true
			continue
		}
		n = strings.TrimSuffix(strings.TrimPrefix(n, "["), "]")
		if !validHostName(n) {
			return nil, fmt.Errorf("--allow-host %q is not valid: give a host name or IP, optionally with :PORT", h)
		}
		g.anyPort[n] = true
	}
	for _, o := range cfg.AllowOrigins {
		c, ok := canonicalOrigin(o)
		if !ok {
			return nil, fmt.Errorf("--allow-origin %q is not valid: give an origin as a browser sends it, scheme://host[:port] with no path, such as https://dash.example.com (there is no wildcard)", o)
		}
		g.origins[c] = true
	}
	if cfg.SameUserOnly && cfg.Authenticator == nil && cfg.JobKeys != nil {
		g.jobAuth = jobAuthenticator(cfg.JobKeys, cfg.WriteError, g.log)
	}
	return g, nil
}

// validHostName reports whether h is an IP or a DNS name (letters, digits,
// '-', '.', '_').
func validHostName(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_') {
			return false
		}
	}
	return true
}

func validPort(p string) bool {
	n, err := strconv.Atoi(p)
	return err == nil && n > 0 && n < 65536 && strconv.Itoa(n) == p
}

// canonicalOrigin returns o in the form a browser sends in Origin
// (lower-case scheme and host, no default port, no path), and whether o is
// an origin at all.
func canonicalOrigin(o string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(o))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if !validHostName(host) || (port != "" && !validPort(port)) {
		return "", false
	}
	if (u.Scheme == "http" && port == "80") || (u.Scheme == "https" && port == "443") {
		port = ""
	}
	if port != "" {
		return u.Scheme + "://" + net.JoinHostPort(host, port), true
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	return u.Scheme + "://" + host, true
}

// Warnings returns what the server should say at start about what this
// Guard cannot enforce here: on systems where the user of a TCP connection
// cannot be learned, that any local user can use the API.
func (g *Guard) Warnings() []string {
	if g.cfg.SameUserOnly && g.cfg.Authenticator == nil && !peerUIDSupported {
		return []string{"this system does not tell qshare which local user opened a TCP connection, and this server runs without authentication: every local user of this machine can use the API (submit jobs that run as " + g.uname + ", read every job and log). Start it with --auth FILE, or run it on a machine or in a network namespace you do not share"}
	}
	return nil
}

// Install wraps srv.Handler in the Guard and chains ConnContext, so that
// the same-user rule sees each connection.
func (g *Guard) Install(srv *http.Server) {
	srv.Handler = g.Wrap(srv.Handler)
	prev := srv.ConnContext
	srv.ConnContext = func(ctx context.Context, c net.Conn) context.Context {
		if prev != nil {
			ctx = prev(ctx, c)
		}
		return g.ConnContext(ctx, c)
	}
}

// peerKey is the context key of a connection's *peer.
type peerKey struct{}

// connKey is the context key of a connection's *connState.
type connKey struct{}

// connState counts the requests of one connection, for the keep-alive
// limit.
type connState struct {
	requests atomic.Int64
}

// maxRequestsPerConn is how many requests one connection may carry before
// the server closes it after a response: a keep-alive connection is not
// held forever by one client.
const maxRequestsPerConn = 1000

// ConnContext is an http.Server ConnContext hook: it records the
// connection's peer, whose user the same-user rule learns once (at accept,
// behind Listener, or on its first request), and its request count.
func (g *Guard) ConnContext(ctx context.Context, c net.Conn) context.Context {
	ctx = context.WithValue(ctx, connKey{}, &connState{})
	return context.WithValue(ctx, peerKey{}, g.peerOf(c))
}

// Wrap returns next behind the Guard: a request it refuses never reaches
// next, and its body is not read.
func (g *Guard) Wrap(next http.Handler) http.Handler {
	if g.cfg.Authenticator != nil {
		next = g.cfg.Authenticator.Wrap(next)
	}
	jobNext := next
	if g.jobAuth != nil {
		jobNext = g.jobAuth.WrapService(s3Service, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			g.refund(peerFrom(r.Context()))
			next.ServeHTTP(w, r)
		}))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p := peerFrom(r.Context()); p != nil && g.refusals.exhausted(p.key(), time.Now()) {
			// A peer beyond its refusal budget: refused unread, and
			// neither audited nor logged one by one, so that a flood of
			// refused requests costs the server almost nothing.
			r = r.WithContext(context.WithValue(r.Context(), guardKey{}, g))
			refuse(w, r, g.log, g.cfg.WriteError, qshare.Errorf(qshare.ETHROTTLED, "Rate exceeded: too many requests from this client were refused (more than %d in a row, or %d a second); wait and retry with valid requests", int(refusalBurst), int(refusalRate)))
			return
		}
		if g.cfg.Audit != nil {
			rec := &auditRecord{}
			r = r.WithContext(context.WithValue(r.Context(), auditKey{}, rec))
			w = &auditWriter{ResponseWriter: w, a: g.cfg.Audit, r: r, rec: rec,
				fail: func(err error) { g.log.Error("the audit log could not be written", "err", err) }}
		}
		r = r.WithContext(context.WithValue(r.Context(), guardKey{}, g))
		if cs, _ := r.Context().Value(connKey{}).(*connState); cs != nil && cs.requests.Add(1) >= maxRequestsPerConn {
			w.Header().Set("Connection", "close")
		}
		job, err := g.check(r)
		if err != nil {
			refuse(w, r, g.log, g.cfg.WriteError, err)
			return
		}
		if job {
			jobNext.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// guardKey is the context key of the *Guard a request passed.
type guardKey struct{}

// errorWriterKey is the context key of a request's own error writer.
type errorWriterKey struct{}

// WithErrorWriter returns ctx in which the refusals of the guard and of
// authentication are written by write instead of Config.WriteError and
// AuthConfig.WriteError: in the error shape of the service the request is
// for (an STS request gets STS's XML, a SageMaker one awsJson), which its
// SDK can read. qshare serve's router sets it for each request, before the
// guard sees it.
func WithErrorWriter(ctx context.Context, write func(http.ResponseWriter, error)) context.Context {
	return context.WithValue(ctx, errorWriterKey{}, write)
}

// maxLogged is the most bytes of a caller's path or header value that a
// log line or an audit line holds: a 60 KB path must not make a 60 KB line.
const maxLogged = 256

// clip returns s cut to maxLogged bytes, with an ellipsis when cut.
func clip(s string) string {
	if len(s) <= maxLogged {
		return s
	}
	return s[:maxLogged] + "…"
}

// refuse answers r with err and closes the connection after the answer,
// so that a client refused once cannot go on sending on the same
// connection. It logs the refusal (its path cut to maxLogged) while the
// peer is within its refusal budget, and beyond it a count of the peer's
// refusals every ten seconds. attrs are more log attributes.
func refuse(w http.ResponseWriter, r *http.Request, log *slog.Logger, writeError func(http.ResponseWriter, error), err error, attrs ...any) {
	w.Header().Set("Connection", "close")
	writeError = ownErrorWriter(r, writeError)
	attrs = append([]any{"remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path), "reason", clip(qshare.ErrorMessageOf(err))}, attrs...)
	g, _ := r.Context().Value(guardKey{}).(*Guard)
	p := peerFrom(r.Context())
	if g == nil || p == nil {
		log.Warn("request refused", attrs...)
	} else if now := time.Now(); g.refusals.take(p.key(), now) {
		log.Warn("request refused", attrs...)
	} else if n, ok := g.refusals.report(p.key(), now); ok {
		log.Warn("requests refused, beyond the peer's refusal budget: not logged one by one", "peer", p.key(), "count", n)
		g.auditRefusals(r, p.key(), n, now)
	}
	writeError(w, err)
}

// auditRefusals writes the audit line of n refusals of peer, the last of
// them r, beyond the peer's refusal budget (OutcomeRefusals): at most one
// per peer and refusalReport, as the server log's count.
func (g *Guard) auditRefusals(r *http.Request, peer string, n int, now time.Time) {
	if g.cfg.Audit == nil {
		return
	}
	e := &AuditEntry{Time: now.UTC(), Source: r.RemoteAddr, Method: clip(r.Method), Path: clip(r.URL.Path),
		Outcome: OutcomeRefusals, Status: http.StatusTooManyRequests, ErrorType: "TooManyRequestsException", Peer: clip(peer), Count: n}
	if err := g.cfg.Audit.Write(e); err != nil {
		g.log.Error("the audit log could not be written", "err", err)
	}
}

// ownErrorWriter returns the error writer of r's service (WithErrorWriter),
// else def.
func ownErrorWriter(r *http.Request, def func(http.ResponseWriter, error)) func(http.ResponseWriter, error) {
	if own, _ := r.Context().Value(errorWriterKey{}).(func(http.ResponseWriter, error)); own != nil {
		return own
	}
	return def
}

// refuseThrottled answers the request of an authenticated principal that
// its own rate limit refuses. Unlike refuse, it spends nothing of the
// peer's refusal budget, which is for requests refused before the server
// knows who sent them: every principal on one host (or behind one proxy)
// is one peer, and a principal past its own limit must not get the others
// refused (the noisy neighbour that per-principal limits exist to stop).
// It keeps the connection, which the SDK's retry reuses, and logs through
// the principal's own budget, so a principal that goes on past its limit
// makes a count every ten seconds rather than a line a request.
func (a *Authenticator) refuseThrottled(w http.ResponseWriter, r *http.Request, err error, principal string) {
	if now := time.Now(); a.throttleLog.take(principal, now) {
		a.log.Warn("request refused", "remote", r.RemoteAddr, "method", r.Method, "path", clip(r.URL.Path), "reason", clip(qshare.ErrorMessageOf(err)), "principal", principal)
	} else if n, ok := a.throttleLog.report(principal, now); ok {
		a.log.Warn("requests refused by the principal's rate limit: not logged one by one", "principal", principal, "count", n)
	}
	ownErrorWriter(r, a.cfg.WriteError)(w, err)
}

// quote shows a caller-supplied header value in a message, cut short.
func quote(s string) string {
	if len(s) > 100 {
		s = s[:100] + "…"
	}
	return strconv.Quote(s)
}

// check returns nil for a request the Guard lets through, or the
// *qshare.Error to answer it with. job says that the request is another
// local user's, let through only to be authenticated with JobKeys.
func (g *Guard) check(r *http.Request) (job bool, err error) {
	err = g.checkRequest(r, &job)
	return job, err
}

// checkRequest is check; it sets *job.
func (g *Guard) checkRequest(r *http.Request, job *bool) error {
	if !g.hostAllowed(r.Host) {
		return qshare.Errorf(qshare.EDENIED, "this server does not answer to the host name %s (the request's Host header): it answers to its own address (%s) and to the names given with qshare serve --allow-host NAME", quote(r.Host), g.ownAddr())
	}
	origin := r.Header.Get("Origin")
	originOK := false
	if origin != "" {
		if c, ok := canonicalOrigin(origin); ok {
			self, _ := canonicalOrigin(g.scheme() + "://" + r.Host)
			originOK = c == self || g.origins[c]
		}
	}
	if origin != "" && !originOK {
		return qshare.Errorf(qshare.EDENIED, "requests from web pages are refused: this one came from a page of %s (the request's Origin header). qshare's API is for API clients such as the AWS SDKs and CLI; to let the pages of an origin you trust call it, start the server with --allow-origin ORIGIN", quote(origin))
	}
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" && !originOK {
		return qshare.Errorf(qshare.EDENIED, "requests from web pages are refused: this one came from another site (Sec-Fetch-Site: %s). qshare's API is for API clients such as the AWS SDKs and CLI; to let the pages of an origin you trust call it, start the server with --allow-origin ORIGIN", quote(site))
	}
	if g.cfg.SameUserOnly {
		if err := g.checkPeer(r); err != nil {
			if g.jobAuth == nil || !signedWith(r) {
				return err
			}
			*job = true
		}
	}
	if r.ContentLength != 0 {
		ct := r.Header.Get("Content-Type")
		if ct == "application/json" { // what the SDKs send: no parse needed
			return nil
		}
		mt, _, err := mime.ParseMediaType(ct)
		if err == nil && mt == "application/json" {
			return nil
		}
		var types []string
		if g.cfg.BodyTypes != nil {
			types = g.cfg.BodyTypes(r)
			for _, t := range types {
				if t == "*" || (err == nil && t == mt) {
					return nil
				}
			}
		}
		shown := "none"
		if ct != "" {
			shown = quote(ct)
		}
		// The types the request's service reads: a route of its own
		// (SageMaker's JSON 1.1, STS's form) names them; the Batch API
		// reads application/json.
		want := "application/json"
		if len(types) > 0 {
			want = strings.Join(types, " or ")
		}
		return qshare.Errorf(qshare.EINVALID, "Content-Type must be %s for a request with a body to this service, as the AWS SDKs and CLI send it; this request's Content-Type is %s", want, shown)
	}
	return nil
}

// scheme is the URL scheme the server speaks, which makes its own origin:
// a page it serves over HTTPS sends Origin https://HOST.
func (g *Guard) scheme() string {
	if g.cfg.TLS {
		return "https"
	}
	return "http"
}

// ownAddr is how a message names the server's own address.
func (g *Guard) ownAddr() string {
	if g.hosts["localhost"] {
		return "localhost, 127.0.0.1 or [::1] on port " + g.port
	}
	for h := range g.hosts {
		return net.JoinHostPort(h, g.port)
	}
	return "port " + g.port
}

// hostAllowed reports whether a Host header names this server.
func (g *Guard) hostAllowed(hostport string) bool {
	hp := strings.ToLower(hostport)
	host, port, err := net.SplitHostPort(hp)
	if err != nil { // no port: the scheme's default
		host, port = strings.TrimSuffix(strings.TrimPrefix(hp, "["), "]"), "80"
		if g.cfg.TLS {
			port = "443"
		}
	}
	if host == "" {
		return false
	}
	if g.anyPort[host] || (len(g.exact) > 0 && g.exact[net.JoinHostPort(host, port)]) {
		return true
	}
	return port == g.port && g.hosts[host]
}

// checkPeer refuses a connection whose local user is neither the server's
// nor root.
func (g *Guard) checkPeer(r *http.Request) error {
	p := peerFrom(r.Context())
	if p == nil {
		g.log.Error("the request guard cannot see the connection: install it with Guard.Install")
		return qshare.Errorf(qshare.EDENIED, "this server cannot tell which local user opened this connection, and without authentication it serves only its own user")
	}
	uid, err := p.user()
	if errors.Is(err, errPeerUnsupported) {
		return nil // said at start, by Warnings
	}
	if err != nil {
		return qshare.Errorf(qshare.EDENIED, "this server could not learn which local user opened this connection (%v), and without authentication it serves only the user it runs as, %s: connect from this machine as %s, or have the server started with authentication (qshare serve --auth FILE)", err, g.uname, g.uname)
	}
	if g.sameUser(uid) {
		return nil
	}
	who := g.uname + " and root"
	if g.uid == 0 {
		who = "root"
	}
	return qshare.Errorf(qshare.EDENIED, "this qshare server runs as %s and has no authentication, so it serves only %s; this connection came from another user (uid %d). Run the client as %s, run a server of your own as your own user (on a port of your own, or in a private network namespace), or have this one started with authentication (qshare serve --auth FILE) and sign with an access key of its auth file", g.uname, who, uid, g.uname)
}
