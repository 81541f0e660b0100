package s3

import (
	"net/http"
	"strings"

	"qshare/aws/wire"
)

// An object's metadata is what S3 keeps of the request that wrote it:
// its user metadata (x-amz-meta-*), its content headers, its storage
// class and website redirect, and, of the store's own, its checksum and
// its parts (checksum.go, parts.go). gofakes3 kept every x-amz-* header
// of the request and answered each on every read of the object: the
// writer's x-amz-date, x-amz-content-sha256, a copy's
// x-amz-copy-source, and the x-amz-security-token of a client with
// temporary credentials, handed to whoever read the object. It also
// merged the old object's metadata into a PutObject's over it, where S3
// replaces it: user metadata that the new object was not given stayed.

// keptHeaders are the headers, besides x-amz-meta-*, that S3 keeps of
// an object's write and answers on its reads, of those that gofakes3
// reads of a write (it reads no Cache-Control, Content-Language or
// Expires, so the store keeps none).
var keptHeaders = map[string]bool{
	"Content-Type": true, "Content-Disposition": true, "Content-Encoding": true,
	"Last-Modified":       true, // gofakes3's, of the write
	"X-Amz-Storage-Class": true, "X-Amz-Website-Redirect-Location": true,
}

// keepMetadata takes out of meta every entry that S3 does not keep of an
// object: all but x-amz-meta-*, keptHeaders, and the store's own
// (ownPrefix, partsKey, x-amz-checksum-*), which keepChecksum and
// partLayout.keep set anew on a write.
func keepMetadata(meta map[string]string) {
	for k := range meta {
		c := http.CanonicalHeaderKey(k)
		switch {
		case strings.HasPrefix(c, "X-Amz-Meta-"), keptHeaders[c],
			strings.HasPrefix(c, ownPrefix), c == partsKey, strings.HasPrefix(strings.ToLower(c), checksumPrefix):
		default:
			delete(meta, k)
		}
	}
}

// userMetadata reports whether k (canonical) is an entry of an object's
// metadata that its writer gives: x-amz-meta-* and keptHeaders but
// Last-Modified, which the store gives.
func userMetadata(k string) bool {
	return strings.HasPrefix(k, "X-Amz-Meta-") || keptHeaders[k] && k != "Last-Modified"
}

// requestMetadataKey is the store's own header, and so metadata entry,
// that names the entries of a CopyObject's metadata that its request
// gave (userMetadata), which gofakes3 merges with its source's.
const requestMetadataKey = ownPrefix + "Request-Metadata"

// checkCopy checks a CopyObject's x-amz-metadata-directive, and refuses a
// copy of an object to itself that changes nothing, as S3 does; and it
// names the request's own metadata (requestMetadataKey) for
// copyMetadata.
func checkCopy(r *http.Request, bucket, key string) *wire.Error {
	directive := r.Header.Get("X-Amz-Metadata-Directive")
	if directive != "" && directive != "COPY" && directive != "REPLACE" {
		return s3Error(http.StatusBadRequest, "InvalidArgument", "Unknown metadata directive: x-amz-metadata-directive is COPY or REPLACE")
	}
	srcBucket, srcKey, e := copySource(r.Header.Get("X-Amz-Copy-Source"))
	if e != nil {
		return e
	}
	if srcBucket == bucket && srcKey == key && directive != "REPLACE" && r.Header.Get("X-Amz-Storage-Class") == "" && r.Header.Get("X-Amz-Website-Redirect-Location") == "" {
		return s3Error(http.StatusBadRequest, "InvalidRequest", "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes.")
	}
	var given []string
	for k := range r.Header {
		if userMetadata(http.CanonicalHeaderKey(k)) {
			given = append(given, http.CanonicalHeaderKey(k))
		}
	}
	r.Header.Set(requestMetadataKey, strings.Join(given, ","))
	return nil
}

// copyMetadata makes meta, a CopyObject's metadata as gofakes3 gives it
// (the request's, with its source's where the request gave none), the
// copy's as S3 makes it: with x-amz-metadata-directive COPY (the
// default), the source's user metadata (src) and none of the request's;
// with REPLACE, the request's and none of the source's.
func copyMetadata(meta, src map[string]string) {
	given := map[string]bool{}
	for _, k := range strings.Split(meta[requestMetadataKey], ",") {
		given[k] = true
	}
	delete(meta, requestMetadataKey)
	replace := meta["X-Amz-Metadata-Directive"] == "REPLACE"
	for k := range meta {
		if c := http.CanonicalHeaderKey(k); userMetadata(c) && given[c] != replace {
			delete(meta, k)
		}
	}
	if !replace {
		for k, v := range src {
			if userMetadata(http.CanonicalHeaderKey(k)) {
				meta[k] = v
			}
		}
	}
}

// lowerUserMetadata writes the user metadata of an answer (x-amz-meta-*)
// under lower-case names, as S3 does, which keeps the names so: Go's
// server writes the canonical form that gofakes3 sets
// ("X-Amz-Meta-Team"), and boto3, which keeps a header name's case,
// gave Metadata {"Team": …} where S3 gives {"team": …}.
func lowerUserMetadata(h http.Header) {
	for k, v := range h {
		if l := strings.ToLower(k); l != k && strings.HasPrefix(l, "x-amz-meta-") {
			delete(h, k)
			h[l] = v
		}
	}
}
