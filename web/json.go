package web

import (
	"encoding/json"
	"errors"
	"net/http"

	"qshare/event"
)

func asBad(err error, bad **event.BadLinesError) bool { return errors.As(err, bad) }

func writeJSON(w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

// rootCause is the innermost error of err's chain: what went wrong (no
// such file, permission denied), without the server's path of the file
// that the wrapping errors name, which an answer must not show.
func rootCause(err error) error {
	for u := errors.Unwrap(err); u != nil; u = errors.Unwrap(err) {
		err = u
	}
	return err
}
