// Package logstream serves the output of a job's attempts over HTTP. It is
// qshare's one extension of the AWS Batch API, which has no operation for a
// service job's logs (SageMaker keeps them in CloudWatch):
//
//	GET /qshare/v1/logs/{jobId}?attempt=N&follow=true
//
// {jobId} is a job id or a job ARN (path-escaped). The answer is the
// attempt's output as text/plain, oldest line first, as the executor's Logs
// method returns it (executor.Executor): the endpoint knows nothing of where
// an executor keeps its output (the process executor's files and their
// rotations, a cluster's log service).
//
//   - attempt=N picks the job's N-th attempt (from 1); the default is the
//     latest attempt.
//   - instance=K picks the attempt's instance K (from 0; the default is 0),
//     for an executor that keeps one log per instance (InstanceLogs).
//   - follow=true keeps the response open and sends output as it is
//     written, until the attempt ends. Without attempt=N it then goes on with
//     the job's next attempt (a line "==> attempt N <==" separates them), until
//     the job is SUCCEEDED or FAILED; on a job that has not started yet it
//     waits for its first attempt.
//
// Errors are written by the API's one error table (api.WriteError): a JSON
// body {"__type": "ClientException", "message": "..."} with the
// X-Amzn-ErrorType header; status 400 for a request the caller must change
// (an unknown job, an attempt that does not exist, an attempt without a
// log, a method other than GET), 500 when qshare failed.
//
// With authentication on (qshare serve --auth), reading a log is the action
// batch:GetServiceJobLogs on the job's ARN and its quota share's
// (auth.Authorize), checked before anything of the job is told.
//
// It sits beside the API at the server's edge: the server mounts Handler at
// PathPrefix, and `qshare logs` is its client.
package logstream

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"qshare"
	"qshare/api"
	"qshare/auth"
	"qshare/executor"
)

// PathPrefix is where the server mounts the Handler.
const PathPrefix = "/qshare/v1/logs/"

// JobFunc returns the job with the given id or ARN, or an error: a
// *qshare.Error with code ENOTFOUND for an unknown job. The daemon's Job
// method is one.
type JobFunc func(ref string) (*qshare.Job, error)

// LogFunc returns the log of an attempt, by attempt ID, as
// executor.Executor's Logs does (its errors included): the server passes
// its executor's Logs method.
type LogFunc func(ctx context.Context, attemptID string, follow bool) (io.ReadCloser, error)

// Handler serves PathPrefix. Its fields must be set before it serves; it is
// safe for concurrent use.
type Handler struct {
	// Job looks a job up. Required.
	Job JobFunc
	// Logs reads an attempt's log. Required.
	Logs LogFunc
	// InstanceLogs reads the log of one instance of an attempt
	// (executor.InstanceLogger); nil means the executor keeps one log per
	// attempt, and only instance 0 exists.
	InstanceLogs func(ctx context.Context, attemptID string, instance int, follow bool) (io.ReadCloser, error)
	// Resources returns the ARNs a read of the log of the job ref (an ID
	// or ARN, as the request gives it) is authorized against
	// (auth.Authorize, action api.ActionGetServiceJobLogs): the server
	// passes api.JobResources, the job's quota share's ARN and the job's
	// own, or for a job that does not exist the ARN it would have. Nil
	// means the job's ARN alone (ref itself for an unknown job).
	Resources func(ref string) []string
	// Poll is how often a follow looks for the job's next attempt; 0 means
	// 250ms. (How often an attempt's own log is polled, if at all, is the
	// executor's business.)
	Poll time.Duration
}

// New returns a Handler that looks jobs up with job and reads their
// attempts' logs with logs.
func New(job JobFunc, logs LogFunc) *Handler { return &Handler{Job: job, Logs: logs} }

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
		api.WriteError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed here: use GET %s{jobId}", r.Method, PathPrefix))
		return
	}
	ref := strings.TrimPrefix(r.URL.Path, PathPrefix)
	if ref == "" || ref == r.URL.Path {
		api.WriteError(w, qshare.Errorf(qshare.EINVALID, "the job is missing: use GET %s{jobId}", PathPrefix))
		return
	}
	q := r.URL.Query()
	attempt := 0
	if s := q.Get("attempt"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "attempt %q is not valid: give an attempt number from 1", s))
			return
		}
		attempt = n
	}
	if s := q.Get("instance"); s != "" && s != "0" {
		k, err := strconv.Atoi(s)
		switch {
		case err != nil || k < 0:
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "instance %q is not valid: give an instance number from 0", s))
			return
		case h.InstanceLogs == nil:
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "instance %d: this server's executor keeps one log per attempt, that of instance 0", k))
			return
		}
		// The rest of this request reads that instance's log.
		c := *h
		c.Logs = func(ctx context.Context, id string, follow bool) (io.ReadCloser, error) {
			return h.InstanceLogs(ctx, id, k, follow)
		}
		h = &c
	}
	follow := false
	if s := q.Get("follow"); s != "" {
		b, err := strconv.ParseBool(s)
		if err != nil {
			api.WriteError(w, qshare.Errorf(qshare.EINVALID, "follow %q is not valid: use true or false", s))
			return
		}
		follow = b
	}

	j, err := h.Job(ref)
	res := []string{ref} // an unknown job: the caller learns of it only if allowed on it
	switch {
	case h.Resources != nil:
		res = h.Resources(ref)
	case err == nil:
		res = []string{j.ARN}
	}
	if aerr := auth.Authorize(r.Context(), api.ActionGetServiceJobLogs, res...); aerr != nil {
		api.WriteError(w, aerr)
		return
	}
	if err != nil {
		api.WriteError(w, err)
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
		api.WriteError(w, qshare.Errorf(qshare.EINVALID, "job %s has not started yet (it is %s): it has no log; use follow=true to wait for it", j.Name, j.Status))
		return
	case n > len(j.Attempts) && (!follow || j.Status.Terminal()):
		api.WriteError(w, qshare.Errorf(qshare.EINVALID, "job %s has %d attempts: attempt %d does not exist", j.Name, len(j.Attempts), n))
		return
	case n >= 1 && n <= len(j.Attempts) && !follow && !logReady(&j.Attempts[n-1]):
		api.WriteError(w, qshare.Errorf(qshare.EINVALID, "attempt %d of job %s is starting and has no log yet: try again in a moment, or use follow=true", n, j.Name))
		return
	}
	// Open the first log before the first byte, so that an error can still
	// be an error response.
	var first io.ReadCloser
	if n >= 1 && n <= len(j.Attempts) && logReady(&j.Attempts[n-1]) {
		first, err = h.Logs(r.Context(), j.Attempts[n-1].ID, follow)
		if err != nil {
			api.WriteError(w, logError(err, n, j.Name))
			return
		}
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
		if first != nil {
			_ = out.copy(first)
			first.Close()
		}
		return
	}
	// A follow lasts as long as the job: lift the server's write timeout
	// for this response (servers that cannot just keep theirs).
	_ = http.NewResponseController(w).SetWriteDeadline(time.Time{})
	// It also lasts only while its caller may read it: a reload of the
	// auth file that removes the caller's key, or takes the permission
	// away, ends it.
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	go func() {
		for {
			reloaded := auth.Reloaded(ctx)
			if reloaded == nil {
				return
			}
			if err := auth.Recheck(ctx, api.ActionGetServiceJobLogs, res...); err != nil {
				cancel(err)
				return
			}
			select {
			case <-ctx.Done():
				return
			case <-reloaded:
			}
		}
	}()
	h.follow(ctx, out, ref, n, attempt == 0, first)
	if qe := (*qshare.Error)(nil); errors.As(context.Cause(ctx), &qe) && r.Context().Err() == nil {
		fmt.Fprintf(out, "(the follow ends: %s)\n", qe.Message)
		out.flush()
	}
}

// logError is the error of a log that Logs would not give.
func logError(err error, n int, job string) error {
	if errors.Is(err, executor.ErrNoLog) || errors.Is(err, executor.ErrUnknownAttempt) {
		return qshare.Errorf(qshare.EINVALID, "attempt %d of job %s has no log: the executor that ran it keeps no output (the simulated executor never does)", n, job)
	}
	return err
}

// logReady reports whether an attempt has got as far as its start, or its
// end, so that its log is the executor's to give. (LogPath, set at the
// start by an executor that keeps a log, only says so too; it is never
// read as a path here.)
func logReady(a *qshare.Attempt) bool {
	return a.LogPath != "" || !a.StartedAt.IsZero() || !a.StoppedAt.IsZero()
}

// follow streams attempt n of the job (first is its log, if already open;
// follow closes it), and the attempts after it when onward is set, until
// they end or ctx is done.
func (h *Handler) follow(ctx context.Context, w *flushWriter, ref string, n int, onward bool, first io.ReadCloser) {
	for k := 0; ; k++ {
		var a *qshare.Attempt
		for first == nil && a == nil {
			// Wait for attempt n to start.
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
		if k > 0 {
			fmt.Fprintf(w, "==> attempt %d <==\n", n)
			w.flush()
		}
		rc := first
		first = nil
		if rc == nil {
			var err error
			rc, err = h.Logs(ctx, a.ID, true)
			switch {
			case errors.Is(err, executor.ErrNoLog) || errors.Is(err, executor.ErrUnknownAttempt):
				fmt.Fprintf(w, "(attempt %d keeps no log)\n", n)
				w.flush()
			case err != nil:
				fmt.Fprintf(w, "(the log of attempt %d cannot be read: %s)\n", n, qshare.ErrorMessageOf(err))
				w.flush()
				return
			}
		}
		if rc != nil {
			err := w.copy(rc)
			rc.Close()
			if err != nil || ctx.Err() != nil {
				return
			}
		}
		if !onward {
			return
		}
		n++
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

// copy sends what r returns, flushing after every read, until r ends (nil)
// or fails, or the client goes away (the error).
func (fw *flushWriter) copy(r io.Reader) error {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := fw.Write(buf[:n]); werr != nil {
				return werr
			}
			fw.flush()
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
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
