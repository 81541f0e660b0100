package s3

import (
	"bufio"
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash"
	"hash/crc32"
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

// trailerHashes are the checksums a trailer may carry that the store
// checks, by trailer name.
var trailerHashes = map[string]func() hash.Hash{
	"x-amz-checksum-crc32":  func() hash.Hash { return crc32.NewIEEE() },
	"x-amz-checksum-crc32c": func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"x-amz-checksum-sha1":   sha1.New,
	"x-amz-checksum-sha256": sha256.New,
}

func s3Error(status int, code, msg string) *wire.Error {
	return &wire.Error{ErrorType: wire.ErrorType{Code: code, Status: status}, Message: msg}
}

// decodeTrailer makes r, an aws-chunked body with a trailing checksum
// (unsignedTrailer), a request of the decoded body, as gofakes3 reads one:
// its Content-Length the decoded length, its body a reader that takes the
// chunk framing away and fails at the end (with S3's BadDigest, a
// *wire.Error) when the trailer's checksum is not the body's, or when the
// framing is not aws-chunked.
func decodeTrailer(r *http.Request) *wire.Error {
	n, err := strconv.ParseInt(r.Header.Get("X-Amz-Decoded-Content-Length"), 10, 64)
	if err != nil || n < 0 {
		return s3Error(http.StatusLengthRequired, "MissingContentLength", "an aws-chunked body must give its length in X-Amz-Decoded-Content-Length")
	}
	if n > MaxBody {
		return s3Error(http.StatusBadRequest, "EntityTooLarge", fmt.Sprintf("Your proposed upload exceeds the maximum allowed size: %d bytes, S3's limit of one PutObject or part", int64(MaxBody)))
	}
	name := strings.ToLower(strings.TrimSpace(r.Header.Get("X-Amz-Trailer")))
	newHash, ok := trailerHashes[name]
	if !ok {
		return s3Error(http.StatusNotImplemented, "NotImplemented", "A header you provided implies functionality that is not implemented: this store checks the trailers x-amz-checksum-crc32, -crc32c, -sha1 and -sha256, not "+strconv.Quote(name))
	}
	r.Body = &chunkedBody{body: r.Body, r: bufio.NewReader(r.Body), left: n, trailer: name, h: newHash()}
	r.ContentLength = n
	r.Header.Set("Content-Length", strconv.FormatInt(n, 10))
	r.Header.Del("X-Amz-Decoded-Content-Length")
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
	return nil
}

// chunkedBody reads an aws-chunked body of left decoded bytes:
//
//	SIZE-IN-HEX\r\n BYTES \r\n ... 0\r\n NAME:BASE64\r\n \r\n
type chunkedBody struct {
	body    io.Closer
	r       *bufio.Reader
	left    int64 // decoded bytes still to come
	chunk   int64 // bytes left of the chunk being read
	trailer string
	h       hash.Hash
	err     error
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
	b.h.Write(p[:n])
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
	if want := base64.StdEncoding.EncodeToString(b.h.Sum(nil)); got != want {
		return s3Error(http.StatusBadRequest, "BadDigest", "The "+strings.TrimPrefix(b.trailer, "x-amz-checksum-")+" you specified did not match the calculated checksum.")
	}
	return io.EOF
}
