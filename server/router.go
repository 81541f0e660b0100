package server

import (
	"context"
	"net/http"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync/atomic"

	"qshare"
	"qshare/auth"
)

// The one router of qshare serve. Every service of the one endpoint (the
// AWS Batch API, qshare's extensions, the dashboard, metrics, the probes,
// and each AWS service the SageMaker SDK calls) is a Route in it, matched
// by what a request says about itself, because botocore sends every
// service to the same address when AWS_ENDPOINT_URL names it. In front of
// all of them, in this order: the Router classifies the request (so that
// the guard and authentication know its route), the guard (package auth:
// Host, Origin, Sec-Fetch-Site, other local users, Content-Type) refuses
// what no service may get, authentication (--auth) verifies the signature
// for the route's service unless the route is Public, and only then does
// the route's handler see the request.

// Match says which requests a Route takes. Each field that is set must
// match; among the routes that match a request, the most specific one
// takes it (see Router).
type Match struct {
	// Service is the service name of the request's SigV4 credential scope
	// (Credential=KEY/DATE/REGION/SERVICE/aws4_request, in the
	// Authorization header, or the X-Amz-Credential query parameter of a
	// presigned URL): "batch", "s3", "sts", "iam", "sagemaker", "logs". A
	// request that carries no scope (unsigned: a probe, a browser loading
	// the dashboard's files, a client of a server without --auth that does
	// not sign) matches any Service, and is then routed by the rest. It is
	// also the name that authentication checks the scope against; qshare's
	// own routes (extensions, dashboard, metrics, probes) use "batch", as
	// the qshare CLI and the dashboard sign with it.
	Service string
	// Target is the prefix of the X-Amz-Target header before its last '.',
	// for the awsJson services: "SageMaker" for SageMaker.DescribeTrainingJob,
	// "Logs_20140328" for Logs_20140328.GetLogEvents. A request without the
	// header does not match a Route that sets it.
	Target string
	// Path is an exact path ("/metrics"), or a prefix when it ends in "/"
	// ("/ui/"). It is matched against the request's cleaned path (see
	// Classified), the same one authentication and the handler's decision
	// to serve unsigned are made on.
	Path string
}

// Route is one service's entry in the Router.
type Route struct {
	// Name names the service in logs and in the error for a request that
	// no route takes.
	Name string
	// Match says which requests it takes.
	Match Match
	// Public routes are served without a signature even with --auth: the
	// health probes, and the dashboard's own files (a page, a script and a
	// style sheet that hold no data; the page signs its requests for data).
	Public bool
	// BodyTypes are the media types of a request body this route takes
	// besides application/json ("*" for any), for a service whose own
	// protocol sends them: awsQuery's form bodies, S3's objects. The guard
	// refuses any other. A type that a browser can send cross-site without
	// a preflight is safe here only because the guard refuses first every
	// request that Origin or Sec-Fetch-Site says came from another site.
	BodyTypes []string
	// RawPath routes take paths that are not in canonical form (with "."
	// or ".." segments, or doubled slashes), as S3's object keys may be;
	// the Router refuses such a path for any other route, so that no
	// handler reads a path other than the one the route and the decision
	// to serve it unsigned were made on.
	RawPath bool
	// WriteError writes the route's refusals (the guard's, authentication's
	// and the router's own) in its service's error shape, which its SDK
	// reads: awsquery.Service.WriteError for STS, awsjson's for SageMaker.
	// nil: the Batch API's (api.WriteError).
	WriteError func(http.ResponseWriter, error)
	// Handler serves the route in any role (leader, standby, loading): the
	// probes. Set it or Build, not both.
	Handler http.Handler
	// Build returns the route's handler for a term in which this server
	// leads the store; it is called once per term, before the store is
	// loaded (wrap what needs the store in t.Health.Gate). Before the first
	// term the route answers 503; while this server stands by, its requests
	// are forwarded to the leader. A nil handler leaves the route out of
	// that term.
	Build func(t *Term) http.Handler
}

// Router is qshare serve's one router. Routes are registered once, before
// it serves (Handle); the handlers they Build are replaced at each term
// (lead, standBy). It is safe for concurrent use once it serves.
//
// Among the routes whose Match matches a request, the one taken is the
// one with, in this order: a Target; a Service the request's scope names
// (an unsigned request names none); a Path, the longest; and then the
// first registered. So a request signed for s3 to /ui/x (the bucket "ui")
// goes to S3 and not to the dashboard, and one signed for batch to
// /metrics goes to the metrics route and not to the Batch API, whose
// route has a Service and no Path.
type Router struct {
	routes []Route
	// auth, when not nil (--auth), authenticates each request of a route
	// that is not Public.
	auth *auth.Authenticator
	// noRoute answers a request no route takes.
	noRoute func(w http.ResponseWriter, r *http.Request, c *Classified)

	// term holds the handlers of the current term, by route index; nil
	// while no term leads, when other serves every route that has no
	// Handler of its own.
	term  atomic.Pointer[[]http.Handler]
	other atomic.Pointer[http.Handler]
	// guarded is the dispatch behind the guard, and authed the handler of
	// each route behind authentication, by route index; set by handler.
	guarded http.Handler
	authed  []http.Handler
}

// Handle registers rt. Call it before the router serves.
func (rt *Router) Handle(r Route) {
	if (r.Handler == nil) == (r.Build == nil) {
		panic("server: route " + r.Name + " must set exactly one of Handler and Build")
	}
	rt.routes = append(rt.routes, r)
}

// Classified is what the Router read of a request: the route it takes and
// what it said about itself. It is in the request's context (ClassifiedFrom).
type Classified struct {
	// Route is the route taken, or nil when none matches.
	Route *Route
	// Service is the scope's service name; "" for an unsigned request.
	Service string
	// Target is X-Amz-Target's prefix before its last '.'; "" without one.
	Target string
	// Path is the request's path, cleaned (path.Clean of the decoded path):
	// what routes match, and what decides whether a route is Public.
	Path string

	index int // of Route in the router's routes
}

type classifiedKey struct{}

// ClassifiedFrom returns the Router's reading of the request ctx belongs
// to, or nil outside the Router.
func ClassifiedFrom(ctx context.Context) *Classified {
	c, _ := ctx.Value(classifiedKey{}).(*Classified)
	return c
}

// scopeService returns the service of r's SigV4 credential scope, from the
// Authorization header or the X-Amz-Credential query parameter; "" when r
// carries neither, or one that is not of the form KEY/DATE/REGION/SERVICE/...
// (authentication then refuses it, with the reason).
func scopeService(r *http.Request) string {
	if sigV2(r) {
		return "s3"
	}
	cred := ""
	if h := r.Header.Get("Authorization"); h != "" {
		_, rest, _ := strings.Cut(h, "Credential=")
		cred, _, _ = strings.Cut(rest, ",")
	} else if r.URL.RawQuery != "" && strings.Contains(r.URL.RawQuery, "X-Amz-Credential") {
		if q, err := url.ParseQuery(r.URL.RawQuery); err == nil {
			cred = q.Get("X-Amz-Credential")
		}
	}
	f := strings.Split(strings.TrimSpace(cred), "/")
	if len(f) < 5 {
		return ""
	}
	return f[3]
}

// sigV2 reports whether r is signed with AWS Signature Version 2, which
// of the services qshare serves only S3 took: an "AWS KEY:SIGNATURE"
// Authorization, or the AWSAccessKeyId, Signature and Expires of a URL
// that boto3 and the AWS CLI presign so for S3 by default (aws s3
// presign). Such a request goes to the embedded store, which serves it
// without --auth, as it serves a SigV4 one unchecked; with --auth,
// authentication refuses it, in S3's shape.
func sigV2(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		return strings.HasPrefix(h, "AWS ") && strings.Contains(h, ":")
	}
	if r.URL.RawQuery == "" || !strings.Contains(r.URL.RawQuery, "AWSAccessKeyId") {
		return false
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	return err == nil && q.Has("AWSAccessKeyId") && q.Has("Signature") && q.Has("Expires")
}

// classify reads r and picks its route.
func (rt *Router) classify(r *http.Request) *Classified {
	c := &Classified{Service: scopeService(r), Path: cleanPath(r.URL.Path)}
	if t := r.Header.Get("X-Amz-Target"); t != "" {
		if i := strings.LastIndexByte(t, '.'); i > 0 {
			c.Target = t[:i]
		}
	}
	best, bestScore := -1, -1
	for i := range rt.routes {
		m := rt.routes[i].Match
		score := 0
		if m.Target != "" {
			if m.Target != c.Target {
				continue
			}
			score += 1 << 20
		}
		if m.Service != "" && c.Service != "" {
			if m.Service != c.Service {
				continue
			}
			score += 1 << 19
		}
		if m.Path != "" {
			if !pathMatches(m.Path, c.Path) {
				continue
			}
			score += 1 + len(m.Path)
		}
		if score > bestScore {
			best, bestScore = i, score
		}
	}
	if best >= 0 {
		c.Route, c.index = &rt.routes[best], best
	}
	return c
}

// cleanPath is p cleaned as a path, as http.ServeMux cleans it: one
// leading slash, no "." or ".." segments, no doubled slash; a trailing
// slash is kept.
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	if p[0] != '/' {
		p = "/" + p
	}
	c := path.Clean(p)
	if p[len(p)-1] == '/' && c != "/" {
		c += "/"
	}
	return c
}

// pathMatches reports whether the cleaned path p is pattern, or under it
// when pattern ends in "/" (a prefix "/ui/" takes "/ui" too).
func pathMatches(pattern, p string) bool {
	if dir, ok := strings.CutSuffix(pattern, "/"); ok {
		return p == dir || strings.HasPrefix(p, pattern) || pattern == "/"
	}
	return p == pattern
}

// handler returns the router behind guard: what the HTTP server serves.
// The guard's own ConnContext must be installed on the server too.
func (rt *Router) handler(guard *auth.Guard) http.Handler {
	rt.authed = make([]http.Handler, len(rt.routes))
	for i := range rt.routes {
		r := &rt.routes[i]
		var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) { rt.serveRoute(i, w, req) })
		if rt.auth != nil && !r.Public {
			service := r.Match.Service
			if service == "" {
				service = auth.Service
			}
			h = rt.auth.WrapService(service, h)
		}
		rt.authed[i] = h
	}
	rt.guarded = guard.Wrap(http.HandlerFunc(rt.dispatch))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := rt.classify(r)
		ctx := auth.WithErrorWriter(context.WithValue(r.Context(), classifiedKey{}, c), errorWriterOf(c, r))
		rt.guarded.ServeHTTP(w, r.WithContext(ctx))
	})
}

// dispatch sends a request that passed the guard to its route, through
// authentication.
func (rt *Router) dispatch(w http.ResponseWriter, r *http.Request) {
	c := ClassifiedFrom(r.Context())
	if c.Route == nil {
		rt.noRoute(w, r, c)
		return
	}
	if c.Path != r.URL.Path && !c.Route.RawPath {
		w.Header().Set("Connection", "close")
		errorWriterOf(c, r)(w, qshare.Errorf(qshare.EINVALID, "the request's path is not in canonical form (it has \".\" or \"..\" segments, or doubled slashes): send %s", strconv.Quote(clip(c.Path))))
		return
	}
	rt.authed[c.index].ServeHTTP(w, r)
}

// serveRoute serves route i: its own Handler, the current term's, or,
// between terms and on a standby, the other handler.
func (rt *Router) serveRoute(i int, w http.ResponseWriter, r *http.Request) {
	if h := rt.routes[i].Handler; h != nil {
		h.ServeHTTP(w, r)
		return
	}
	if hs := rt.term.Load(); hs != nil {
		if h := (*hs)[i]; h != nil {
			h.ServeHTTP(w, r)
			return
		}
		http.NotFound(w, r)
		return
	}
	(*rt.other.Load()).ServeHTTP(w, r)
}

// lead builds every route's handler for t and puts them in force.
func (rt *Router) lead(t *Term) {
	hs := make([]http.Handler, len(rt.routes))
	for i, r := range rt.routes {
		if r.Build != nil {
			hs[i] = r.Build(t)
		}
	}
	rt.term.Store(&hs)
}

// serveOthers makes h the handler of every route without a Handler of its
// own, until the next lead: the readiness gate before the first term, the
// standby's forwarding after.
func (rt *Router) serveOthers(h http.Handler) {
	rt.other.Store(&h)
	rt.term.Store(nil)
}

// clip cuts a path echoed in an error to 256 bytes.
func clip(s string) string {
	if len(s) > 256 {
		return s[:256] + "…"
	}
	return s
}
