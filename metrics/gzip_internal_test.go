package metrics

import (
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestGzipped: a scraper that accepts gzip gets the answer gzipped, whole,
// without the plain body's length; one that does not (or refuses it with
// q=0) gets it plain. Each answer says it varies with Accept-Encoding.
func TestGzipped(t *testing.T) {
	body := strings.Repeat("qshare_jobs{queue=\"training\",share=\"QS1\",status=\"RUNNING\"} 1\n", 5000)
	h := gzipped(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "1") // must not survive compression
		w.Header().Set("Content-Type", "text/plain; version=0.0.4")
		io.WriteString(w, body)
	}))
	for _, c := range []struct {
		accept string
		gzip   bool
	}{{"gzip", true}, {"deflate, gzip;q=0.5", true}, {"GZIP", true}, {"", false}, {"identity", false}, {"gzip;q=0", false}, {"br, gzip; q=0.000", false}} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, Path, nil)
		if c.accept != "" {
			req.Header.Set("Accept-Encoding", c.accept)
		}
		h.ServeHTTP(rec, req)
		res := rec.Result()
		if res.Header.Get("Vary") != "Accept-Encoding" {
			t.Errorf("Accept-Encoding %q: Vary %q", c.accept, res.Header.Get("Vary"))
		}
		got := rec.Body.String()
		if c.gzip {
			if res.Header.Get("Content-Encoding") != "gzip" || res.Header.Get("Content-Length") != "" {
				t.Fatalf("Accept-Encoding %q: Content-Encoding %q, Content-Length %q", c.accept, res.Header.Get("Content-Encoding"), res.Header.Get("Content-Length"))
			}
			zr, err := gzip.NewReader(rec.Body)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(zr)
			if err != nil {
				t.Fatal(err)
			}
			got = string(b)
		} else if res.Header.Get("Content-Encoding") != "" {
			t.Errorf("Accept-Encoding %q: Content-Encoding %q, want none", c.accept, res.Header.Get("Content-Encoding"))
		}
		if got != body {
			t.Errorf("Accept-Encoding %q: the body is not the handler's (%d bytes, want %d)", c.accept, len(got), len(body))
		}
	}
}
