// Package wire holds what every protocol of the one endpoint's AWS
// services (aws/awsjson, aws/awsquery) does alike with a request before
// its protocol: give it a request ID, and turn a panic into the service's
// internal error instead of a dropped connection.
package wire

import (
	"fmt"
	"log/slog"
	"net/http"
	"runtime/debug"

	"github.com/google/uuid"

	"qshare"
)

// Begin sets w's X-Amzn-RequestId and returns it, the logger to use (log,
// or one that discards) and the function to defer: it recovers a panic of
// the request, logs it with its stack, and answers it with writeError's
// internal error. http.ErrAbortHandler goes on, as net/http expects.
func Begin(w http.ResponseWriter, service string, log *slog.Logger, writeError func(http.ResponseWriter, error)) (string, *slog.Logger, func()) {
	rid := uuid.NewString()
	w.Header().Set("X-Amzn-RequestId", rid)
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return rid, log, func() {
		if p := recover(); p != nil {
			if p == http.ErrAbortHandler {
				panic(p)
			}
			log.Error("panic while serving a request", "service", service, "requestId", rid, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			writeError(w, qshare.Errorf(qshare.EINTERNAL, "internal error (request %s); the request may not have been applied", rid))
		}
	}
}
