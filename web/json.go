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
