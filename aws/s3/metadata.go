package s3

import (
	"net/http"
	"strings"
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
