package web_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"qshare/auth"
	"qshare/event"
	"qshare/web"
)

func get(t *testing.T, h http.Handler, method, target string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Result().Header, string(b)
}

// TestHandler: the page and its files are served from the binary, with a
// policy that lets them load and call only their own origin; the
// dashboard is read-only.
func TestHandler(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle(web.Path, web.Handler(web.Config{Region: "us-east-1"}))
	for _, c := range []struct{ path, ctype, body string }{
		{"/ui/", "text/html", `<script src="app.js">`},
		{"/ui/app.js", "javascript", `"Content-Type": "application/json"`},
		{"/ui/app.css", "text/css", "--reserved"},
		{"/ui/config.json", "application/json", `{"auth":false,"region":"us-east-1"}`},
	} {
		status, h, body := get(t, mux, http.MethodGet, c.path)
		if status != http.StatusOK || !strings.Contains(h.Get("Content-Type"), c.ctype) || !strings.Contains(body, c.body) {
			t.Errorf("GET %s: %d %s, want %s with %q", c.path, status, h.Get("Content-Type"), c.ctype, c.body)
		}
		if csp := h.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") || strings.Contains(csp, "unsafe") {
			t.Errorf("GET %s: Content-Security-Policy %q, want default-src 'self' and nothing unsafe", c.path, csp)
		}
		if strings.Contains(body, "http://") || strings.Contains(body, "https://") {
			t.Errorf("GET %s loads or names something from another origin", c.path)
		}
	}
	if status, h, _ := get(t, mux, http.MethodPost, "/ui/"); status != http.StatusMethodNotAllowed || h.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /ui/: %d, want 405 with Allow: GET, HEAD", status)
	}
	if status, _, _ := get(t, mux, http.MethodGet, "/ui/../../etc/passwd"); status == http.StatusOK {
		t.Errorf("GET /ui/../../etc/passwd: %d", status)
	}
	if status, _, _ := get(t, mux, http.MethodGet, "/ui/nope.js"); status != http.StatusNotFound {
		t.Errorf("GET /ui/nope.js: %d, want 404", status)
	}
}

// TestEvents: the endpoint gives the last hour of a real event log's
// starts, preemptions, finishes and failures, with the jobs' names; bad
// parameters are ClientExceptions; without a log it says so.
func TestEvents(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	f, err := event.OpenFile(filepath.Join(t.TempDir(), "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	at := func(ago float64) float64 { return float64(now.Unix()) - ago }
	if err := f.Append([]event.Event{
		{T: at(7200), Job: "old", Event: event.Start, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1},
		{T: at(600), Job: "a", Event: event.Submit, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1},
		{T: at(500), Job: "a", Event: event.Start, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1},
		{T: at(400), Job: "a", Event: event.Stopping, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1, For: "b"},
		{T: at(300), Job: "a", Event: event.Preempt, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1, For: "b", Reason: "in-share"},
		{T: at(200), Job: "b", Event: event.Finish, Share: "QS1", Queue: "q", InstanceType: "ml.g5.xlarge", Instances: 1},
	}); err != nil {
		t.Fatal(err)
	}
	names := map[string]string{"a": "job-a", "b": "job-b"}
	h := web.EventsHandler(f.Events, func(_ context.Context, id string) string { return names[id] }, nil, func() time.Time { return now })
	status, _, body := get(t, h, http.MethodGet, web.EventsPath)
	var r web.EventsResponse
	if err := json.Unmarshal([]byte(body), &r); err != nil || status != http.StatusOK {
		t.Fatalf("GET: %d %s", status, body)
	}
	var got []string
	for _, e := range r.Events {
		got = append(got, string(e.Event.Event)+":"+e.JobName+">"+e.ForName)
	}
	if !r.Enabled || r.Since != at(3600) || strings.Join(got, ",") != "start:job-a>,preempt:job-a>job-b,finish:job-b>" {
		t.Errorf("GET = %s, want the start, preemption and finish of the last hour, named", body)
	}
	_, _, body = get(t, h, http.MethodGet, web.EventsPath+"?since=1799999750")
	if err := json.Unmarshal([]byte(body), &r); err != nil || len(r.Events) != 1 || r.Events[0].Event.Event != event.Finish {
		t.Errorf("GET ?since=: %s, want the finish alone", body)
	}

	for _, c := range []struct{ method, query, want string }{
		{http.MethodGet, "?since=soon", "since must be one time"},
		{http.MethodGet, "?since=NaN", "since must be one time"},
		{http.MethodGet, "?since=1&since=2", "since must be one time"},
		{http.MethodGet, "?since=1", "more than a day back"},
		{http.MethodGet, "?from=1", `"from" is not known`},
		{http.MethodGet, "?%zz", "not valid"},
		{http.MethodPost, "", "POST is not allowed"},
	} {
		status, _, body := get(t, h, c.method, web.EventsPath+c.query)
		var e struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		_ = json.Unmarshal([]byte(body), &e)
		if status != http.StatusBadRequest || e.Type != "ClientException" || !strings.Contains(e.Message, c.want) {
			t.Errorf("%s %s: %d %s, want a ClientException saying %q", c.method, c.query, status, body, c.want)
		}
	}

	off := web.EventsHandler(nil, nil, nil, nil)
	status, _, body = get(t, off, http.MethodGet, web.EventsPath)
	if status != http.StatusOK || body != `{"enabled":false,"since":`+strings.TrimSpace(strings.SplitN(strings.SplitN(body, `"since":`, 2)[1], ",", 2)[0])+`,"events":[]}` {
		t.Errorf("without a log: %d %s, want enabled false and no events", status, body)
	}
}

// TestWhoAmI: the caller's principal, or none without authentication; a
// bad request is a ClientException.
func TestWhoAmI(t *testing.T) {
	h := web.WhoAmIHandler()
	if status, _, body := get(t, h, http.MethodGet, web.WhoAmIPath); status != http.StatusOK || body != `{"authentication":false,"principal":""}` {
		t.Errorf("GET without authentication: %d %s", status, body)
	}
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodGet, web.WhoAmIPath, nil)
	h.ServeHTTP(rec, req.WithContext(auth.WithPrincipal(req.Context(), &auth.Principal{Name: "alice", ARN: "arn:aws:iam::000000000000:user/alice"})))
	if b, _ := io.ReadAll(rec.Result().Body); rec.Code != http.StatusOK || string(b) != `{"authentication":true,"principal":"arn:aws:iam::000000000000:user/alice"}` {
		t.Errorf("GET as alice: %d %s", rec.Code, b)
	}
	for _, c := range []struct{ method, target string }{{http.MethodPost, web.WhoAmIPath}, {http.MethodGet, web.WhoAmIPath + "?x=1"}, {http.MethodGet, web.WhoAmIPath + "/more"}} {
		if status, h, _ := get(t, h, c.method, c.target); status != http.StatusBadRequest || h.Get("X-Amzn-ErrorType") != "ClientException" {
			t.Errorf("%s %s: %d %s, want 400 ClientException", c.method, c.target, status, h.Get("X-Amzn-ErrorType"))
		}
	}
}

// TestEventsErrorNamesNoPath: an event log that cannot be read (here,
// removed under the server) is a ServerException that says why, without
// the server's path of the file.
func TestEventsErrorNamesNoPath(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	f, err := event.OpenFile(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	status, h, body := get(t, web.EventsHandler(f.Events, nil, nil, nil), http.MethodGet, web.EventsPath)
	if status != http.StatusInternalServerError || h.Get("X-Amzn-ErrorType") != "ServerException" || !strings.Contains(body, "no such file") || strings.Contains(body, filepath.Dir(path)) {
		t.Fatalf("GET with the event log removed: %d %s %s, want a ServerException that says why and names no path", status, h.Get("X-Amzn-ErrorType"), body)
	}
}
