package s3

import (
	"encoding/base64"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"

	"github.com/johannesboyne/gofakes3"

	"qshare/aws/wire"
)

// The checksums of multipart uploads. An upload created with
// x-amz-checksum-algorithm (and x-amz-checksum-type: COMPOSITE, the
// default but for CRC64NVME, or FULL_OBJECT, for the CRCs) keeps each
// part's checksum in that algorithm, sent or computed; ListParts gives
// them back, CompleteMultipartUpload checks each listed part's against
// the one kept and keeps the object's checksum of that type. gofakes3's
// messages have no checksums: the store answers ListParts and
// CompleteMultipartUpload itself (Server.route), with the uploads' own
// code under them.

// uploadChecksum is the checksum that an upload created with the
// x-amz-checksum-algorithm algo and the x-amz-checksum-type typ (either
// "") keeps of its object (no value yet), or S3's InvalidRequest.
func uploadChecksum(algo, typ string) (objectChecksum, *wire.Error) {
	if algo == "" {
		if typ != "" {
			return objectChecksum{}, s3Error(http.StatusBadRequest, "InvalidRequest", "The x-amz-checksum-type header can only be used with the x-amz-checksum-algorithm header.")
		}
		return objectChecksum{}, nil
	}
	a, e := checksumOf(checksumPrefix + algo)
	if e != nil {
		return objectChecksum{}, e
	}
	_, crc := crcPoly[a]
	switch typ = strings.ToUpper(typ); typ {
	case "":
		typ = composite
		if a == "crc64nvme" {
			typ = fullObject
		}
	case fullObject:
		if !crc {
			return objectChecksum{}, s3Error(http.StatusBadRequest, "InvalidRequest", "The FULL_OBJECT checksum type cannot be used with the "+a+" checksum algorithm.")
		}
	case composite:
		if a == "crc64nvme" {
			return objectChecksum{}, s3Error(http.StatusBadRequest, "InvalidRequest", "The COMPOSITE checksum type cannot be used with the crc64nvme checksum algorithm.")
		}
	default:
		return objectChecksum{}, s3Error(http.StatusBadRequest, "InvalidRequest", "Value for x-amz-checksum-type header is invalid.")
	}
	return objectChecksum{algo: a, typ: typ}, nil
}

// xmlChecksum is one Checksum<ALGORITHM> element of S3's XML
// (ChecksumCRC32, ChecksumSHA256, …).
type xmlChecksum struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

// checksumElement is c as its element, or none.
func checksumElement(c objectChecksum) []xmlChecksum {
	if c.algo == "" || c.value == "" {
		return nil
	}
	return []xmlChecksum{{XMLName: xml.Name{Local: "Checksum" + strings.ToUpper(c.algo)}, Value: c.value}}
}

// completedPart is one part that a CompleteMultipartUpload lists, with
// the checksums it gives.
type completedPart struct {
	PartNumber int
	ETag       string
	Checksums  []xmlChecksum `xml:",any"`
}

// checksum is the value of algo's checksum that p lists, or "".
func (p completedPart) checksum(algo string) string {
	for _, c := range p.Checksums {
		if strings.EqualFold(c.XMLName.Local, "Checksum"+algo) {
			return strings.TrimSpace(c.Value)
		}
	}
	return ""
}

type completeRequest struct {
	Parts []completedPart `xml:"Part"`
}

type completeResult struct {
	XMLName      xml.Name `xml:"CompleteMultipartUploadResult"`
	Xmlns        string   `xml:"xmlns,attr"`
	Location     string
	Bucket       string
	Key          string
	ETag         string
	Checksums    []xmlChecksum
	ChecksumType string `xml:",omitempty"`
}

// listedPart is a part as ListParts gives it, with its checksum.
type listedPart struct {
	gofakes3.ListMultipartUploadPartItem
	Checksums []xmlChecksum
}

type listPartsResult struct {
	gofakes3.ListMultipartUploadPartsResult
	Xmlns             string       `xml:"xmlns,attr"`
	ChecksumAlgorithm string       `xml:",omitempty"`
	ChecksumType      string       `xml:",omitempty"`
	Parts             []listedPart `xml:"Part"`
}

const s3Namespace = "http://s3.amazonaws.com/doc/2006-03-01/"

// route sends ListParts, CompleteMultipartUpload, UploadPartCopy,
// ListObjectVersions, GetBucketVersioning and DeleteObjects to the
// store's own answers, and a request of an object's version to
// objectVersion first; the rest goes to gofakes3.
func (s *Server) route(w http.ResponseWriter, r *http.Request) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	id := gofakes3.UploadID(r.URL.Query().Get("uploadId"))
	switch {
	case key == "" && r.Method == http.MethodGet && r.URL.Query().Has("versions"):
		s.listVersions(w, r, bucket)
		return
	case key == "" && r.Method == http.MethodGet && r.URL.Query().Has("versioning"):
		s.bucketVersioning(w, bucket)
		return
	case key == "" && r.Method == http.MethodPost && r.URL.Query().Has("delete"):
		s.deleteObjects(w, r, bucket)
		return
	case key != "" && id == "" && objectVersion(w, r):
		return
	case key == "" || id == "":
	case r.Method == http.MethodGet:
		s.listParts(w, r, bucket, key, id)
		return
	case r.Method == http.MethodPost:
		s.completeUpload(w, r, bucket, key, id)
		return
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") != "":
		s.uploadPartCopy(w, r, bucket, key, id)
		return
	}
	s.h.ServeHTTP(w, r)
}

// listParts answers ListParts as gofakes3 did, with each part's checksum
// and the upload's algorithm and type.
func (s *Server) listParts(w http.ResponseWriter, r *http.Request, bucket, key string, id gofakes3.UploadID) {
	if !s.bucketThere(w, bucket) {
		return
	}
	q := r.URL.Query()
	marker, err := queryInt(q.Get("part-number-marker"), 0, math.MaxInt32)
	if err != nil {
		writeAnyError(w, err)
		return
	}
	limit, err := queryInt(q.Get("max-parts"), gofakes3.DefaultMaxUploadParts, gofakes3.MaxUploadPartsLimit)
	if err != nil {
		writeAnyError(w, err)
		return
	}
	res, sums, up, err := s.uploads.listParts(bucket, key, id, marker, int64(limit))
	if err != nil {
		writeAnyError(w, err)
		return
	}
	out := listPartsResult{ListMultipartUploadPartsResult: *res, Xmlns: s3Namespace, ChecksumAlgorithm: strings.ToUpper(up.algo), ChecksumType: up.typ}
	for i, p := range res.Parts {
		out.Parts = append(out.Parts, listedPart{ListMultipartUploadPartItem: p, Checksums: checksumElement(sums[i])})
	}
	writeXML(w, &out)
}

// queryInt is a query's integer, def where it is absent, at most max: S3's
// InvalidArgument where it is no integer or below 0.
func queryInt(v string, def, max int) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, gofakes3.ErrorMessage(gofakes3.ErrInvalidArgument, "a part number marker or max-parts must be a whole number, 0 or more")
	}
	return min(n, max), nil
}

// completeUpload answers CompleteMultipartUpload, with the object's
// checksum.
func (s *Server) completeUpload(w http.ResponseWriter, r *http.Request, bucket, key string, id gofakes3.UploadID) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeAnyError(w, err) // the cap's, or the connection's
		return
	}
	var in completeRequest
	if err := xml.Unmarshal(body, &in); err != nil {
		writeAnyError(w, gofakes3.ErrorMessage(gofakes3.ErrMalformedXML, err.Error()))
		return
	}
	etag, sum, err := s.uploads.complete(bucket, key, id, in.Parts, r.Header)
	if err != nil {
		writeAnyError(w, err)
		return
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	writeXML(w, &completeResult{Xmlns: s3Namespace, Location: scheme + "://" + r.Host + "/" + bucket + "/" + key, Bucket: bucket, Key: key, ETag: etag,
		Checksums: checksumElement(sum), ChecksumType: sum.typ})
}

// completeChecksum checks the checksums that a CompleteMultipartUpload of
// an upload that keeps checksums in up lists of its parts (in, of the
// kept parts) and returns the object's: S3's InvalidRequest where one is
// missing, InvalidPart where one is not the part's, BadDigest where the
// request's x-amz-checksum-type or the object's checksum it sends is not
// the upload's.
func completeChecksum(up objectChecksum, in []completedPart, parts []*part, h http.Header) (objectChecksum, error) {
	if up.algo == "" {
		return objectChecksum{}, nil
	}
	if t := h.Get(checksumTypeKey); t != "" && !strings.EqualFold(t, up.typ) {
		return objectChecksum{}, s3Error(http.StatusBadRequest, "BadDigest", "The upload was created using the "+up.typ+" checksum mode. The complete request must use the same checksum mode.")
	}
	whole, crcs := checksums[up.algo](), make([]crcPart, 0, len(parts))
	for i, p := range in {
		sent := p.checksum(up.algo)
		if sent == "" {
			return objectChecksum{}, s3Error(http.StatusBadRequest, "InvalidRequest", "The upload was created using a "+up.algo+" checksum. The complete request must include the checksum for each part. It was missing for part "+strconv.Itoa(p.PartNumber)+" in the request.")
		}
		kept := parts[i].sum
		if kept.algo != up.algo || sent != kept.value {
			return objectChecksum{}, gofakes3.ErrorMessage(gofakes3.ErrInvalidPart, "One or more of the specified parts could not be found.  The part may not have been uploaded, or the specified entity tag may not match the part's entity tag.")
		}
		b, _ := base64.StdEncoding.DecodeString(kept.value)
		whole.Write(b)
		crcs = append(crcs, crcPart{sum: b, size: parts[i].size})
	}
	out := objectChecksum{algo: up.algo, typ: up.typ}
	if up.typ == fullObject {
		out.value = combineCRC(up.algo, crcs)
	} else {
		out.value = sumOf(whole) + "-" + strconv.Itoa(len(in))
	}
	if v := h.Get(checksumKey(up.algo)); v != "" && strings.TrimSuffix(v, "-"+strconv.Itoa(len(in))) != strings.TrimSuffix(out.value, "-"+strconv.Itoa(len(in))) {
		return objectChecksum{}, badDigest(up.algo)
	}
	return out, nil
}

// defaultUploadChecksum is the checksum of the object of an upload
// created without an algorithm, made of its parts (listed): a
// FULL_OBJECT CRC64NVME, as S3 adds to such an object, combined from
// the parts' own (part.dflt, which UploadPart computes for every part of
// such an upload; none where one lacks it).
func defaultUploadChecksum(parts []*part) objectChecksum {
	crcs := make([]crcPart, 0, len(parts))
	for _, p := range parts {
		if p.dflt == nil {
			return objectChecksum{}
		}
		crcs = append(crcs, crcPart{sum: p.dflt, size: p.size})
	}
	return objectChecksum{algo: defaultChecksum, typ: fullObject, value: combineCRC(defaultChecksum, crcs)}
}

// writeXML writes v as an answer's XML document.
func writeXML(w http.ResponseWriter, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		writeAnyError(w, err)
		return
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, xml.Header)
	w.Write(b)
}

// writeAnyError writes err as S3's error: a *wire.Error's, gofakes3's
// code and message, or InternalError.
func writeAnyError(w http.ResponseWriter, err error) {
	var we *wire.Error
	if errors.As(err, &we) {
		writeError(w, we.Status, we.Code, we.Message)
		return
	}
	code, msg := gofakes3.ErrInternal, ""
	var ge gofakes3.Error
	if errors.As(err, &ge) {
		code = ge.ErrorCode()
	}
	var er *gofakes3.ErrorResponse
	if errors.As(err, &er) {
		msg = er.Message
	}
	if msg == "" {
		msg = code.Message()
	}
	writeError(w, code.Status(), string(code), msg)
}

// checkUploadChecksum refuses, with S3's InvalidRequest, a
// CreateMultipartUpload whose checksum algorithm or type is not one
// (uploadChecksum), and a part that sends (sent) a checksum in another
// algorithm than its upload's.
func (s *Server) checkUploadChecksum(r *http.Request, sent *sentChecksum) *wire.Error {
	q := r.URL.Query()
	if r.Method == http.MethodPost && q.Has("uploads") {
		_, e := uploadChecksum(r.Header.Get(checksumKey("algorithm")), r.Header.Get(checksumTypeKey))
		return e
	}
	if sent == nil || sent.algo == "" || !q.Has("uploadId") {
		return nil
	}
	if algo := s.uploads.algorithm(gofakes3.UploadID(q.Get("uploadId"))); algo != "" && algo != sent.algo {
		return s3Error(http.StatusBadRequest, "InvalidRequest", "Checksum Type mismatch occurred, expected checksum Type: "+algo+", actual checksum Type: "+sent.algo)
	}
	return nil
}

// bucketThere reports whether bucket is there, answering
// NoSuchBucket (or the store's failure to tell) where it is not.
func (s *Server) bucketThere(w http.ResponseWriter, bucket string) bool {
	ok, err := s.backend.BucketExists(bucket)
	if err == nil && !ok {
		err = gofakes3.BucketNotFound(bucket)
	}
	if err != nil {
		writeAnyError(w, err)
		return false
	}
	return true
}
