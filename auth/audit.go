package auth

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"
)

// Audit is the audit log (qshare serve --audit FILE): one JSON line per
// mutating request and per refused one (denied or throttled), appended to a file that is never
// rewritten, and made durable (fsync) before the request's response is
// sent. Lines that arrive together share one fsync. It is safe for
// concurrent use.
type Audit struct {
	f *os.File

	mu      sync.Mutex // serialises writes
	written uint64     // lines written
	err     error      // the first write error: every later line fails

	syncMu sync.Mutex // one fsync at a time
	synced uint64     // lines made durable
}

// OpenAudit opens (creating it, mode 0600) the audit log at path for
// appending. An existing file is kept and appended to.
func OpenAudit(path string) (*Audit, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("--audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("--audit %s: not a regular file", path)
	}
	return &Audit{f: f}, nil
}

// Close closes the file.
func (a *Audit) Close() error { return a.f.Close() }

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	Time      time.Time `json:"time"`
	Principal string    `json:"principal,omitempty"` // the caller's ARN; empty when unauthenticated
	Source    string    `json:"source"`              // the client's address
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Action    string    `json:"action,omitempty"`   // batch:…, when the route authorized one
	Resource  []string  `json:"resource,omitempty"` // the resources it was checked against
	Outcome   string    `json:"outcome"`            // ok, denied, throttled, or error
	Status    int       `json:"status"`
	ErrorType string    `json:"errorType,omitempty"` // the AWS error, as X-Amzn-ErrorType
	RequestID string    `json:"requestId,omitempty"`
}

// Write appends e as one line and returns once it is durable.
func (a *Audit) Write(e *AuditEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	if a.err == nil {
		_, a.err = a.f.Write(b)
	}
	err = a.err
	a.written++
	mine := a.written
	a.mu.Unlock()
	if err != nil {
		return err
	}
	a.syncMu.Lock()
	defer a.syncMu.Unlock()
	if a.synced >= mine {
		return nil // another's fsync covered it
	}
	a.mu.Lock()
	upTo := a.written
	a.mu.Unlock()
	if err := a.f.Sync(); err != nil {
		return err
	}
	a.synced = upTo
	return nil
}

// auditKey is the context key of a request's *auditRecord.
type auditKey struct{}

// auditRecord is what Authorize tells the audit log about a request.
type auditRecord struct {
	principal *Principal
	action    string
	resources []string
}

// notePrincipal records the authenticated caller of the request ctx
// belongs to, for the audit log.
func notePrincipal(ctx context.Context, p *Principal) {
	if r, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		r.principal = p
	}
}

// noteAuthorization records an authorization check of the request ctx
// belongs to, for the audit log.
func noteAuthorization(ctx context.Context, action string, resources []string) {
	if r, ok := ctx.Value(auditKey{}).(*auditRecord); ok {
		r.action = action
		r.resources = append(r.resources, resources...)
	}
}

// auditWriter writes the request's audit line, when it needs one, at the
// response's WriteHeader: before a byte of the response is sent.
type auditWriter struct {
	http.ResponseWriter
	a    *Audit
	r    *http.Request
	rec  *auditRecord
	done bool
	fail func(error)
}

func (w *auditWriter) WriteHeader(status int) {
	if !w.done {
		w.done = true
		w.audit(status)
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Flush lets a streamed response (a followed log) flush through.
func (w *auditWriter) Flush() {
	if !w.done {
		w.WriteHeader(http.StatusOK)
	}
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection.
func (w *auditWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// readOnly reports whether an action only reads.
func readOnly(action string) bool {
	_, name, _ := strings.Cut(action, ":")
	for _, p := range []string{"Describe", "List", "Get"} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

func (w *auditWriter) audit(status int) {
	outcome := "ok"
	switch {
	case status == http.StatusForbidden:
		outcome = "denied"
	case status == http.StatusTooManyRequests:
		outcome = "throttled"
	case status >= 400:
		outcome = "error"
	}
	mutating := w.r.Method != http.MethodGet && w.r.Method != http.MethodHead
	if w.rec.action != "" {
		mutating = !readOnly(w.rec.action)
	}
	if !mutating && outcome != "denied" && outcome != "throttled" {
		return
	}
	h := w.ResponseWriter.Header()
	e := &AuditEntry{Time: time.Now().UTC(), Source: w.r.RemoteAddr, Method: w.r.Method, Path: w.r.URL.Path,
		Action: w.rec.action, Resource: w.rec.resources, Outcome: outcome, Status: status,
		ErrorType: h.Get("X-Amzn-ErrorType"), RequestID: h.Get("X-Amzn-RequestId")}
	if p := w.rec.principal; p != nil {
		e.Principal = p.ARN
	}
	if err := w.a.Write(e); err != nil {
		w.fail(err)
	}
}
