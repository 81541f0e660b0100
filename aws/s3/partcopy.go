package s3

import (
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"

	"github.com/johannesboyne/gofakes3"

	"qshare/aws/wire"
)

// UploadPartCopy: a part whose bytes are a range of an object already in
// the store (X-Amz-Copy-Source, X-Amz-Copy-Source-Range), which the AWS
// CLI and boto3's transfer manager send for every copy of an object over
// their multipart threshold (8 MiB), `aws s3 cp s3://… s3://…` included.
// gofakes3 does not have it; the store answers it itself (Server.route),
// with the uploads' own code under it, so that the part is kept, and
// checked, as an UploadPart's is.

// copyPartResult is UploadPartCopy's answer.
type copyPartResult struct {
	XMLName      xml.Name `xml:"CopyPartResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	ETag         string
	LastModified gofakes3.ContentTime
	Checksums    []xmlChecksum
}

// copyRange matches an X-Amz-Copy-Source-Range: S3 takes one form only,
// both offsets given.
var copyRange = regexp.MustCompile(`^bytes=([0-9]{1,19})-([0-9]{1,19})$`)

// uploadPartCopy answers UploadPartCopy of part partNumber of upload id
// of bucket/key. The source is opened once: its size, ETag and
// Last-Modified, which its range and conditions are checked against, are
// those of the bytes copied, whatever a PutObject of the source does
// meanwhile. A source or range that is not one, a condition that fails,
// or an upload that is not there changes nothing.
func (s *Server) uploadPartCopy(w http.ResponseWriter, r *http.Request, bucket, key string, id gofakes3.UploadID) {
	if !s.bucketThere(w, bucket) {
		return
	}
	number, err := strconv.Atoi(r.URL.Query().Get("partNumber"))
	if err != nil || number < 1 || number > gofakes3.MaxUploadPartNumber {
		writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("Part number must be an integer between 1 and %d, inclusive", gofakes3.MaxUploadPartNumber)))
		return
	}
	s.uploads.mu.Lock()
	_, err = s.uploads.get(bucket, key, id)
	s.uploads.mu.Unlock()
	if err != nil {
		writeAnyError(w, err)
		return
	}
	srcBucket, srcKey, e := copySource(r.Header.Get("X-Amz-Copy-Source"))
	if e != nil {
		writeAnyError(w, e)
		return
	}
	src, err := s.backend.GetObject(srcBucket, srcKey, nil)
	if err != nil {
		writeAnyError(w, err)
		return
	}
	defer src.Contents.Close()
	cond := copyConditions(r.Header.Get)
	if cond != nil && cond.check(`"`+etag(src.Hash, src.Metadata)+`"`, src.Metadata["Last-Modified"]) != 0 {
		writeAnyError(w, s3Error(http.StatusPreconditionFailed, "PreconditionFailed", "At least one of the pre-conditions you specified did not hold: the copy's source is not the object that its x-amz-copy-source-if-* headers name"))
		return
	}
	start, length := int64(0), src.Size
	if v := r.Header.Get("X-Amz-Copy-Source-Range"); v != "" {
		m := copyRange.FindStringSubmatch(v)
		if m == nil {
			writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidArgument", "The x-amz-copy-source-range value must be of the form bytes=first-last where first and last are the zero-based offsets of the first and last bytes to copy"))
			return
		}
		first, err1 := strconv.ParseInt(m[1], 10, 64)
		last, err2 := strconv.ParseInt(m[2], 10, 64)
		if err1 != nil || err2 != nil || first > last || last >= src.Size {
			writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidArgument", fmt.Sprintf("Range specified is not valid for source object of size: %d", src.Size)))
			return
		}
		start, length = first, last-first+1
	}
	if length == 0 {
		// As an UploadPart of no bytes is refused: a part has a byte at
		// least, by which a read of one part (partNumber) names it.
		writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidRequest", "The copy's source is empty: this store keeps no part of no bytes"))
		return
	}
	if length > MaxBody {
		writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidRequest", fmt.Sprintf("The specified copy source is larger than the maximum allowable size for a copy source: %d", int64(MaxBody))))
		return
	}
	var in io.Reader = src.Contents
	if start > 0 {
		seeker, ok := src.Contents.(io.Seeker)
		if !ok {
			writeAnyError(w, gofakes3.ErrorMessage(gofakes3.ErrInternal, "the copy's source cannot be read from an offset"))
			return
		}
		if _, err := seeker.Seek(start, io.SeekStart); err != nil {
			writeAnyError(w, notKept("the copy's source cannot be read", err))
			return
		}
	}
	p, err := s.uploads.uploadPart(bucket, key, id, number, length, &sourceReader{r: io.LimitReader(in, length)}, nil)
	if err != nil {
		writeAnyError(w, err)
		return
	}
	writeXML(w, &copyPartResult{Xmlns: s3Namespace, ETag: p.etag(), LastModified: gofakes3.NewContentTime(p.modified), Checksums: checksumElement(p.sum)})
}

// sourceReader reads a copy's source from the store's disk: a read that
// fails is the store's failure (InternalError), not the client's, which
// a part's body that fails is.
type sourceReader struct{ r io.Reader }

func (s *sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = notKept("the copy's source cannot be read", err)
	}
	return n, err
}

// copyConditions are the conditions that a copy (CopyObject or
// UploadPartCopy) puts on its source, which get reads from the request's
// headers (x-amz-copy-source-if-match, -if-none-match,
// -if-modified-since, -if-unmodified-since), or nil if there are none.
// They are evaluated as a GET's are (readConditions.check), in S3's
// order; any that fails is S3's PreconditionFailed (412), where a GET
// may answer 304.
func copyConditions(get func(string) string) *readConditions {
	c := &readConditions{ifMatch: get(copyIfMatch), ifNoneMatch: get(copyIfNoneMatch),
		ifModifiedSince: get(copyIfModifiedSince), ifUnmodifiedSince: get(copyIfUnmodifiedSince)}
	if *c == (readConditions{}) {
		return nil
	}
	return c
}

const (
	copyIfMatch           = "X-Amz-Copy-Source-If-Match"
	copyIfNoneMatch       = "X-Amz-Copy-Source-If-None-Match"
	copyIfModifiedSince   = "X-Amz-Copy-Source-If-Modified-Since"
	copyIfUnmodifiedSince = "X-Amz-Copy-Source-If-Unmodified-Since"
)

// copySourceVersion refuses, with S3's InvalidArgument (badVersion), a copy's source
// (X-Amz-Copy-Source) that names a version other than "null", the one
// version of every object of this store, which keeps none but the last:
// a copy of an older version must not copy the newest in its place.
func copySourceVersion(src string) *wire.Error {
	_, query, ok := strings.Cut(src, "?")
	if !ok {
		if d, err := url.QueryUnescape(src); err == nil && !strings.Contains(strings.TrimPrefix(src, "/"), "/") {
			_, query, ok = strings.Cut(d, "?") // the whole source URL-encoded (copySource)
		}
	}
	if !ok {
		return nil
	}
	q, err := url.ParseQuery(query)
	if err != nil {
		return s3Error(http.StatusBadRequest, "InvalidArgument", "X-Amz-Copy-Source: the query after its key is not URL-encoded right")
	}
	if v, ok := q["versionId"]; ok && (len(v) != 1 || v[0] != "null") {
		return badVersion()
	}
	return nil
}
