package wire

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"qshare"
)

// ErrorType is how a service names an error on the wire: its code (the
// "__type" of restJson and awsJson, the Code of awsQuery and REST-XML) and
// its HTTP status.
type ErrorType struct {
	Code   string
	Status int
}

// Error is an error that names its own wire type, for the errors that
// belong to a protocol rather than to a qshare error code (a body that is
// not JSON, an unknown operation, a missing parameter).
type Error struct {
	ErrorType
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

// Protocol is one of the wire protocols of the endpoint's AWS services.
type Protocol int

// The protocols, each a column of the common error table.
const (
	RestJSON Protocol = iota // AWS Batch
	JSON                     // awsJson1_1: SageMaker, CloudWatch Logs
	Query                    // awsQuery: IAM, STS
	RestXML                  // S3
	protocols
)

// common is the one table of the errors that every service of a protocol
// answers alike, as the AWS SDKs read them: authentication's refusals,
// throttling and the internal error. A service adds its own (Errors.With).
var common = map[qshare.ErrorCode][protocols]ErrorType{
	//                    RestJSON, JSON, Query, RestXML
	qshare.EDENIED:       {{"AccessDeniedException", http.StatusForbidden}, {"AccessDeniedException", http.StatusBadRequest}, {"AccessDenied", http.StatusForbidden}, {"AccessDenied", http.StatusForbidden}},
	qshare.ENOSIGNATURE:  {{"MissingAuthenticationTokenException", http.StatusForbidden}, {"MissingAuthenticationTokenException", http.StatusForbidden}, {"MissingAuthenticationToken", http.StatusForbidden}, {"AccessDenied", http.StatusForbidden}},
	qshare.EUNKNOWNKEY:   {{"UnrecognizedClientException", http.StatusForbidden}, {"UnrecognizedClientException", http.StatusForbidden}, {"InvalidClientTokenId", http.StatusForbidden}, {"InvalidAccessKeyId", http.StatusForbidden}},
	qshare.EBADSIGNATURE: {{"InvalidSignatureException", http.StatusForbidden}, {"InvalidSignatureException", http.StatusForbidden}, {"SignatureDoesNotMatch", http.StatusForbidden}, {"SignatureDoesNotMatch", http.StatusForbidden}},
	qshare.ETHROTTLED:    {{"TooManyRequestsException", http.StatusTooManyRequests}, {"ThrottlingException", http.StatusBadRequest}, {"Throttling", http.StatusBadRequest}, {"SlowDown", http.StatusServiceUnavailable}},
	qshare.EINTERNAL:     {{"ServerException", http.StatusInternalServerError}, {"InternalFailure", http.StatusInternalServerError}, {"InternalFailure", http.StatusInternalServerError}, {"InternalError", http.StatusInternalServerError}},
}

// Errors is a service's error table: the wire type of each qshare error
// code it answers.
type Errors map[qshare.ErrorCode]ErrorType

// Common returns the table of the errors p's services answer alike, with
// own's entries added (and taking precedence).
func Common(p Protocol, own Errors) Errors {
	t := make(Errors, len(common)+len(own))
	for c, row := range common {
		t[c] = row[p]
	}
	for c, e := range own {
		t[c] = e
	}
	return t
}

// Resolve returns err as t answers it: an *Error as it says; a qshare
// error whose code t has, with its message; anything else as t's internal
// error (InternalFailure where t has none), whose message hides the text of
// an error that is not a qshare internal error.
func (t Errors) Resolve(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	code := qshare.ErrorCodeOf(err)
	if typ, ok := t[code]; ok {
		return &Error{typ, qshare.ErrorMessageOf(err)}
	}
	typ := t[qshare.EINTERNAL]
	if typ.Code == "" {
		typ = ErrorType{"InternalFailure", http.StatusInternalServerError}
	}
	return &Error{typ, "internal error"}
}

// RequestID returns w's X-Amzn-RequestId, setting a new one first when w
// has none (a refusal before the service's own handler ran).
func RequestID(w http.ResponseWriter) string {
	rid := w.Header().Get("X-Amzn-RequestId")
	if rid == "" {
		rid = uuid.NewString()
		w.Header().Set("X-Amzn-RequestId", rid)
	}
	return rid
}

// Errorf returns the *Error of code and status whose message is format
// with args, as fmt.Sprintf makes it.
func Errorf(code string, status int, format string, args ...any) *Error {
	return &Error{ErrorType{code, status}, fmt.Sprintf(format, args...)}
}
