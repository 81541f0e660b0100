package auth

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"net/http"
	"strings"

	"qshare"
	"qshare/aws/wire"
)

// s3Service is S3's signing name. S3 is the service whose signature covers
// the X-Amz-Content-Sha256 header, the hash the client declares of the
// body, rather than the body: its requests are verified over their headers
// and their bodies streamed to the store, never held (see s3PayloadHash).
const s3Service = "s3"

// unsignedPayload is the X-Amz-Content-Sha256 of a body the client did not
// hash (the Go SDK's, for S3 over HTTPS): the signature covers the
// headers alone, as on S3.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// unsignedTrailer is the X-Amz-Content-Sha256 of an aws-chunked body of
// unsigned chunks with a trailing checksum: the Go SDK's PutObject and
// UploadPart over HTTPS on its defaults.
const unsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

// s3PayloadHash returns the payload hash that r's signature covers: its
// X-Amz-Content-Sha256, which S3 requires. A SHA-256 in hexadecimal makes
// r.Body a reader that hashes the body as the store reads it and fails at
// its end (with S3's XAmzContentSHA256Mismatch, a *wire.Error) when the
// body is not what the header declared, so that the store drops it;
// UNSIGNED-PAYLOAD and STREAMING-UNSIGNED-PAYLOAD-TRAILER leave it as it
// is. The other streaming forms (signed aws-chunked, STREAMING-...) are
// refused with S3's NotImplemented.
func s3PayloadHash(r *http.Request) (string, error) {
	declared := r.Header.Get("X-Amz-Content-Sha256")
	switch {
	case declared == "":
		return "", qshare.Errorf(qshare.EINVALID, "Missing required header for this request: x-amz-content-sha256")
	case declared == unsignedPayload, declared == unsignedTrailer:
		// The store takes the aws-chunked framing away and checks the
		// trailer's checksum (package aws/s3).
		return declared, nil
	case strings.HasPrefix(declared, "STREAMING-"):
		return "", &wire.Error{ErrorType: wire.ErrorType{Code: "NotImplemented", Status: http.StatusNotImplemented},
			Message: "A header you provided implies functionality that is not implemented: this store takes no aws-chunked bodies with signed chunks (x-amz-content-sha256 " + quote(declared) + "); send the body's SHA-256, UNSIGNED-PAYLOAD or STREAMING-UNSIGNED-PAYLOAD-TRAILER"}
	}
	want, err := hex.DecodeString(declared)
	if err != nil || len(want) != sha256.Size {
		return "", &wire.Error{ErrorType: wire.ErrorType{Code: "InvalidArgument", Status: http.StatusBadRequest},
			Message: "x-amz-content-sha256 must be UNSIGNED-PAYLOAD or the body's SHA-256 in hexadecimal, not " + quote(declared)}
	}
	if r.Body == nil || r.Body == http.NoBody {
		if !bytes.Equal(want, emptySHA256[:]) {
			return "", contentSHA256Mismatch
		}
		return declared, nil
	}
	r.Body = &checkedBody{ReadCloser: r.Body, h: sha256.New(), want: want, left: r.ContentLength}
	return declared, nil
}

var emptySHA256 = sha256.Sum256(nil)

// contentSHA256Mismatch is S3's refusal of a body whose SHA-256 is not its
// X-Amz-Content-Sha256.
var contentSHA256Mismatch = &wire.Error{ErrorType: wire.ErrorType{Code: "XAmzContentSHA256Mismatch", Status: http.StatusBadRequest},
	Message: "The provided 'x-amz-content-sha256' header does not match what was computed."}

// checkedBody hashes a body as it is read and, at its end (EOF, or the
// last of its Content-Length, which a reader limited to that length may
// not read past), fails the read with contentSHA256Mismatch when the hash
// is not want. The failure stays: every later read returns it.
type checkedBody struct {
	io.ReadCloser
	h    hash.Hash
	want []byte
	left int64 // bytes to the declared end; < 0 when unknown
	err  error
}

func (b *checkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	b.h.Write(p[:n])
	if b.left >= 0 {
		b.left -= int64(n)
	}
	if (err == io.EOF || (err == nil && b.left == 0)) && !bytes.Equal(b.h.Sum(nil), b.want) {
		b.err = contentSHA256Mismatch
		return n, b.err
	}
	return n, err
}
