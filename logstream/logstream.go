// Package logstream serves the output of a job's attempts over HTTP. It is
// qshare's one extension of the AWS Batch API, which has no operation for a
// service job's logs (SageMaker keeps them in CloudWatch):
//
//	GET /qshare/v1/logs/{jobId}?attempt=N&follow=true
//
// {jobId} is a job id or a job ARN (path-escaped). The answer is the
// attempt's output as text/plain, oldest line first: the files the executor
// rotated out (LOG.K … LOG.1) and then the current one (qshare.Attempt.LogPath).
//
//   - attempt=N picks the job's N-th attempt (from 1); the default is the
//     latest attempt.
//   - follow=true keeps the response open and sends output as it is
//     written, until the attempt ends. Without attempt=N it then goes on with
//     the job's next attempt (a line "==> attempt N <==" separates them), until
//     the job is SUCCEEDED or FAILED; on a job that has not started yet it
//     waits for its first attempt.
//
// Errors have the AWS wire form that the API uses: a JSON body
// {"__type": "ClientException", "message": "..."} with the X-Amzn-ErrorType
// header; status 400 for a request the caller must change (an unknown job,
// an attempt that does not exist, an attempt without a log), 500 when
// qshare failed.
//
// It sits beside the API at the server's edge: the server mounts Handler at
// PathPrefix, and `qshare logs` is its client. It reads the log files
// directly, so the server must run on the host the executor writes them to.
package logstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"qshare"
)

// PathPrefix is where the server mounts the Handler.
const PathPrefix = "/qshare/v1/logs/"

// MaxRotated is the most rotated files (LOG.1 … LOG.MaxRotated) a response
// includes before the current one.
const MaxRotated = 20

// JobFunc returns the job with the given id or ARN, or an error: a
// *qshare.Error with code ENOTFOUND for an unknown job. The daemon's Job
// method is one.
type JobFunc func(ref string) (*qshare.Job, error)

// Handler serves PathPrefix. Its fields must be set before it serves; it is
// safe for concurrent use.
type Handler struct {
	// Job looks a job up. Required.
	Job JobFunc
	// Poll is how often a follow looks for new output and for the end of
	// the attempt; 0 means 250ms.
	Poll time.Duration
}

// New returns a Handler that looks jobs up with job.
func New(job JobFunc) *Handler { return &Handler{Job: job} }

func (h *Handler) poll() time.Duration {
	if h.Poll > 0 {
		return h.Poll
	}
	return 250 * time.Millisecond
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet {
		w.Header().Set("Allow", http.MethodGet)
		writeError(w, http.StatusMethodNotAllowed, "ClientException", fmt.Sprintf("%s is not allowed here: use GET %s{jobId}", r.Method, PathPrefix))
		return
	}
	ref := strings.TrimPrefix(r.URL.Path, PathPrefix)
	if ref == "" || ref == r.URL.Path {
		writeError(w, http.StatusBadRequest, "ClientException", "the job is missing: use GET "+PathPrefix+"{jobId}")
		return
	}
	q := r.URL.Query()
	attempt := 0
	if s := q.Get("attempt"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			writeError(w, http.StatusBadRequest, "ClientException", fmt.Sprintf("attempt %q is not valid: give an attempt number from 1", s))
			return
		}
		attempt = n
	}
	follow := false
	if s := q.Get("follow"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			writeError(w, http.StatusBadRequest, "ClientException", fmt.Sprintf("follow %q is not valid: use true or false", s))
			return
		}
		follow = b
	}

	j, err := h.Job(ref)
	if err != nil {
		writeErr(w, err)
		return
	}
	// Decide what to send before the first byte, so that an error can
	// still be an error response.
	n := attempt
	if n == 0 {
		n = len(j.Attempts)
	}
	switch {
	case n == 0 && !follow:
		writeErr(w, qshare.Errorf(qshare.EINVALID, "job %s has not started yet (it is %s): it has no log; use follow=true to wait for it", j.Name, j.Status))
		return
	case n > len(j.Attempts) && (!follow || j.Status.Terminal()):
		writeErr(w, qshare.Errorf(qshare.EINVALID, "job %s has %d attempts: attempt %d does not exist", j.Name, len(j.Attempts), n))
		return
	case n >= 1 && n <= len(j.Attempts) && noLog(&j.Attempts[n-1]):
		writeErr(w, qshare.Errorf(qshare.EINVALID, "attempt %d of job %s has no log: the executor that ran it keeps no output (the simulated executor never does)", n, j.Name))
		return
	case n >= 1 && n <= len(j.Attempts) && !follow && !logReady(&j.Attempts[n-1]):
		writeErr(w, qshare.Errorf(qshare.EINVALID, "attempt %d of job %s is starting and has no log yet: try again in a moment, or use follow=true", n, j.Name))
		return
	}

	if n == 0 {
		n = 1 // follow a job that has not started: wait for its first attempt
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	out := &flushWriter{w: w}
	if f, ok := w.(http.Flusher); ok {
		out.f = f
	}
	out.flush() // send the headers now: a follow may wait long for output
	if !follow {
		_ = copyAll(out, j.Attempts[n-1].LogPath)
		return
	}
	// A follow lasts as long as the job: lift the server's write timeout
	// for this response (servers that cannot just keep theirs).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	h.follow(r.Context(), out, ref, n, attempt == 0)
}

// noLog reports whether an attempt has started (the executor set its log
// path then, if it keeps one) or ended without a log.
func noLog(a *qshare.Attempt) bool {
	return a.LogPath == "" && (!a.StartedAt.IsZero() || !a.StoppedAt.IsZero())
}

// logReady reports whether an attempt's log path is known for good.
func logReady(a *qshare.Attempt) bool {
	return a.LogPath != "" || !a.StartedAt.IsZero() || !a.StoppedAt.IsZero()
}

// follow streams attempt n of the job, and the attempts after it when
// onward is set, until they end or ctx is done.
func (h *Handler) follow(ctx context.Context, w *flushWriter, ref string, n int, onward bool) {
	first := true
	for {
		// Wait for attempt n to exist.
		var a *qshare.Attempt
		for a == nil {
			j, err := h.Job(ref)
			if err != nil {
				return
			}
			if n <= len(j.Attempts) && logReady(&j.Attempts[n-1]) {
				a = &j.Attempts[n-1]
				break
			}
			if j.Status.Terminal() {
				return
			}
			if !sleep(ctx, h.poll()) {
				return
			}
		}
		if !first {
			fmt.Fprintf(w, "==> attempt %d <==\n", n)
			w.flush()
		}
		first = false
		if a.LogPath == "" {
			fmt.Fprintf(w, "(attempt %d keeps no log)\n", n)
			w.flush()
		} else if !h.tail(ctx, w, ref, n, a.LogPath) {
			return
		}
		if !onward {
			return
		}
		n++
	}
}

// tail sends a log's rotated files and then its current file, and goes on
// sending what is appended until attempt n of the job has stopped. It
// reports false when the client went away.
func (h *Handler) tail(ctx context.Context, w *flushWriter, ref string, n int, path string) bool {
	for k := MaxRotated; k >= 1; k-- {
		_ = copyFile(w, fmt.Sprintf("%s.%d", path, k))
	}
	var f *os.File
	defer func() {
		if f != nil {
			f.Close()
		}
	}()
	for {
		// Open the current file once it exists; reopen it when it was
		// rotated (after draining the old one, which the open handle
		// still reads).
		if st, err := os.Stat(path); err == nil {
			if f != nil {
				if fst, err := f.Stat(); err == nil && !os.SameFile(st, fst) {
					_, _ = io.Copy(w, f)
					f.Close()
					f = nil
				}
			}
			if f == nil {
				if f, err = os.Open(path); err != nil {
					f = nil
				}
			}
		}
		if f != nil {
			if _, err := io.Copy(w, f); err != nil {
				return false
			}
		}
		w.flush()
		if w.err != nil {
			return false
		}
		j, err := h.Job(ref)
		if err != nil {
			return false
		}
		stopped := n <= len(j.Attempts) && !j.Attempts[n-1].StoppedAt.IsZero()
		if stopped {
			if f != nil {
				_, _ = io.Copy(w, f) // the last words
			}
			w.flush()
			return w.err == nil
		}
		if !sleep(ctx, h.poll()) {
			return false
		}
	}
}

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// copyAll writes a log's rotated files, oldest first, and then the log.
func copyAll(w io.Writer, path string) error {
	for k := MaxRotated; k >= 1; k-- {
		_ = copyFile(w, fmt.Sprintf("%s.%d", path, k))
	}
	return copyFile(w, path)
}

func copyFile(w io.Writer, path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}

// flushWriter flushes the response as output arrives, and remembers the
// first write error (the client went away).
type flushWriter struct {
	w   io.Writer
	f   http.Flusher
	err error
}

func (fw *flushWriter) Write(p []byte) (int, error) {
	if fw.err != nil {
		return 0, fw.err
	}
	n, err := fw.w.Write(p)
	if err != nil {
		fw.err = err
	}
	return n, err
}

func (fw *flushWriter) flush() {
	if fw.f != nil && fw.err == nil {
		fw.f.Flush()
	}
}

// writeErr writes err in the AWS wire form, mapped as the API maps it.
func writeErr(w http.ResponseWriter, err error) {
	if qshare.ErrorCodeOf(err) == qshare.EINTERNAL {
		writeError(w, http.StatusInternalServerError, "ServerException", qshare.ErrorMessageOf(err))
		return
	}
	writeError(w, http.StatusBadRequest, "ClientException", qshare.ErrorMessageOf(err))
}

func writeError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", typ)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"__type": typ, "message": msg})
}

// Error is an error response of the endpoint, as a client reads it.
type Error struct {
	Status  int
	Type    string `json:"__type"`
	Message string `json:"message"`
}

// Error returns the message.
func (e *Error) Error() string { return e.Message }

// ReadError reads an error response; it always returns a non-nil *Error.
func ReadError(resp *http.Response) *Error {
	e := &Error{Status: resp.StatusCode}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if json.Unmarshal(b, e) != nil || e.Message == "" {
		e.Message = fmt.Sprintf("the server answered %s: %s", resp.Status, strings.TrimSpace(string(b)))
		if resp.StatusCode == http.StatusNotFound {
			e.Message = "this server does not serve logs (" + PathPrefix + " is not mounted): it may be an older qshare"
		}
	}
	if e.Type == "" {
		e.Type = resp.Header.Get("X-Amzn-ErrorType")
	}
	return e
}

// IsClientError reports whether err is a ClientException from the endpoint.
func IsClientError(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.Type == "ClientException"
}
