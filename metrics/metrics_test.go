package metrics_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"qshare/metrics"
)

func get(t *testing.T, h http.Handler, method string) (int, http.Header, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, "/x", nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, rec.Header(), string(b)
}

// TestHealth checks the probes and the gate through a server's life: not
// ready with a reason, ready, then not ready again at shutdown.
func TestHealth(t *testing.T) {
	h := metrics.NewHealth("loading the store")
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusTeapot) })
	gate := h.Gate(api)

	if code, _, body := get(t, h.Healthz(), http.MethodGet); code != 200 || body != "ok\n" {
		t.Errorf("healthz while loading = %d %q, want 200 ok", code, body)
	}
	if code, _, body := get(t, h.Readyz(), http.MethodGet); code != 503 || body != "not ready: loading the store\n" {
		t.Errorf("readyz while loading = %d %q, want 503 with the reason", code, body)
	}
	code, hdr, body := get(t, gate, http.MethodPost)
	var e map[string]string
	if code != 503 || hdr.Get("X-Amzn-ErrorType") != "ServerException" || json.Unmarshal([]byte(body), &e) != nil ||
		e["__type"] != "ServerException" || !strings.Contains(e["message"], "loading the store") {
		t.Errorf("the API while loading = %d %v %q, want a 503 ServerException naming the reason", code, hdr, body)
	}
	if code, hdr, _ := get(t, h.Readyz(), http.MethodPost); code != 405 || hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST readyz = %d, want 405 with Allow", code)
	}

	h.SetReady()
	if code, _, body := get(t, h.Readyz(), http.MethodGet); code != 200 || body != "ready\n" {
		t.Errorf("readyz when ready = %d %q, want 200", code, body)
	}
	if code, _, body := get(t, h.Readyz(), http.MethodHead); code != 200 || body != "" {
		t.Errorf("HEAD readyz = %d %q, want 200 without a body", code, body)
	}
	if code, _, _ := get(t, gate, http.MethodPost); code != http.StatusTeapot {
		t.Errorf("the API when ready = %d, want the API's own answer", code)
	}

	h.SetNotReady("shutting down")
	if code, _, body := get(t, h.Readyz(), http.MethodGet); code != 503 || !strings.Contains(body, "shutting down") {
		t.Errorf("readyz at shutdown = %d %q", code, body)
	}
	if code, _, _ := get(t, h.Healthz(), http.MethodGet); code != 200 {
		t.Errorf("healthz at shutdown = %d, want 200 while the process serves", code)
	}
}

// documented reads the rows of docs/metrics.md's table: name -> type.
func documented(t *testing.T) map[string]string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| ([a-z]+) \\|").FindAllStringSubmatch(string(b), -1) {
		out[m[1]] = m[2]
	}
	if len(out) == 0 {
		t.Fatal("docs/metrics.md lists no metric")
	}
	return out
}

// collected returns the families of a fresh Metrics' registry (the Go
// runtime and process collectors, and the qshare families that have no
// labels).
func collected(t *testing.T) map[string]bool {
	t.Helper()
	fams, err := metrics.New().Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		out[f.GetName()] = true
	}
	return out
}

// TestDashboardMetricsExist checks every query of the Grafana dashboard
// (deploy/grafana/qshare.json): each metric it names is a qshare family of
// docs/metrics.md (a histogram's _bucket, _sum and _count series
// included) or a go_ or process_ family the registry really has, and every
// panel queries at least one.
func TestDashboardMetricsExist(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "deploy", "grafana", "qshare.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Name       string `json:"name"`
				Definition string `json:"definition"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("deploy/grafana/qshare.json: %v", err)
	}
	docs := documented(t)
	runtime := collected(t)
	name := regexp.MustCompile(`\b(qshare|go|process)_[a-z0-9_]+\b`)
	known := func(n string) bool {
		if strings.HasPrefix(n, "qshare_") {
			if _, ok := docs[n]; ok {
				return true
			}
			for _, suf := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(n, suf); ok && docs[base] == "histogram" {
					return true
				}
			}
			return false
		}
		return runtime[n]
	}
	check := func(where, expr string) int {
		found := 0
		for _, n := range name.FindAllString(expr, -1) {
			if !known(n) {
				t.Errorf("%s: query %q uses %s, which /metrics does not expose (docs/metrics.md)", where, expr, n)
			}
			found++
		}
		return found
	}
	if len(dash.Panels) == 0 {
		t.Fatal("the dashboard has no panels")
	}
	used := map[string]bool{}
	for _, p := range dash.Panels {
		n := 0
		for _, tg := range p.Targets {
			n += check("panel "+p.Title, tg.Expr)
			for _, m := range name.FindAllString(tg.Expr, -1) {
				used[strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(m, "_bucket"), "_count"), "_sum")] = true
			}
		}
		if n == 0 {
			t.Errorf("panel %q queries no metric", p.Title)
		}
	}
	for _, v := range dash.Templating.List {
		check("variable "+v.Name, v.Definition)
	}
	for n := range docs {
		if !used[n] {
			t.Errorf("no panel shows %s", n)
		}
	}
}
