package s3

import (
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strings"

	"qshare/aws/wire"
)

// Flexible checksums. A PutObject or UploadPart may carry a checksum of
// its body in one of the algorithms S3 knows, as a header
// (x-amz-checksum-crc32: BASE64) or as the trailer of an aws-chunked body
// (see chunked.go); the store checks it against the body as it comes and
// fails the body's last read with S3's BadDigest where it is not the
// body's, so that nothing is stored (as Content-MD5, which gofakes3
// checks, fails it). A name S3 does not know, a value that is no
// checksum of its algorithm, or two checksums are S3's InvalidRequest,
// before a byte of the body is read.

// checksums are the algorithms of S3's flexible checksums that the store
// checks, by their name in x-amz-checksum-<name> and
// x-amz-sdk-checksum-algorithm (lower-cased): all that the standard
// library has. CRC64NVME's table is the standard library's, made from
// the NVMe polynomial (reversed, as crc64.MakeTable takes it), as the AWS
// SDK for Go makes it. S3's XXHASH64, XXHASH3 and XXHASH128 are not here:
// a request that names one is refused (errUnsupportedChecksum), not
// stored unchecked.
var checksums = map[string]func() hash.Hash{
	"crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"crc64nvme": func() hash.Hash { return crc64.New(crc64NVME) },
	"md5":       md5.New,
	"sha1":      sha1.New,
	"sha256":    sha256.New,
	"sha512":    sha512.New,
}

var crc64NVME = crc64.MakeTable(0x9a6c9329ac4bc9b5)

// defaultChecksum is the algorithm of the checksum that the store
// computes of an object that was sent with none, as S3 does.
const defaultChecksum = "crc64nvme"

// checksumPrefix begins the header, or trailer, of a checksum's value.
const checksumPrefix = "x-amz-checksum-"

// notChecksums are the x-amz-checksum- headers that are no checksum of
// the body: CreateMultipartUpload's and GetObject's.
var notChecksums = map[string]bool{"type": true, "algorithm": true, "mode": true}

var errUnsupportedChecksum = s3Error(http.StatusBadRequest, "InvalidRequest", "Checksum algorithm provided is unsupported. Please try again with any of the valid types: [CRC32, CRC32C, CRC64NVME, MD5, SHA1, SHA256, SHA512] (this store checks no XXHASH)")

// checksumOf returns the algorithm that a checksum header's or trailer's
// name (any case) gives, or "" and S3's error for a name it does not know.
func checksumOf(name string) (string, *wire.Error) {
	algo, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(name)), checksumPrefix)
	if !ok || checksums[algo] == nil {
		return "", errUnsupportedChecksum
	}
	return algo, nil
}

// declaredChecksum returns the algorithm and the value of the checksum
// that the headers of a PutObject or UploadPart give of its body ("" for
// none), trailer being the algorithm of an aws-chunked body's trailer
// ("" for none); or S3's InvalidRequest for an algorithm it does not
// know, a value that is not base64 of its algorithm's size, more than one
// checksum, a value sent with a copy, or an x-amz-sdk-checksum-algorithm
// that names another algorithm than the one sent, or names one and none
// is sent.
func declaredChecksum(h http.Header, trailer string) (algo, value string, e *wire.Error) {
	algo = trailer
	for k, vs := range h {
		name, ok := strings.CutPrefix(strings.ToLower(k), checksumPrefix)
		if !ok || notChecksums[name] {
			continue
		}
		a, e := checksumOf(k)
		if e != nil {
			return "", "", e
		}
		if algo != "" || len(vs) != 1 {
			return "", "", s3Error(http.StatusBadRequest, "InvalidRequest", "Expecting a single x-amz-checksum- header. Multiple checksum Types are not allowed.")
		}
		b, err := base64.StdEncoding.DecodeString(vs[0])
		if err != nil || len(b) != checksums[a]().Size() {
			return "", "", s3Error(http.StatusBadRequest, "InvalidRequest", "Value for "+checksumPrefix+a+" header is invalid.")
		}
		algo, value = a, vs[0]
	}
	if value != "" && h.Get("X-Amz-Copy-Source") != "" {
		// A copy sends no body to check, and gofakes3 would keep the
		// value as the copy's checksum.
		return "", "", s3Error(http.StatusBadRequest, "InvalidRequest", "A copy takes no "+checksumPrefix+algo+" value: the copy's data is the source's")
	}
	if sdk := h.Get("X-Amz-Sdk-Checksum-Algorithm"); sdk != "" {
		a, e := checksumOf(checksumPrefix + sdk)
		if e != nil {
			return "", "", e
		}
		if algo == "" {
			return "", "", s3Error(http.StatusBadRequest, "InvalidRequest", "x-amz-sdk-checksum-algorithm specified, but no corresponding x-amz-checksum-* or x-amz-trailer headers were found.")
		}
		if a != algo {
			return "", "", s3Error(http.StatusBadRequest, "InvalidRequest", "Value for x-amz-sdk-checksum-algorithm header is invalid.")
		}
	}
	return algo, value, nil
}

// badDigest is S3's answer to a body that is not its checksum.
func badDigest(algo string) *wire.Error {
	return s3Error(http.StatusBadRequest, "BadDigest", "The "+strings.ToUpper(algo)+" you specified did not match the calculated checksum.")
}

// checkedBody is a body of length bytes (-1: unknown) whose checksum
// (h) must be want (base64): its last read, at its last byte or at its
// end, fails with BadDigest where it is not. The failure stays.
type checkedBody struct {
	io.ReadCloser
	algo, want   string
	h            hash.Hash
	read, length int64
	err          error
}

func newCheckedBody(body io.ReadCloser, algo, want string, length int64) *checkedBody {
	return &checkedBody{ReadCloser: body, algo: algo, want: want, h: checksums[algo](), length: length}
}

func (b *checkedBody) Read(p []byte) (int, error) {
	if b.err != nil {
		return 0, b.err
	}
	n, err := b.ReadCloser.Read(p)
	b.h.Write(p[:n])
	b.read += int64(n)
	atEnd := err == io.EOF || (err == nil && b.read == b.length)
	if atEnd && base64.StdEncoding.EncodeToString(b.h.Sum(nil)) != b.want {
		err = badDigest(b.algo)
	}
	if err != nil {
		b.err = err
	}
	return n, err
}

// The checksums an object keeps. S3 keeps the checksum that a PutObject
// sent, as a header or as a trailer, with the object, and each part's
// with its upload; a completed upload created with an algorithm
// (x-amz-checksum-algorithm) keeps one of its parts' checksums, COMPOSITE
// (the checksum of the parts' checksums, "-N" after it) or FULL_OBJECT
// (the CRC of the whole object), and a copy keeps its source's. They are
// kept in the object's metadata, beside gofakes3's (keepChecksum), and
// given back by GetObject and HeadObject of a whole object when the
// request asks for them (x-amz-checksum-mode: ENABLED; etagWriter).

// Checksum types, as S3 names them in x-amz-checksum-type.
const (
	fullObject = "FULL_OBJECT"
	composite  = "COMPOSITE"
)

// checksumTypeKey is the metadata, and header, of an object's checksum
// type.
const checksumTypeKey = "X-Amz-Checksum-Type"

// objectChecksum is the checksum that an object, or a part, keeps: algo
// lower-case ("" for none), value base64 ("…-N" for a composite one), typ
// fullObject or composite.
type objectChecksum struct {
	algo, value, typ string
}

// checksumKey is the metadata key, and header, of algo's checksum.
func checksumKey(algo string) string {
	return http.CanonicalHeaderKey(checksumPrefix + algo)
}

// keepChecksum makes c the only checksum in meta: every other
// x-amz-checksum- entry (a client's header, a copy's or an upload's
// algorithm, the old object's) goes.
func keepChecksum(meta map[string]string, c objectChecksum) {
	for k := range meta {
		if strings.HasPrefix(strings.ToLower(k), checksumPrefix) {
			delete(meta, k)
		}
	}
	if c.algo != "" && c.value != "" {
		meta[checksumKey(c.algo)] = c.value
		meta[checksumTypeKey] = c.typ
	}
}

// keptChecksum is the checksum that meta keeps, or none; one kept
// without its type (by an earlier version of the store, which kept a
// PutObject's header) is FULL_OBJECT.
func keptChecksum(meta map[string]string) objectChecksum {
	for algo := range checksums {
		if v := meta[checksumKey(algo)]; v != "" {
			c := objectChecksum{algo: algo, value: v, typ: meta[checksumTypeKey]}
			if c.typ != composite {
				c.typ = fullObject
			}
			return c
		}
	}
	return objectChecksum{}
}

// sentChecksum is what a PutObject's, UploadPart's or CopyObject's request
// says of the checksum the object is to keep: the algorithm and value of
// a header, or the algorithm of an aws-chunked body's trailer (whose value
// the body gives once read to its end, checked), or a copy's
// x-amz-checksum-algorithm (the store computes the copy's checksum in
// it; none: the copy keeps its source's).
type sentChecksum struct {
	algo, value string
	trailer     *chunkedBody
	copy        bool
	part        bool // an UploadPart's
	// md5 is a part's Content-MD5, which UploadPart checks against the
	// MD5 it computes for the ETag: gofakes3's own check would hide the
	// body, and this with it, from UploadPart.
	md5 []byte
}

// checksum is the checksum sent, once the body has been read to its end;
// none where none was sent (a nil s included).
func (s *sentChecksum) checksum() objectChecksum {
	switch {
	case s == nil || s.algo == "":
		return objectChecksum{}
	case s.trailer != nil:
		return objectChecksum{algo: s.algo, value: s.trailer.got, typ: fullObject}
	}
	return objectChecksum{algo: s.algo, value: s.value, typ: fullObject}
}

// newChecksum returns a new hash of algo's checksum, or nil for none.
func newChecksum(algo string) hash.Hash {
	if algo == "" {
		return nil
	}
	return checksums[algo]()
}

// sumOf is the base64 of h's sum.
func sumOf(h hash.Hash) string { return base64.StdEncoding.EncodeToString(h.Sum(nil)) }

// answer puts the checksum that the store keeps of a PutObject's or
// UploadPart's body in the header of its answer (200), as S3 does: the
// SDKs list a part's in CompleteMultipartUpload from there.
func (s *sentChecksum) answer(h http.Header) {
	if s == nil || s.copy {
		return
	}
	c := s.checksum()
	if c.value == "" {
		return
	}
	h.Set(checksumKey(c.algo), c.value)
	if !s.part {
		h.Set(checksumTypeKey, c.typ)
	}
}
