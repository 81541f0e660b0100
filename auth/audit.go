package auth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Audit is the audit log (qshare serve --audit FILE): one JSON line per
// mutating request and per refused one (denied or throttled), appended to a file that is never
// rewritten, and made durable (fsync) before the request's response is
// sent. Lines that arrive together share one fsync. It is safe for
// concurrent use.
//
// With a size limit (OpenAuditRotating) the file is rotated when a line
// would take it past the limit: it is made durable and kept whole under
// the name FILE.TIME (a new name, never one that exists), and FILE starts
// again empty. Rotation never removes or rewrites a file, so no line that
// was written is ever lost; removing old files is the operator's choice.
type Audit struct {
	f    *os.File
	path string
	max  int64 // bytes; 0: never rotate

	mu      sync.Mutex // serialises writes
	written uint64     // lines written
	size    int64      // bytes in f
	err     error      // the first write error: every later line fails

	syncMu sync.Mutex // one fsync at a time
	synced uint64     // lines made durable
}

// OpenAudit opens (creating it, mode 0600) the audit log at path for
// appending. An existing file is kept and appended to. It is never
// rotated.
func OpenAudit(path string) (*Audit, error) { return OpenAuditRotating(path, 0) }

// OpenAuditRotating is OpenAudit with rotation at maxSize bytes (0: never).
func OpenAuditRotating(path string, maxSize int64) (*Audit, error) {
	f, size, err := openAuditFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return nil, err
	}
	return &Audit{f: f, path: path, max: maxSize, size: size}, nil
}

// openAuditFile opens path with flag, mode 0600, and checks that it is a
// regular file; it returns the file and its size.
func openAuditFile(path string, flag int) (*os.File, int64, error) {
	f, err := os.OpenFile(path, flag, 0o600)
	if err != nil {
		return nil, 0, fmt.Errorf("--audit: %w", err)
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, 0, fmt.Errorf("--audit %s: not a regular file", path)
	}
	return f, st.Size(), nil
}

// rotate keeps the current file whole under a new name and starts an
// empty one at the audit log's path; with syncMu and mu held. Every line
// written so far is made durable first. The old name is given by a hard
// link, which fails rather than replace a file; the new file is created
// beside it and renamed over the path, so that the path always names a
// complete log.
func (a *Audit) rotate() error {
	if err := a.f.Sync(); err != nil {
		return err
	}
	a.synced = a.written
	var kept string
	for i := 0; ; i++ {
		kept = a.path + "." + time.Now().UTC().Format("20060102T150405.000000000Z")
		if i > 0 {
			kept += "-" + strconv.Itoa(i)
		}
		err := os.Link(a.path, kept)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrExist) || i > 100 {
			return fmt.Errorf("rotating the audit log: %w", err)
		}
	}
	tmp := a.path + ".new"
	_ = os.Remove(tmp) // a leftover of a crash between create and rename: empty, or lines already kept
	f, _, err := openAuditFile(tmp, os.O_WRONLY|os.O_APPEND|os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, a.path); err != nil {
		f.Close()
		return fmt.Errorf("rotating the audit log: %w", err)
	}
	if d, err := os.Open(filepath.Dir(a.path)); err == nil {
		_ = d.Sync() // the new names are durable
		d.Close()
	}
	a.f.Close()
	a.f, a.size = f, 0
	return nil
}

// Close closes the file.
func (a *Audit) Close() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.f.Close()
}

// AuditEntry is one line of the audit log.
type AuditEntry struct {
	Time      time.Time `json:"time"`
	Principal string    `json:"principal,omitempty"` // the caller's ARN; empty when unauthenticated
	Source    string    `json:"source"`              // the client's address
	Method    string    `json:"method"`
	Path      string    `json:"path"`
	Action    string    `json:"action,omitempty"`   // batch:…, when the route authorized one
	Resource  []string  `json:"resource,omitempty"` // the resources it was checked against
	Outcome   string    `json:"outcome"`            // ok, denied, throttled, error, or refusals (OutcomeRefusals)
	Status    int       `json:"status"`
	ErrorType string    `json:"errorType,omitempty"` // the AWS error, as X-Amzn-ErrorType
	RequestID string    `json:"requestId,omitempty"`
	// Peer and Count are those of an OutcomeRefusals line: the peer (a
	// local user's uid, or an IP) and how many of its requests were
	// refused since its last such line.
	Peer  string `json:"peer,omitempty"`
	Count int    `json:"count,omitempty"`
}

// OutcomeRefusals is the outcome of the line that stands for the refusals
// of one peer beyond its refusal budget, which are not audited one by one:
// one such line per peer at most every ten seconds, with their count, so
// that a flood of refused requests cannot grow the log without bound.
const OutcomeRefusals = "refusals"

// Write appends e as one line and returns once it is durable.
func (a *Audit) Write(e *AuditEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	b = append(b, '\n')
	a.mu.Lock()
	full := a.max > 0 && a.size > 0 && a.size+int64(len(b)) > a.max
	a.mu.Unlock()
	if full {
		// syncMu before mu, as Write's own fsync takes them.
		a.syncMu.Lock()
		a.mu.Lock()
		if a.err == nil && a.size > 0 && a.size+int64(len(b)) > a.max {
			a.err = a.rotate()
		}
		a.mu.Unlock()
		a.syncMu.Unlock()
	}
	a.mu.Lock()
	if a.err == nil {
		var n int
		n, a.err = a.f.Write(b)
		a.size += int64(n)
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
	a.mu.Lock()
	f := a.f // rotation, which holds syncMu too, cannot swap it now
	a.mu.Unlock()
	if err := f.Sync(); err != nil {
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
	e := &AuditEntry{Time: time.Now().UTC(), Source: w.r.RemoteAddr, Method: clip(w.r.Method), Path: clip(w.r.URL.Path),
		Action: w.rec.action, Resource: w.rec.resources, Outcome: outcome, Status: status,
		ErrorType: h.Get("X-Amzn-ErrorType"), RequestID: h.Get("X-Amzn-RequestId")}
	if p := w.rec.principal; p != nil {
		e.Principal = p.ARN
	}
	if err := w.a.Write(e); err != nil {
		w.fail(err)
	}
}
