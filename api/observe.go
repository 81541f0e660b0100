package api

import (
	"net/http"
	"strings"
	"time"
)

// Observer receives, once per request the Handler serves, the operation
// (the lower-case name of the path /v1/<operation>, "tagresource",
// "untagresource" or "listtagsforresource" for the tag routes, "unknown"
// for any other path, so that a hostile path cannot grow the set), the
// outcome ("success", or the AWS error type of the answer, such as
// "ClientException") and the time it took. It is called on the request's
// goroutine and must be cheap and safe for concurrent use.
type Observer func(operation, outcome string, elapsed time.Duration)

// Observe makes o receive every request h serves from now on, and returns
// h. Call it before h serves its first request.
func (h *Handler) Observe(o Observer) *Handler {
	h.obs = o
	return h
}

// observe reports a request that began at t0 to h.obs.
func (h *Handler) observe(w http.ResponseWriter, r *http.Request, t0 time.Time) {
	op := "unknown"
	if strings.HasPrefix(r.URL.Path, "/v1/tags/") {
		switch r.Method {
		case http.MethodPost:
			op = "tagresource"
		case http.MethodDelete:
			op = "untagresource"
		case http.MethodGet:
			op = "listtagsforresource"
		}
	} else if name, ok := strings.CutPrefix(r.URL.Path, "/v1/"); ok {
		if _, known := h.ops[name]; known {
			op = name
		}
	}
	outcome := w.Header().Get("X-Amzn-ErrorType")
	if outcome == "" {
		outcome = "success"
	}
	h.obs(op, outcome, time.Since(t0))
}
