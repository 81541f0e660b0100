// Package awsquery serves one AWS service in the awsQuery protocol, the
// protocol of IAM and STS: a POST of a form (Action=GetRole&Version=…&…),
// answered by XML, <ActionResponse><ActionResult>…</ActionResult>
// <ResponseMetadata><RequestId>…</RequestId></ResponseMetadata></ActionResponse>,
// or by an <ErrorResponse> whose Error has a Type (Sender or Receiver), a
// Code and a Message. The services (aws/iam, aws/sts) declare their actions
// and errors; this package does the wire work for both, and a panic becomes
// the service's internal error, never a dropped connection.
package awsquery

import (
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"net/url"
	"sort"
	"strings"

	"qshare"
	"qshare/aws/wire"
)

// ContentType is the content type of an awsQuery request body.
const ContentType = "application/x-www-form-urlencoded"

// MaxBody is the most bytes of a request body that a service reads.
const MaxBody = 1 << 20

// ErrorType is how a service names an error: its Code and HTTP status.
type ErrorType = wire.ErrorType

// Error is an error that names its own code, for the errors of the
// protocol (an unknown action, a missing parameter).
type Error = wire.Error

// Action runs one action on the request's parameters and returns its
// result, which is encoded as the <ActionResult> element (nil: empty).
type Action func(ctx context.Context, params url.Values) (any, error)

// Service is one AWS service of the awsQuery protocol.
type Service struct {
	// Name is the service's name in messages ("IAM").
	Name string
	// Namespace is the XML namespace of its answers
	// ("https://iam.amazonaws.com/doc/2010-05-08/").
	Namespace string
	// Actions are the actions qshare serves, by name.
	Actions map[string]Action
	// Errors map qshare's error codes to the service's errors; a code not
	// there is the internal error Errors[qshare.EINTERNAL].
	Errors wire.Errors
	// Log receives one record per internal error and recovered panic.
	Log *slog.Logger
}

// ServeHTTP implements http.Handler.
func (s *Service) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid, log, recoverPanic := wire.Begin(w, s.Name, s.Log, s.WriteError)
	defer recoverPanic()
	if r.Method != http.MethodPost {
		s.WriteError(w, wire.Errorf("InvalidAction", http.StatusBadRequest, "%s actions are called with POST and a form body, not %s", s.Name, r.Method))
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != ContentType {
		s.WriteError(w, wire.Errorf("MalformedInput", http.StatusBadRequest, "Content-Type must be %s", ContentType))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, MaxBody)
	if err := r.ParseForm(); err != nil {
		s.WriteError(w, wire.Errorf("MalformedInput", http.StatusBadRequest, "the request body is not a form of at most %d bytes", MaxBody))
		return
	}
	params := r.PostForm
	name := params.Get("Action")
	act, ok := s.Actions[name]
	if name == "" {
		s.WriteError(w, wire.Errorf("MissingAction", http.StatusBadRequest, "the request has no Action parameter"))
		return
	}
	if !ok {
		s.WriteError(w, wire.Errorf("InvalidAction", http.StatusBadRequest,
			"qshare does not serve the %s action %s: it serves %s", s.Name, short(name), s.served()))
		return
	}
	out, err := act(r.Context(), params)
	if err != nil {
		var e *Error
		if qshare.ErrorCodeOf(err) == qshare.EINTERNAL && !errors.As(err, &e) {
			log.Error("request failed", "service", s.Name, "requestId", rid, "action", name, "err", err)
		}
		s.WriteError(w, err)
		return
	}
	inner, err := xml.Marshal(out)
	if out == nil {
		inner, err = nil, nil
	}
	if err != nil {
		log.Error("answer could not be encoded", "service", s.Name, "requestId", rid, "err", err)
		s.WriteError(w, qshare.Errorf(qshare.EINTERNAL, "internal error (request %s)", rid))
		return
	}
	var b strings.Builder
	b.WriteString(xml.Header)
	fmt.Fprintf(&b, `<%sResponse xmlns="%s"><%sResult>`, name, s.Namespace, name)
	b.Write(stripOuter(inner))
	fmt.Fprintf(&b, `</%sResult><ResponseMetadata><RequestId>%s</RequestId></ResponseMetadata></%sResponse>`, name, rid, name)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write([]byte(b.String()))
}

// stripOuter drops the element xml.Marshal wraps a result in, keeping its
// children: the result's members are the <ActionResult>'s own.
func stripOuter(b []byte) []byte {
	start := strings.IndexByte(string(b), '>')
	end := strings.LastIndexByte(string(b), '<')
	if start < 0 || end <= start {
		return nil
	}
	return b[start+1 : end]
}

func (s *Service) served() string {
	names := make([]string, 0, len(s.Actions))
	for n := range s.Actions {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

func short(s string) string {
	if len(s) > 64 {
		s = s[:64] + "…"
	}
	return fmt.Sprintf("%q", s)
}

// WriteError writes err as the service's <ErrorResponse>: an *Error as
// it says, a qshare error through the service's table, anything else as
// the internal error without its text. Type is Sender for a 4xx, Receiver
// for a 5xx.
func (s *Service) WriteError(w http.ResponseWriter, err error) {
	rid := wire.RequestID(w)
	e := s.Errors.Resolve(err)
	typ := "Sender"
	if e.Status >= 500 {
		typ = "Receiver"
	}
	type errorOut struct {
		Type    string `xml:"Type"`
		Code    string `xml:"Code"`
		Message string `xml:"Message"`
	}
	doc := struct {
		XMLName   xml.Name `xml:"ErrorResponse"`
		Xmlns     string   `xml:"xmlns,attr"`
		Error     errorOut `xml:"Error"`
		RequestID string   `xml:"RequestId"`
	}{Xmlns: s.Namespace, Error: errorOut{typ, e.Code, e.Message}, RequestID: rid}
	b, _ := xml.Marshal(doc)
	w.Header().Set("Content-Type", "text/xml")
	w.WriteHeader(e.Status)
	_, _ = w.Write(append([]byte(xml.Header), b...))
}

// WithCommonErrors returns a service's error table: its own entries, and
// the errors that the awsQuery services of AWS answer alike for the rest.
func WithCommonErrors(own wire.Errors) wire.Errors { return wire.Common(wire.Query, own) }
