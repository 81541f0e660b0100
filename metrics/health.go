package metrics

import (
	"encoding/json"
	"net/http"
	"sync"
)

// Paths of the health probes.
const (
	HealthzPath = "/healthz"
	ReadyzPath  = "/readyz"
)

// Health is the server's readiness: not ready, with a reason, until the
// store is loaded and recovery has finished, then ready until shutdown
// begins. Its methods are safe for concurrent use.
type Health struct {
	mu     sync.RWMutex
	ready  bool
	reason string
}

// NewHealth returns a Health that is not ready, for reason.
func NewHealth(reason string) *Health { return &Health{reason: reason} }

// SetReady makes the server ready.
func (h *Health) SetReady() {
	h.mu.Lock()
	h.ready, h.reason = true, ""
	h.mu.Unlock()
}

// SetNotReady makes the server not ready, for reason.
func (h *Health) SetNotReady(reason string) {
	h.mu.Lock()
	h.ready, h.reason = false, reason
	h.mu.Unlock()
}

// Ready reports whether the server is ready, and if not, why.
func (h *Health) Ready() (bool, string) {
	h.mu.RLock()
	defer h.mu.RUnlock()
	return h.ready, h.reason
}

// probe answers only GET and HEAD, with a plain-text body.
func probe(w http.ResponseWriter, r *http.Request, status int, body string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		w.WriteHeader(http.StatusMethodNotAllowed)
		_, _ = w.Write([]byte(r.Method + " is not allowed here: use GET\n"))
		return
	}
	w.WriteHeader(status)
	if r.Method == http.MethodGet {
		_, _ = w.Write([]byte(body + "\n"))
	}
}

// Healthz serves GET /healthz: 200 "ok" whenever the process serves HTTP.
func (h *Health) Healthz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		probe(w, r, http.StatusOK, "ok")
	})
}

// Readyz serves GET /readyz: 200 "ready" when the server is ready, else 503
// with the reason.
func (h *Health) Readyz() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, why := h.Ready(); !ok {
			probe(w, r, http.StatusServiceUnavailable, "not ready: "+why)
			return
		}
		probe(w, r, http.StatusOK, "ready")
	})
}

// Gate serves next once the server is ready; before, it answers 503 with a
// ServerException in the AWS error format, which the AWS SDKs retry, and
// the reason.
func (h *Health) Gate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if ok, why := h.Ready(); !ok {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Amzn-ErrorType", "ServerException")
			w.Header().Set("Retry-After", "1")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write(notReadyBody(why))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func notReadyBody(why string) []byte {
	b, _ := json.Marshal(map[string]string{"__type": "ServerException", "message": "the server is not ready yet (" + why + "); retry shortly"})
	return b
}
