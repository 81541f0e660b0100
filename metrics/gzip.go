package metrics

import (
	"compress/gzip"
	"net/http"
	"strings"
	"sync"
)

// gzipWriters are reused from scrape to scrape: a gzip.Writer holds about
// 800 KB of tables, which a new one per scrape would allocate each time.
var gzipWriters = sync.Pool{New: func() any {
	w, _ := gzip.NewWriterLevel(nil, gzip.BestSpeed) // a valid level: no error
	return w
}}

// gzipped serves next's answer gzipped, at gzip.BestSpeed, to a scraper
// that accepts gzip (as Prometheus does), and as it is to the others.
// promhttp's own compression uses the default level, which at 100,000 jobs
// cost about a quarter more of the server's CPU per scrape for an answer a
// tenth smaller (docs/metrics.md, Cost); a scrape's CPU is what the server
// must keep low.
func gzipped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Add("Vary", "Accept-Encoding")
		if !acceptsGzip(r.Header.Values("Accept-Encoding")) {
			next.ServeHTTP(w, r)
			return
		}
		gz := gzipWriters.Get().(*gzip.Writer)
		gz.Reset(w)
		defer func() {
			_ = gz.Close()
			gz.Reset(nil)
			gzipWriters.Put(gz)
		}()
		w.Header().Set("Content-Encoding", "gzip")
		next.ServeHTTP(&gzipResponse{ResponseWriter: w, gz: gz}, r)
	})
}

// gzipResponse writes the body through gz.
type gzipResponse struct {
	http.ResponseWriter
	gz          *gzip.Writer
	wroteHeader bool
}

func (g *gzipResponse) Write(p []byte) (int, error) {
	if !g.wroteHeader {
		g.WriteHeader(http.StatusOK)
	}
	return g.gz.Write(p)
}

// WriteHeader drops a Content-Length, which would be the plain body's.
func (g *gzipResponse) WriteHeader(code int) {
	if g.wroteHeader {
		return
	}
	g.wroteHeader = true
	g.Header().Del("Content-Length")
	g.ResponseWriter.WriteHeader(code)
}

// acceptsGzip reports whether Accept-Encoding values offer gzip with a
// quality above 0.
func acceptsGzip(values []string) bool {
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
				continue
			}
			q := strings.ReplaceAll(strings.TrimSpace(params), " ", "")
			if q == "q=0" || q == "q=0.0" || q == "q=0.00" || q == "q=0.000" {
				return false
			}
			return true
		}
	}
	return false
}
