package qshare

import (
	"errors"
	"fmt"
)

// ErrorCode classifies an Error. The API layer maps each code to an AWS error
// type in exactly one table.
type ErrorCode string

// Error codes.
const (
	// EINVALID: the request is wrong; the caller must change it (ClientException).
	EINVALID ErrorCode = "invalid"
	// ENOTFOUND: the named resource does not exist (ClientException).
	ENOTFOUND ErrorCode = "not_found"
	// ECONFLICT: the resource's state forbids the request now (ClientException).
	ECONFLICT ErrorCode = "conflict"
	// EDENIED: the caller may not make this request at all
	// (AccessDeniedException, HTTP 403): a browser, a name the server does
	// not answer to, a local user other than the server's own.
	EDENIED ErrorCode = "denied"
	// ENOSIGNATURE: authentication is on and the request carries no
	// signature (MissingAuthenticationTokenException, HTTP 403).
	ENOSIGNATURE ErrorCode = "no_signature"
	// EUNKNOWNKEY: the request is signed with an access key the server does
	// not know (UnrecognizedClientException, HTTP 403).
	EUNKNOWNKEY ErrorCode = "unknown_key"
	// EBADSIGNATURE: the request's signature is malformed, does not match,
	// or was made too far from the server's clock
	// (InvalidSignatureException, HTTP 403).
	EBADSIGNATURE ErrorCode = "bad_signature"
	// ETHROTTLED: the caller made more requests than its limits allow;
	// it may retry later (TooManyRequestsException, HTTP 429, which the
	// AWS SDKs retry with backoff).
	ETHROTTLED ErrorCode = "throttled"
	// EINTERNAL: qshare failed; the request may be retried (ServerException).
	EINTERNAL ErrorCode = "internal"
)

// Error is the error every layer of qshare returns for a failure the caller
// should see. Message is written for the person who made the request: it says
// what is wrong and, where it can, how to fix it.
type Error struct {
	Code    ErrorCode
	Message string
}

// Error implements error.
func (e *Error) Error() string { return e.Message }

// Errorf returns an *Error with the given code and a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCodeOf returns the code of the first *Error in err's chain, EINTERNAL
// for any other non-nil error, and "" for nil.
func ErrorCodeOf(err error) ErrorCode {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return EINTERNAL
}

// ErrorMessageOf returns the message of the first *Error in err's chain, or a
// generic message for any other error (whose text may hold internal detail).
func ErrorMessageOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error; the request was not applied and may be retried"
}
