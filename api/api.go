// Package api is qshare's AWS Batch restJson1 endpoint: it routes
// "POST /v1/<operation>" and the tag routes, decodes request bodies (with
// size limits) into daemon commands, encodes the results in the exact wire
// shapes of AWS Batch, and maps every error to ClientException,
// ServerException or (for the request guard of package auth, through
// WriteError) AccessDeniedException in one table, so the AWS SDKs work
// against it unchanged.
//
// It holds no state of its own: every operation is one call on the daemon.
// Beside the AWS operations it serves qshare's lending extension
// (LendingHandler, at LendingPath), through the same error table.
package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"reflect"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"qshare"
	"qshare/auth"
	"qshare/aws/wire"
	"qshare/daemon"
)

// Body size limits. A submit is capped at the AWS request limit (30 KiB);
// other requests are small, and 1 MiB is far above any valid one.
const (
	maxSubmitBody = qshare.MaxSubmitRequestBytes
	maxBody       = 1 << 20
)

// errorTable is the one place where a qshare error code becomes an AWS Batch
// error type and HTTP status: Batch's own, and those that every service of
// the endpoint answers alike (package aws/wire).
var errorTable = wire.Common(wire.RestJSON, wire.Errors{
	qshare.EINVALID:  {Code: "ClientException", Status: http.StatusBadRequest},
	qshare.ENOTFOUND: {Code: "ClientException", Status: http.StatusBadRequest},
	qshare.ECONFLICT: {Code: "ClientException", Status: http.StatusBadRequest},
})

// Handler serves the AWS Batch API over a daemon.
type Handler struct {
	d   *daemon.Daemon
	log *slog.Logger
	ops map[string]operation
	obs Observer // nil: none (Observe)
}

type operation struct {
	limit  int64
	action string // the IAM action, batch:OperationName
	run    func(ctx context.Context, body []byte) (any, error)
}

// New returns the HTTP handler of the AWS Batch API for d. log receives one
// record per failed request and every recovered panic.
func New(d *daemon.Daemon, log *slog.Logger) *Handler {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	h := &Handler{d: d, log: log}
	h.ops = h.operations()
	return h
}

// ServeHTTP implements http.Handler. Every response carries an
// X-Amzn-RequestId; no request, however malformed, gets anything but a JSON
// answer, and a panic becomes a ServerException.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := uuid.NewString()
	w.Header().Set("X-Amzn-RequestId", rid)
	if h.obs != nil {
		defer h.observe(w, r, time.Now())
	}
	defer func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			h.log.Error("panic while serving a request", "requestId", rid, "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			writeError(w, qshare.Errorf(qshare.EINTERNAL, "internal error (request %s); the request may not have been applied", rid))
		}
	}()
	if strings.HasPrefix(r.URL.Path, "/v1/tags/") {
		h.serveTags(w, r, rid)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, "/v1/")
	o, known := h.ops[name]
	if !ok || !known {
		writeError(w, qshare.Errorf(qshare.EINVALID, "unknown operation %s %s: qshare serves the AWS Batch service-job and quota-management API", r.Method, r.URL.Path))
		return
	}
	if r.Method != http.MethodPost {
		writeError(w, qshare.Errorf(qshare.EINVALID, "%s must be called with POST, not %s", r.URL.Path, r.Method))
		return
	}
	body, err := readBody(w, r, o.limit)
	if err != nil {
		h.fail(w, rid, name, err)
		return
	}
	out, err := o.run(r.Context(), body)
	if err != nil {
		h.fail(w, rid, name, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (h *Handler) fail(w http.ResponseWriter, rid, op string, err error) {
	if qshare.ErrorCodeOf(err) == qshare.EINTERNAL {
		h.log.Error("request failed", "requestId", rid, "op", op, "err", err)
	} else {
		h.log.Debug("request rejected", "requestId", rid, "op", op, "err", err)
	}
	writeError(w, err)
}

func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body, err := readAll(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, limit)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, qshare.Errorf(qshare.EINVALID, "the request body is larger than %d bytes, the most this operation accepts", limit)
		}
		return nil, qshare.Errorf(qshare.EINVALID, "the request body could not be read: %v", err)
	}
	return body, nil
}

// readAll is io.ReadAll that starts with a buffer of the announced
// Content-Length (and one byte more, to see the end), so a body costs one
// allocation instead of io.ReadAll's doubling from 512 bytes.
func readAll(r io.Reader, announced, limit int64) ([]byte, error) {
	size := int64(512)
	if announced > 0 && announced <= limit {
		size = announced + 1
	}
	b := make([]byte, 0, size)
	for {
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err != nil {
			if err == io.EOF {
				err = nil
			}
			return b, err
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)] // grow
		}
	}
}

// WriteError writes err as the API would answer it: the restJson1 error
// format of AWS Batch, typed and given its HTTP status by the one error
// table (EINVALID, ENOTFOUND and ECONFLICT are a 400 ClientException, EDENIED
// a 403 AccessDeniedException, anything else a 500 ServerException whose
// message hides the error's text), with an X-Amzn-RequestId unless w already
// has one. It is how the server's request guard (package auth) refuses a
// request in the wire form the AWS SDKs and CLI read.
func WriteError(w http.ResponseWriter, err error) {
	wire.RequestID(w)
	writeError(w, err)
}

// writeError writes err in the restJson1 error format of AWS Batch.
func writeError(w http.ResponseWriter, err error) {
	e := errorTable.Resolve(err)
	w.Header().Set("X-Amzn-ErrorType", e.Code)
	writeJSON(w, e.Status, map[string]string{"__type": e.Code, "message": e.Message})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = http.StatusInternalServerError
		w.Header().Set("X-Amzn-ErrorType", "ServerException")
		b = []byte(`{"__type":"ServerException","message":"internal error: the response could not be encoded"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// decode reads a JSON object into v. Unknown members are ignored; a value of
// the wrong type is a ClientException that names the member.
func decode(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil
	}
	// Fast path: json.Unmarshal accepts exactly the bodies that decode
	// without error and have nothing but space after the object, and it
	// needs no Decoder and no copy of the body (a third of the allocations
	// of a submit's decoding). Anything it refuses is decoded again below,
	// into a fresh value, so every error message stays the Decoder's.
	if json.Unmarshal(body, v) == nil {
		return nil
	}
	reflect.ValueOf(v).Elem().SetZero()
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return qshare.Errorf(qshare.EINVALID, "the request body is not valid: %s", describeJSONError(err))
	}
	if dec.More() {
		return qshare.Errorf(qshare.EINVALID, "the request body has data after the JSON object: send exactly one object")
	}
	return nil
}

func describeJSONError(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te):
		want := kindName(te.Type)
		if want == "an integer" && strings.HasPrefix(te.Value, "number ") && !strings.ContainsAny(te.Value, ".eE") {
			return fmt.Sprintf("member %s is out of range: give an integer from -2147483648 to 2147483647", te.Field)
		}
		if te.Field != "" {
			return fmt.Sprintf("member %s should be %s, not a JSON %s", te.Field, want, te.Value)
		}
		return fmt.Sprintf("expected a JSON object, not a JSON %s", te.Value)
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d: %v", se.Offset, se)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "the JSON ends too early"
	}
	return err.Error()
}

func kindName(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Int, reflect.Int32, reflect.Int64:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "a boolean"
	case reflect.Slice:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "a " + t.Kind().String()
}

// page cuts one page from items (sorted by key) after the token, converted
// to its wire shape by conv; the page is never nil, so it encodes as [].
func page[T, D any](items []T, key func(T) string, conv func(T) D, in pageIn) ([]D, *string, error) {
	max := int64(100)
	if in.MaxResults != nil {
		max = int64(*in.MaxResults)
		if max < 1 || max > 100 {
			return nil, nil, qshare.Errorf(qshare.EINVALID, "maxResults %d is out of range: use 1 to 100", max)
		}
	}
	start := 0
	if in.NextToken != "" {
		b, err := base64.RawURLEncoding.DecodeString(in.NextToken)
		if err != nil {
			return nil, nil, qshare.Errorf(qshare.EINVALID, "nextToken is not valid: pass the nextToken of the previous response unchanged")
		}
		after := string(b)
		start = sort.Search(len(items), func(i int) bool { return key(items[i]) > after })
	}
	end := start + int(max)
	var tok *string
	if end < len(items) {
		t := base64.RawURLEncoding.EncodeToString([]byte(key(items[end-1])))
		tok = &t
	} else {
		end = len(items)
	}
	out := make([]D, 0, end-start)
	for _, it := range items[start:end] {
		out = append(out, conv(it))
	}
	return out, tok, nil
}

// checkRefs bounds the names or ARNs a describe operation takes.
func checkRefs(field string, refs []string) error {
	if len(refs) > 100 {
		return qshare.Errorf(qshare.EINVALID, "%s has %d entries: at most 100 are allowed", field, len(refs))
	}
	return nil
}

func required(field, v string) error {
	if v == "" {
		return qshare.Errorf(qshare.EINVALID, "%s is required", field)
	}
	return nil
}

// requestHash identifies a submit for clientToken replay: the decoded
// request without its token, re-encoded (encoding/json sorts map keys).
// The hash is stored with the job, so it must stay sha256(json.Marshal(in))
// across versions; an Encoder writes the same bytes and a newline into a
// reused buffer instead of a new one per submit.
func requestHash(in submitIn) string {
	in.ClientToken = ""
	buf := hashBuffers.Get().(*bytes.Buffer)
	buf.Reset()
	_ = json.NewEncoder(buf).Encode(in)
	s := sha256.Sum256(bytes.TrimSuffix(buf.Bytes(), []byte("\n")))
	hashBuffers.Put(buf)
	return hex.EncodeToString(s[:])
}

var hashBuffers = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// tagActions are the actions of the tag routes, by method.
var tagActions = map[string]string{
	http.MethodGet:    actionPrefix + "ListTagsForResource",
	http.MethodPost:   actionPrefix + "TagResource",
	http.MethodDelete: actionPrefix + "UntagResource",
}

// serveTags serves TagResource (POST), UntagResource (DELETE) and
// ListTagsForResource (GET) on /v1/tags/{resourceArn}.
func (h *Handler) serveTags(w http.ResponseWriter, r *http.Request, rid string) {
	// The SDK escapes the whole ARN as one segment (":" and "/" included),
	// so unescape the raw path ourselves.
	raw := strings.TrimPrefix(r.URL.EscapedPath(), "/v1/tags/")
	arn, err := url.PathUnescape(raw)
	if err != nil || arn == "" {
		writeError(w, qshare.Errorf(qshare.EINVALID, "the resource ARN in the path is missing or badly escaped: call /v1/tags/{resourceArn} with the ARN percent-encoded"))
		return
	}
	ctx := r.Context()
	if action, ok := tagActions[r.Method]; ok {
		if err := auth.Authorize(ctx, action, tagResources(h.d, arn)...); err != nil {
			h.fail(w, rid, strings.ToLower(strings.TrimPrefix(action, actionPrefix)), err)
			return
		}
	}
	switch r.Method {
	case http.MethodGet:
		tags, err := h.d.Tags(arn)
		if err != nil {
			h.fail(w, rid, "listtagsforresource", err)
			return
		}
		if tags == nil {
			tags = map[string]string{}
		}
		writeJSON(w, http.StatusOK, tagsBody{tags})
	case http.MethodPost:
		body, err := readBody(w, r, maxBody)
		if err != nil {
			h.fail(w, rid, "tagresource", err)
			return
		}
		var in tagsBody
		if err := decode(body, &in); err != nil {
			h.fail(w, rid, "tagresource", err)
			return
		}
		if _, ok := in.Tags[qshare.TagMinRunTime]; ok {
			if err := authorizeSetting(ctx, arn); err != nil {
				h.fail(w, rid, "tagresource", err)
				return
			}
		}
		if err := h.d.TagResource(ctx, arn, in.Tags); err != nil {
			h.fail(w, rid, "tagresource", err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	case http.MethodDelete:
		keys := r.URL.Query()["tagKeys"]
		if slices.Contains(keys, qshare.TagMinRunTime) {
			if err := authorizeSetting(ctx, arn); err != nil {
				h.fail(w, rid, "untagresource", err)
				return
			}
		}
		if err := h.d.UntagResource(ctx, arn, keys); err != nil {
			h.fail(w, rid, "untagresource", err)
			return
		}
		writeJSON(w, http.StatusOK, struct{}{})
	default:
		writeError(w, qshare.Errorf(qshare.EINVALID, "%s is not allowed on /v1/tags/{resourceArn}: use GET, POST or DELETE", r.Method))
	}
}
