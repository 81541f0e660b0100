package s3

import (
	"bytes"
	"errors"
	"net/http"
	"syscall"

	"github.com/johannesboyne/gofakes3"
)

// A full disk. S3 has no answer for it; MinIO, the S3-compatible server
// whose answer clients know, answers a write it has no room for with
// XMinioStorageFull and 507 Insufficient Storage, and so does this store,
// for a write that its disk refuses with ENOSPC or EDQUOT: an answer that
// says why, where InternalError (500) said only that the store failed.
// The SDKs do not retry a 507 (they retry 500, 502, 503 and 504): a
// retry would send the whole body again, up to 5 GiB, to a disk that the
// seconds of the SDK's backoff do not empty. Any other failure of the
// disk stays InternalError.

// storageFull is the code of the answer to a write the store's disk has
// no room for.
const storageFull gofakes3.ErrorCode = "XMinioStorageFull"

// notKept is the answer to a write that the store's disk refused: what
// (the object, the part) and the cause, without the server's paths;
// storageFull where the disk, or the user's quota of it, is full, else
// InternalError.
func notKept(what string, err error) error {
	msg := what + " on the store's disk: " + withoutPath(err).Error()
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return gofakes3.ErrorMessage(storageFull, msg+"; delete objects, or abort multipart uploads, to make room")
	}
	return gofakes3.ErrorMessage(gofakes3.ErrInternal, msg)
}

// ownStatus is the status of each of the store's own codes, which
// gofakes3 answers with 500 as it does every code it does not know.
var ownStatus = map[gofakes3.ErrorCode]int{
	storageFull:       http.StatusInsufficientStorage,
	parentIsObject:    http.StatusBadRequest,
	objectIsDirectory: http.StatusConflict,
}

// fullWriter gives the answers of the store's own codes their statuses
// (ownStatus; storageFull's 507): gofakes3 answers every code it does
// not know with 500. A 500 is held until the
// handler has written its error document (a few hundred bytes), and sent
// with the status of its code (finish).
type fullWriter struct {
	http.ResponseWriter
	held bool
	doc  bytes.Buffer
}

// maxErrorDoc bounds what a held answer keeps.
const maxErrorDoc = 64 << 10

func (w *fullWriter) WriteHeader(status int) {
	if w.held {
		return
	}
	if status == http.StatusInternalServerError {
		w.held = true
		return
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *fullWriter) Write(p []byte) (int, error) {
	if !w.held {
		return w.ResponseWriter.Write(p)
	}
	if w.doc.Len()+len(p) <= maxErrorDoc {
		w.doc.Write(p)
	}
	return len(p), nil
}

// finish sends a held answer.
func (w *fullWriter) finish() {
	if !w.held {
		return
	}
	status := http.StatusInternalServerError
	for code, st := range ownStatus {
		if bytes.Contains(w.doc.Bytes(), []byte("<Code>"+code+"</Code>")) {
			status = st
		}
	}
	w.ResponseWriter.WriteHeader(status)
	w.ResponseWriter.Write(w.doc.Bytes()) //nolint:errcheck // the client is gone
}

// Unwrap lets http.ResponseController reach the server's own writer.
func (w *fullWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
