package s3

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"

	"qshare/aws/wire"
)

// unsignedTrailer is the X-Amz-Content-Sha256 of an aws-chunked body whose
// chunks are not signed and whose checksum follows it as a trailer: what
// the Go SDK (service/s3 v1.73 and later) sends for a PutObject or a part
// over HTTPS on its defaults.
const unsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

// signedChunks and signedChunksTrailer are the X-Amz-Content-Sha256 of an
// aws-chunked body whose chunks are signed one by one, without and with a
// trailing checksum. Authentication refuses both (auth/s3body.go); without
// it, where the store checks no signature, the store takes the framing
// away as it does for unsignedTrailer, so that no framing is ever stored
// as an object's bytes (gofakes3 took it away for a PutObject of
// signedChunks alone, and stored the framing of a part, or of
// signedChunksTrailer).
const (
	signedChunks        = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	signedChunksTrailer = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
)

func s3Error(status int, code, msg string) *wire.Error {
	return &wire.Error{ErrorType: wire.ErrorType{Code: code, Status: status}, Message: msg}
}

// checkBody readies r's body for gofakes3: an aws-chunked one decoded
// (decodeChunked), any other STREAMING- form refused with NotImplemented,
// and the body of a PutObject or UploadPart that declares a checksum
// (declaredChecksum) checked against it as it is read. It returns the
// checksum that a PutObject, UploadPart or CopyObject sent (nil for
// other requests), or S3's error for a request to refuse before its body
// is read. A part's Content-MD5 is taken out of the request, into what
// it returns, for UploadPart to check.
func checkBody(r *http.Request) (*sentChecksum, *wire.Error) {
	var chunked *chunkedBody
	switch sha := r.Header.Get("X-Amz-Content-Sha256"); {
	case sha == unsignedTrailer || sha == signedChunks || sha == signedChunksTrailer:
		var e *wire.Error
		if chunked, e = decodeChunked(r, sha); e != nil {
			return nil, e
		}
	case strings.HasPrefix(sha, "STREAMING-"):
		return nil, s3Error(http.StatusNotImplemented, "NotImplemented", "A header you provided implies functionality that is not implemented: this store takes no aws-chunked body of x-amz-content-sha256 "+strconv.Quote(sha))
	}
	if !objectData(r) {
		return nil, nil
	}
	trailer := ""
	if chunked != nil {
		trailer = chunked.algo
	}
	algo, value, e := declaredChecksum(r.Header, trailer)
	if e != nil {
		return nil, e
	}
	sent := &sentChecksum{algo: algo, value: value, part: r.URL.Query().Has("uploadId")}
	if trailer != "" {
		sent.trailer = chunked
	}
	if value != "" && r.Body != nil {
		r.Body = newCheckedBody(r.Body, algo, value, r.ContentLength)
	}
	if r.Header.Get("X-Amz-Copy-Source") != "" {
		sent.copy = true
		if a := r.Header.Get("X-Amz-Checksum-Algorithm"); a != "" {
			if sent.algo, e = checksumOf(checksumPrefix + a); e != nil {
				return nil, e
			}
		}
	}
	if _, ok := r.Header["Content-Md5"]; ok && r.URL.Query().Has("uploadId") {
		b, err := base64.StdEncoding.DecodeString(r.Header.Get("Content-Md5"))
		if err != nil || len(b) != 16 {
			return nil, s3Error(http.StatusBadRequest, "InvalidDigest", "The Content-MD5 you specified was invalid.")
		}
		sent.md5 = b
		r.Header.Del("Content-Md5")
	}
	return sent, nil
}

// decodeChunked makes r, an aws-chunked body of X-Amz-Content-Sha256 sha,
// a request of the decoded body, as gofakes3 reads one: its
// Content-Length the decoded length, its body a reader that takes the
// chunk framing away and fails at the end (with S3's BadDigest, a
// *wire.Error) when the trailer's checksum is not the body's, or when the
// framing is not aws-chunked. It returns the body, whose algo is the
// trailer's algorithm ("" for signedChunks, which has none).
func decodeChunked(r *http.Request, sha string) (*chunkedBody, *wire.Error) {
	n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return nil, s3Error(http.StatusLengthRequired, "MissingContentLength", "an aws-chunked body must give its length in X-Amz-Decoded-Content-Length")
	}
	if n > MaxBody {
		return nil, s3Error(http.StatusBadRequest, "EntityTooLarge", fmt.Sprintf("Your proposed upload exceeds the maximum allowed size: %d bytes, S3's limit of one PutObject or part", int64(MaxBody)))
	}
	body := &chunkedBody{body: r.Body, r: bufio.NewReader(r.Body), left: n}
	if sha != signedChunks {
		if strings.TrimSpace(r.Header.Get("X-Amz-Trailer")) == "" {
			return nil, s3Error(http.StatusBadRequest, "InvalidRequest", "an aws-chunked body with a trailer ("+sha+") must name its checksum in X-Amz-Trailer, as the SDKs send it (x-amz-checksum-crc32, for one)")
		}
		algo, e := checksumOf(r.Header.Get("X-Amz-Trailer"))
		if e != nil {
			return nil, e
		}
		body.trailer, body.algo, body.h = checksumPrefix+algo, algo, checksums[algo]()
	}
	r.Body = body
	r.ContentLength = n
	r.Header.Set("Content-Length", strconv.FormatInt(n, 10))
	r.Header.Del("X-Amz-Decoded-Content-Length")
	if sha != unsignedTrailer {
		// Decoded here: gofakes3 must not decode it again.
		r.Header.Set("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD")
	}
	var enc []string
	for _, e := range strings.Split(r.Header.Get("Content-Encoding"), ",") {
		if e = strings.TrimSpace(e); e != "" && e != "aws-chunked" {
			enc = append(enc, e)
		}
	}
	r.Header.Del("Content-Encoding")
	if len(enc) > 0 {
		r.Header.Set("Content-Encoding", strings.Join(enc, ","))
	}
	return body, nil
}

// chunkedBody reads an aws-chunked body of left decoded bytes:
//
//	SIZE-IN-HEX[;chunk-signature=…]\r\n BYTES \r\n ... 0\r\n NAME:BASE64\r\n \r\n
//
// with the trailer (h, of algorithm algo) checked at its end, or none (h
// nil).
type chunkedBody struct {
	body    io.Closer
	r       *bufio.Reader
	left    int64 // decoded bytes still to come
	chunk   int64 // bytes left of the chunk being read
	trailer string
	algo    string
	h       hash.Hash
	// got is the trailer's checksum once the body has been read to its
	// end and the checksum is its.
	got string
	err error
}

func (b *chunkedBody) Close() error { return b.body.Close() }

func (b *chunkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	for b.chunk == 0 && b.left > 0 {
		if b.chunk, b.err = b.header(); b.err != nil {
			return 0, b.err
		}
	}
	if b.left == 0 {
		b.err = b.end()
		return 0, b.err
	}
	if int64(len(p)) > b.chunk {
		p = p[:b.chunk]
	}
	n, err := b.r.Read(p)
	if b.h != nil {
		b.h.Write(p[:n])
	}
	b.chunk -= int64(n)
	b.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	if err == nil && b.chunk == 0 {
		err = b.crlf()
	}
	if err == nil && b.left == 0 {
		err = b.end() // at the last byte: a reader limited to the length reads no further
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

var errFraming = s3Error(http.StatusBadRequest, "IncompleteBody", "the aws-chunked body's framing is not SIZE\\r\\nBYTES\\r\\n..., or it ends early")

// line reads one line of framing, without its \r\n.
func (b *chunkedBody) line() (string, error) {
	l, err := b.r.ReadSlice('\n')
	if err != nil || !bytes.HasSuffix(l, []byte("\r\n")) {
		return "", errFraming
	}
	return string(l[:len(l)-2]), nil
}

func (b *chunkedBody) crlf() error {
	if l, err := b.line(); err != nil || l != "" {
		return errFraming
	}
	return nil
}

// header reads a chunk's size; a chunk larger than what is left, or of
// size 0 before the end, is not aws-chunked.
func (b *chunkedBody) header() (int64, error) {
	l, err := b.line()
	if err != nil {
		return 0, err
	}
	size, _, _ := strings.Cut(l, ";")
	n, err := strconv.ParseInt(size, 16, 64)
	if err != nil || n <= 0 || n > b.left {
		return 0, errFraming
	}
	return n, nil
}

// end reads the last chunk and the trailers, and checks the checksum:
// io.EOF when it is the body's.
func (b *chunkedBody) end() error {
	if l, err := b.line(); err != nil || strings.TrimSpace(strings.SplitN(l, ";", 2)[0]) != "0" {
		return errFraming
	}
	got := ""
	for {
		l, err := b.line()
		if err != nil {
			return err
		}
		if l == "" {
			break
		}
		k, v, _ := strings.Cut(l, ":")
		if strings.EqualFold(strings.TrimSpace(k), b.trailer) {
			got = strings.TrimSpace(v)
		}
	}
	if b.h != nil && got != base64.StdEncoding.EncodeToString(b.h.Sum(nil)) {
		return badDigest(b.algo)
	}
	b.got = got
	return io.EOF
}
