// Package awsjson serves one AWS service in the awsJson1_1 protocol, the
// protocol of SageMaker and CloudWatch Logs: every operation is a POST of
// a JSON object, named by the X-Amz-Target header ("SageMaker.DescribeTrainingJob"),
// answered by a JSON object, or by an error whose type is in the body's
// "__type" member. The services of the one endpoint (aws/sagemaker,
// aws/logs) declare their operations and their error table; this package
// does the wire work once for both: the content type, the body's limit,
// the target, decoding, encoding, the request ID and the errors, and a
// panic becomes an InternalFailure, never a dropped connection or an HTML
// page.
package awsjson

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"sort"
	"strings"

	"qshare"
	"qshare/aws/wire"
)

// ContentType is the content type of awsJson1_1 requests and answers.
const ContentType = "application/x-amz-json-1.1"

// MaxBody is the most bytes of a request body that a service reads: far
// above any valid request of the operations qshare serves.
const MaxBody = 1 << 20

// ErrorType is how a service names an error on the wire: its "__type"
// (the short name; the AWS SDKs read it with or without a namespace) and
// its HTTP status.
type ErrorType = wire.ErrorType

// Error is an error that names its own wire type, for the errors that
// belong to the protocol rather than to a qshare error code (a body that is
// not JSON is a SerializationException, an unknown target an
// UnknownOperationException).
type Error = wire.Error

// WithCommonErrors returns a service's error table: its own entries, and
// the errors that every awsJson1_1 service of AWS answers alike for the
// rest (authentication's refusals, throttling, the internal error), as
// the AWS SDKs read them.
func WithCommonErrors(own wire.Errors) wire.Errors { return wire.Common(wire.JSON, own) }

// Op is one operation: it decodes the body and runs.
type Op func(ctx context.Context, body []byte) (any, error)

// Handle makes an Op of fn, which takes the operation's decoded input.
func Handle[In any](fn func(ctx context.Context, in *In) (any, error)) Op {
	return func(ctx context.Context, body []byte) (any, error) {
		in := new(In)
		if err := Decode(body, in); err != nil {
			return nil, err
		}
		return fn(ctx, in)
	}
}

// Decode reads a request body into v: a JSON object whose unknown members
// are ignored (the SDKs of a newer model may send them). Anything else is a
// SerializationException that says what is wrong.
func Decode(body []byte, v any) error {
	if err := json.Unmarshal(body, v); err != nil {
		var te *json.UnmarshalTypeError
		msg := "the request body is not a JSON object of this operation's input"
		switch {
		case errors.As(err, &te) && te.Field != "":
			msg = fmt.Sprintf("member %s of the request body may not be a JSON %s", te.Field, te.Value)
		case errors.As(err, &te):
			msg = fmt.Sprintf("the request body must be a JSON object, not a JSON %s", te.Value)
		}
		return wire.Errorf("SerializationException", http.StatusBadRequest, "%s", msg)
	}
	return nil
}

// Service is one AWS service of the awsJson1_1 protocol.
type Service struct {
	// Name is the service's name in messages ("SageMaker").
	Name string
	// TargetPrefix is what X-Amz-Target holds before the operation's name
	// and a dot ("SageMaker", "Logs_20140328").
	TargetPrefix string
	// Ops are the operations qshare serves, by name.
	Ops map[string]Op
	// Errors map qshare's error codes to the service's own errors. A code
	// that is not there is the service's internal error, whose message
	// hides the error's text; Errors[qshare.EINTERNAL] names it.
	Errors wire.Errors
	// Log receives one record per internal error and per recovered panic.
	Log *slog.Logger
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid, log, recoverPanic := wire.Begin(w, s.Name, s.Log, s.WriteError)
	defer recoverPanic()
	target := r.Header.Get("X-Amz-Target")
	name, ok := strings.CutPrefix(target, s.TargetPrefix+".")
	op, known := s.Ops[name]
	if !ok || !known {
		s.WriteError(w, wire.Errorf("UnknownOperationException", http.StatusBadRequest,
			"qshare does not serve the %s operation %s: it serves %s", s.Name, quoteTarget(target), s.served()))
		return
	}
	if r.Method != http.MethodPost {
		s.WriteError(w, qshare.Errorf(qshare.EINVALID, "%s must be called with POST, not %s", name, r.Method))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != ContentType {
		s.WriteError(w, wire.Errorf("SerializationException", http.StatusBadRequest,
			"Content-Type must be %s", ContentType))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		s.WriteError(w, qshare.Errorf(qshare.EINVALID, "the request body could not be read, or is larger than %d bytes", MaxBody))
		return
	}
	out, err := op(r.Context(), body)
	if err != nil {
		if qshare.ErrorCodeOf(err) == qshare.EINTERNAL && !isWireError(err) {
			log.Error("request failed", "service", s.Name, "requestId", rid, "op", name, "err", err)
		}
		s.WriteError(w, err)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		log.Error("answer could not be encoded", "service", s.Name, "requestId", rid, "op", name, "err", err)
		s.WriteError(w, qshare.Errorf(qshare.EINTERNAL, "internal error (request %s): the answer could not be encoded", rid))
		return
	}
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b)
}

func isWireError(err error) bool {
	var e *Error
	return errors.As(err, &e)
}

// served lists the operations, sorted, for the message of an unknown one.
func (s *Service) served() string {
	names := make([]string, 0, len(s.Ops))
	for n := range s.Ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// quoteTarget quotes at most the first 100 bytes of a target, so that a
// hostile header does not fill the answer.
func quoteTarget(t string) string {
	if t == "" {
		return "(no X-Amz-Target header)"
	}
	if len(t) > 100 {
		t = t[:100] + "…"
	}
	return fmt.Sprintf("%q", t)
}

// WriteError writes err in the service's error shape: the type of an
// *Error as it says, a qshare error through the service's table, anything
// else as the internal error, whose message does not show the error's
// text. It is how the server's guard and authentication refuse a request
// to this service, too.
func (s *Service) WriteError(w http.ResponseWriter, err error) {
	wire.RequestID(w)
	e := s.Errors.Resolve(err)
	b, _ := json.Marshal(map[string]string{"__type": e.Code, "message": e.Message})
	w.Header().Set("X-Amzn-ErrorType", e.Code)
	w.Header().Set("Content-Type", ContentType)
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// Short returns s, cut to 64 bytes with an ellipsis when longer: how a
// service quotes a caller's value in a message, so that a hostile value
// does not fill the answer.
func Short(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
