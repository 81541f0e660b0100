package server

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// testRouter has the shape of qshare serve's routes (services.go) plus
// the AWS services that register beside them, each answering its name.
func testRouter() *Router {
	rt := &Router{}
	named := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.Write([]byte(name)) })
	}
	for _, r := range []Route{
		{Name: "healthz", Match: Match{Service: "batch", Path: "/healthz"}, Public: true},
		{Name: "batch", Match: Match{Service: "batch"}},
		{Name: "plans", Match: Match{Service: "batch", Path: "/qshare/v1/plans/"}},
		{Name: "dashboard", Match: Match{Service: "batch", Path: "/ui/"}, Public: true},
		{Name: "metrics", Match: Match{Service: "batch", Path: "/metrics"}},
		{Name: "s3", Match: Match{Service: "s3"}},
		{Name: "sts", Match: Match{Service: "sts"}},
		{Name: "sagemaker", Match: Match{Service: "sagemaker", Target: "SageMaker"}},
		{Name: "logs", Match: Match{Target: "Logs_20140328"}},
	} {
		r.Handler = named(r.Name)
		rt.Handle(r)
	}
	return rt
}

func signedFor(service string) string {
	return "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20261204/us-east-1/" + service + "/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + "00"
}

// TestRouterMatch: each request goes to the service it names, by its
// scope, its X-Amz-Target and then its path; qshare's own paths are not
// reachable by a request signed for another service (an S3 bucket named
// "ui" or "metrics"), and a path that cleans into a public route is
// matched, and so authenticated, by its cleaned form.
func TestRouterMatch(t *testing.T) {
	rt := testRouter()
	for _, c := range []struct {
		method, target, auth, query, target2 string
		want                                 string
	}{
		{"POST", "/v1/createjobqueue", signedFor("batch"), "", "", "batch"},
		{"POST", "/v1/createjobqueue", "", "", "", "batch"}, // unsigned, no --auth
		{"GET", "/healthz", "", "", "", "healthz"},
		{"GET", "/metrics", signedFor("batch"), "", "", "metrics"},
		{"GET", "/metrics", "", "", "", "metrics"},
		{"GET", "/metrics", signedFor("s3"), "", "", "s3"}, // the bucket "metrics"
		{"GET", "/ui/app.js", "", "", "", "dashboard"},
		{"GET", "/ui", "", "", "", "dashboard"},
		{"GET", "/ui/key", signedFor("s3"), "", "", "s3"},
		{"GET", "/v1/key", signedFor("s3"), "", "", "s3"},
		{"GET", "/bucket/key", "", "X-Amz-Credential=AKID%2F20261204%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00", "", "s3"},
		{"PUT", "/qshare/v1/plans/p1", signedFor("batch"), "", "", "plans"},
		{"GET", "/qshare/v1/plans", "", "", "", "plans"},
		{"POST", "/", signedFor("sts"), "", "", "sts"},
		{"POST", "/", signedFor("sagemaker"), "", "SageMaker.DescribeTrainingJob", "sagemaker"},
		{"POST", "/", signedFor("sagemaker"), "", "", ""}, // SageMaker without a target: no route
		{"POST", "/", signedFor("logs"), "", "Logs_20140328.GetLogEvents", "logs"},
		{"POST", "/", signedFor("ec2"), "", "", ""},                   // a service qshare does not serve
		{"GET", "/ui/../v1/listservicejobs", "", "", "", "batch"},     // not the public dashboard
		{"GET", "/ui%2F..%2Fv1/listservicejobs", "", "", "", "batch"}, // decoded, then cleaned
	} {
		u := c.target
		if c.query != "" {
			u += "?" + c.query
		}
		req := httptest.NewRequest(c.method, "http://127.0.0.1:8750/", nil)
		req.URL.RawPath = ""
		if err := setPath(req, u); err != nil {
			t.Fatal(err)
		}
		if c.auth != "" {
			req.Header.Set("Authorization", c.auth)
		}
		if c.target2 != "" {
			req.Header.Set("X-Amz-Target", c.target2)
		}
		got := rt.classify(req)
		name := ""
		if got.Route != nil {
			name = got.Route.Name
		}
		if name != c.want {
			t.Errorf("%s %s (auth %q, target %q): route %q, want %q (path %q)", c.method, u, c.auth, c.target2, name, c.want, got.Path)
		}
	}
}

// setPath sets req's URL to the path and query of u as a client sent it.
func setPath(req *http.Request, u string) error {
	r, err := http.NewRequest(req.Method, "http://127.0.0.1:8750"+u, nil)
	if err != nil {
		return err
	}
	req.URL = r.URL
	req.RequestURI = r.URL.RequestURI()
	return nil
}

// TestRouteNeedsOneHandler: a route with neither Handler nor Build, or
// both, is a programming error caught at registration.
func TestRouteNeedsOneHandler(t *testing.T) {
	for _, r := range []Route{{Name: "none"}, {Name: "both", Handler: http.NotFoundHandler(), Build: func(*Term) http.Handler { return nil }}} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%s) did not panic", r.Name)
				}
			}()
			(&Router{}).Handle(r)
		}()
	}
}
