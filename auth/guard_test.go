package auth_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"qshare/api"
	"qshare/auth"
)

// guarded is a real HTTP server on a loopback port with the Guard installed
// in front of a handler that counts the requests that reach it, the way
// qshare serve installs it.
type guarded struct {
	url, port string
	client    *http.Client // trusts the server's certificate, with TLS
	reached   atomic.Int32
}

// raw sends request, as it is written, to the server on a new connection
// (closed when the test ends) and reads the answer, within 10 s; it fails
// the test when the request cannot be sent.
func (s *guarded) raw(t *testing.T, request string) (*http.Response, error) {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(s.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, request); err != nil {
		t.Fatal(err)
	}
	return http.ReadResponse(bufio.NewReader(c), nil)
}

func startGuarded(t *testing.T, cfg auth.Config) *guarded {
	t.Helper()
	s := &guarded{}
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.reached.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"jobSummaryList":[]}`)
	}))
	ts.Config.ReadHeaderTimeout = 10 * time.Second
	cfg.Addr = ts.Listener.Addr().String()
	cfg.WriteError = api.WriteError
	g, err := auth.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	g.Install(ts.Config)
	if cfg.TLS {
		ts.StartTLS()
	} else {
		ts.Start()
	}
	t.Cleanup(ts.Close)
	s.url, s.client = ts.URL, ts.Client()
	_, s.port, _ = net.SplitHostPort(cfg.Addr)
	return s
}

// attack is one request as a hostile page or client would send it.
type attack struct {
	name    string
	method  string
	path    string
	host    string // empty: the URL's
	header  map[string]string
	body    string
	chunked bool
	status  int    // what the guard must answer; 200 means let through
	typ     string // the X-Amzn-ErrorType of a refusal
	says    string // a part of its message
}

func (s *guarded) send(t *testing.T, a attack) (int, string, string) {
	t.Helper()
	var body io.Reader
	if a.body != "" {
		body = strings.NewReader(a.body)
		if a.chunked { // no Content-Length: the body arrives chunked
			body = io.MultiReader(strings.NewReader(a.body))
		}
	}
	method := a.method
	if method == "" {
		method = http.MethodPost
	}
	req, err := http.NewRequest(method, s.url+a.path, body)
	if err != nil {
		t.Fatal(err)
	}
	if a.host != "" {
		req.Host = strings.ReplaceAll(a.host, "PORT", s.port)
	}
	for k, v := range a.header {
		req.Header.Set(k, strings.ReplaceAll(v, "PORT", s.port))
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}
	if resp.StatusCode != http.StatusOK {
		if err := json.Unmarshal(b, &e); err != nil {
			t.Fatalf("%s: the refusal is not the AWS JSON error shape: %s", a.name, b)
		}
		if h := resp.Header.Get("X-Amzn-ErrorType"); h != e.Type {
			t.Errorf("%s: X-Amzn-ErrorType %q, body __type %q", a.name, h, e.Type)
		}
		if resp.Header.Get("X-Amzn-RequestId") == "" {
			t.Errorf("%s: no X-Amzn-RequestId", a.name)
		}
	}
	return resp.StatusCode, e.Type, e.Message
}

const submit = `{"jobName":"pwn","jobQueue":"q","serviceJobType":"SAGEMAKER_TRAINING","serviceRequestPayload":"{\"AlgorithmSpecification\":{\"TrainingImage\":\"sh\",\"ContainerEntrypoint\":[\"sh\",\"-c\",\"id; head /etc/shadow\"]}}"}`

// TestBrowserAttacksRefused sends the requests a web page in the
// operator's browser can make, and a DNS-rebinding page's, and shows each
// refused before the handler behind the guard sees it; the same requests
// as an API client sends them get through.
func TestBrowserAttacksRefused(t *testing.T) {
	s := startGuarded(t, auth.Config{AllowOrigins: []string{"https://dash.example.com:8443"}, AllowHosts: []string{"qshare.internal", "tunnel.example:9000"}})
	const denied, client = "AccessDeniedException", "ClientException"
	jsonCT := map[string]string{"Content-Type": "application/json"}
	with := func(kv ...string) map[string]string {
		m := map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			m[kv[i]] = kv[i+1]
		}
		return m
	}
	for _, a := range []attack{
		// Issue 14's reproduction: a "simple" cross-site POST, which needs
		// no CORS preflight.
		{name: "issue 14 text/plain cross-site submit", path: "/v1/submitservicejob", body: submit,
			header: with("Content-Type", "text/plain", "Origin", "http://evil.example", "Sec-Fetch-Site", "cross-site"), status: 403, typ: denied, says: "http://evil.example"},
		{name: "text/plain submit, no Origin", path: "/v1/submitservicejob", body: submit,
			header: with("Content-Type", "text/plain"), status: 400, typ: client, says: `Content-Type is "text/plain"`},
		{name: "form submit", path: "/v1/submitservicejob", body: "a=b",
			header: with("Content-Type", "application/x-www-form-urlencoded"), status: 400, typ: client, says: "application/json"},
		{name: "multipart submit", path: "/v1/submitservicejob", body: "--x--",
			header: with("Content-Type", "multipart/form-data; boundary=x"), status: 400, typ: client, says: "Content-Type"},
		{name: "body without Content-Type", path: "/v1/submitservicejob", body: submit, status: 400, typ: client, says: "Content-Type is none"},
		{name: "chunked text/plain", path: "/v1/submitservicejob", body: submit, chunked: true,
			header: with("Content-Type", "text/plain"), status: 400, typ: client, says: "Content-Type"},
		{name: "Origin evil with JSON", path: "/v1/listjobs", body: "{}",
			header: with("Content-Type", "application/json", "Origin", "http://evil.example"), status: 403, typ: denied, says: "--allow-origin"},
		{name: "Origin null (sandboxed page)", path: "/v1/listjobs", body: "{}",
			header: with("Content-Type", "application/json", "Origin", "null"), status: 403, typ: denied, says: "Origin"},
		{name: "Origin of another local port", path: "/v1/listjobs", body: "{}",
			header: with("Content-Type", "application/json", "Origin", "http://127.0.0.1:3000"), status: 403, typ: denied, says: "Origin"},
		{name: "Sec-Fetch-Site cross-site, no Origin", method: "GET", path: "/qshare/v1/logs/x",
			header: with("Sec-Fetch-Site", "cross-site"), status: 403, typ: denied, says: "cross-site"},
		{name: "Sec-Fetch-Site same-site", path: "/v1/listjobs", body: "{}",
			header: with("Content-Type", "application/json", "Sec-Fetch-Site", "same-site"), status: 403, typ: denied, says: "same-site"},
		{name: "DNS rebinding Host", path: "/v1/listjobs", body: "{}", host: "attacker.example:PORT", header: jsonCT, status: 403, typ: denied, says: "attacker.example"},
		{name: "DNS rebinding Host, no port", method: "GET", path: "/qshare/v1/logs/x", host: "attacker.example", status: 403, typ: denied, says: "Host"},
		{name: "own IP on another port", path: "/v1/listjobs", body: "{}", host: "127.0.0.1:1", header: jsonCT, status: 403, typ: denied, says: "Host"},
		{name: "allowed host on another port", path: "/v1/listjobs", body: "{}", host: "tunnel.example:9001", header: jsonCT, status: 403, typ: denied, says: "Host"},

		// What API clients send, and what the allow lists allow.
		{name: "SDK request", path: "/v1/submitservicejob", body: submit, header: jsonCT, status: 200},
		{name: "JSON with charset", path: "/v1/listjobs", body: "{}", header: with("Content-Type", "application/json; charset=utf-8"), status: 200},
		{name: "JSON, upper case", path: "/v1/listjobs", body: "{}", header: with("Content-Type", "Application/JSON"), status: 200},
		{name: "empty input as the Go SDK sends it", path: "/v1/listschedulingpolicies", body: "{}", header: jsonCT, status: 200},
		{name: "no body, no Content-Type (GET tags, botocore's empty input)", method: "GET", path: "/v1/tags/arn", status: 200},
		{name: "no body, any Content-Type", method: "DELETE", path: "/v1/tags/arn", header: with("Content-Type", "text/plain"), status: 200},
		{name: "localhost", path: "/v1/listjobs", body: "{}", host: "localhost:PORT", header: jsonCT, status: 200},
		{name: "LOCALHOST", path: "/v1/listjobs", body: "{}", host: "LOCALHOST:PORT", header: jsonCT, status: 200},
		{name: "[::1]", path: "/v1/listjobs", body: "{}", host: "[::1]:PORT", header: jsonCT, status: 200},
		{name: "allowed host, any port", path: "/v1/listjobs", body: "{}", host: "qshare.internal:443", header: jsonCT, status: 200},
		{name: "allowed host, no port", path: "/v1/listjobs", body: "{}", host: "qshare.internal", header: jsonCT, status: 200},
		{name: "allowed host:port", path: "/v1/listjobs", body: "{}", host: "tunnel.example:9000", header: jsonCT, status: 200},
		{name: "allowed origin", path: "/v1/listjobs", body: "{}",
			header: with("Content-Type", "application/json", "Origin", "https://dash.example.com:8443", "Sec-Fetch-Site", "cross-site"), status: 200},
		{name: "the server's own origin (the future dashboard)", path: "/v1/listjobs", body: "{}",
			header: with("Content-Type", "application/json", "Origin", "http://127.0.0.1:PORT", "Sec-Fetch-Site", "same-origin"), status: 200},
		{name: "Sec-Fetch-Site none (typed in the address bar)", method: "GET", path: "/qshare/v1/logs/x", header: with("Sec-Fetch-Site", "none"), status: 200},
	} {
		before := s.reached.Load()
		status, typ, msg := s.send(t, a)
		passed := s.reached.Load() != before
		if status != a.status {
			t.Errorf("%s: status %d (%s %s), want %d", a.name, status, typ, msg, a.status)
			continue
		}
		if a.status == 200 {
			if !passed {
				t.Errorf("%s: answered 200 but the handler was not reached", a.name)
			}
			continue
		}
		if passed {
			t.Errorf("%s: refused, but the handler behind the guard saw the request", a.name)
		}
		if typ != a.typ || !strings.Contains(msg, a.says) {
			t.Errorf("%s: %s %q, want %s saying %q", a.name, typ, msg, a.typ, a.says)
		}
		if strings.Contains(msg, "/tmp") || strings.Contains(msg, "/proc") {
			t.Errorf("%s: the message shows a server path: %s", a.name, msg)
		}
	}
}

// TestOwnOriginOverTLS: a server that speaks HTTPS is its own origin as
// https:// and its Host, so the dashboard it serves keeps working (a
// browser sends Origin with every POST the page makes, same-origin ones
// included); the http:// origin of the same host and port is no page of
// this server's.
func TestOwnOriginOverTLS(t *testing.T) {
	s := startGuarded(t, auth.Config{TLS: true})
	for _, a := range []attack{
		{name: "the server's own https origin", path: "/v1/listservicejobs", body: "{}",
			header: map[string]string{"Content-Type": "application/json", "Origin": "https://127.0.0.1:PORT", "Sec-Fetch-Site": "same-origin"}, status: 200},
		{name: "the http origin of the server's host and port", path: "/v1/listservicejobs", body: "{}",
			header: map[string]string{"Content-Type": "application/json", "Origin": "http://127.0.0.1:PORT"}, status: 403},
	} {
		before := s.reached.Load()
		status, typ, msg := s.send(t, a)
		if status != a.status || (status == 200) != (s.reached.Load() != before) {
			t.Errorf("%s: %d %s %q (handler reached: %v), want %d", a.name, status, typ, msg, s.reached.Load() != before, a.status)
		}
	}
}

// TestRefusedBodyIsNotRead shows that a refused request's body is not read:
// a client that sends the headers and then stalls still gets its answer.
func TestRefusedBodyIsNotRead(t *testing.T) {
	s := startGuarded(t, auth.Config{})
	// A 1 MiB body is announced, and none of it is sent.
	resp, err := s.raw(t, "POST /v1/submitservicejob HTTP/1.1\r\nHost: "+strings.TrimPrefix(s.url, "http://")+"\r\nContent-Type: text/plain\r\nContent-Length: 1048576\r\n\r\n")
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	if resp.StatusCode != 400 || resp.Header.Get("X-Amzn-ErrorType") != "ClientException" {
		t.Fatalf("answer %s %q, want 400 ClientException", resp.Status, resp.Header.Get("X-Amzn-ErrorType"))
	}
	if s.reached.Load() != 0 {
		t.Fatal("the handler behind the guard saw the request")
	}
}

// TestConfigRefused shows that allow lists that would not do what they
// seem to are refused at start, naming the flag.
func TestConfigRefused(t *testing.T) {
	for _, c := range []auth.Config{
		{AllowOrigins: []string{"*"}},
		{AllowOrigins: []string{"evil.example"}},
		{AllowOrigins: []string{"https://dash.example.com/app"}},
		{AllowOrigins: []string{"file:///"}},
		{AllowHosts: []string{""}},
		{AllowHosts: []string{"a b"}},
		{AllowHosts: []string{"host:0"}},
		{AllowHosts: []string{"http://host"}},
	} {
		c.Addr, c.WriteError = "127.0.0.1:8750", api.WriteError
		_, err := auth.New(c)
		if err == nil {
			t.Errorf("%+v: accepted", c)
			continue
		}
		if !strings.Contains(err.Error(), "--allow-") {
			t.Errorf("%+v: %v does not name the flag", c, err)
		}
	}
	if _, err := auth.New(auth.Config{Addr: "127.0.0.1:8750"}); err == nil {
		t.Error("a Guard without WriteError was made")
	}
}

// TestSameUserServed: with the same-user rule on, this process's own
// connections (same uid as the server) are served, one lookup per
// connection however many requests it carries. The other user's refusal is
// shown against the real binary in test/security.
func TestSameUserServed(t *testing.T) {
	s := startGuarded(t, auth.Config{SameUserOnly: true})
	for i := 0; i < 3; i++ {
		if status, typ, msg := s.send(t, attack{name: "own user", path: "/v1/listjobs", body: "{}", header: map[string]string{"Content-Type": "application/json"}}); status != 200 {
			t.Fatalf("own user refused: %d %s %s", status, typ, msg)
		}
	}
}

// BenchmarkGuard measures what the guard adds to each request an AWS SDK
// sends (the per-connection user lookup is BenchmarkConnUID).
func BenchmarkGuard(b *testing.B) {
	g, err := auth.New(auth.Config{Addr: "127.0.0.1:8750", AllowHosts: []string{"qshare.internal"}, WriteError: api.WriteError})
	if err != nil {
		b.Fatal(err)
	}
	h := g.Wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:8750/v1/listjobs", strings.NewReader("{}"))
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(w, req)
	}
}

// TestNoHostRefused: an HTTP/1.0 request without a Host header names no
// server, so it is refused like a wrong name.
func TestNoHostRefused(t *testing.T) {
	s := startGuarded(t, auth.Config{})
	resp, err := s.raw(t, "GET /qshare/v1/logs/x HTTP/1.0\r\n\r\n")
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 403 || resp.Header.Get("X-Amzn-ErrorType") != "AccessDeniedException" || s.reached.Load() != 0 {
		t.Fatalf("answer %s %q, reached %d; want 403 AccessDeniedException", resp.Status, resp.Header.Get("X-Amzn-ErrorType"), s.reached.Load())
	}
}
