package s3

import (
	"context"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/johannesboyne/gofakes3"

	"qshare/aws/wire"
)

// Versions. The store keeps one version of each object, the last one
// written, whose version ID is "null", as S3 names the version of an
// object in a bucket that was never versioned. A request that names
// that version is served as the object's (GetObject, HeadObject and
// DeleteObject with ?versionId=null, DeleteObjects with <VersionId>null,
// a copy's source with ?versionId=null, ListObjectVersions); one that
// names any other is InvalidArgument (S3's "Invalid version id
// specified", which versitygw and SeaweedFS answer too), and changes
// nothing. gofakes3,
// without versioning, answered a GET of a version with NotImplemented,
// a HEAD of any version with the object, a DeleteObject of one with
// NotImplemented, and deleted the object for a DeleteObjects entry of
// any version: a client that removed an old version lost the current
// object.

// nullVersion is the version ID of every object of this store.
const nullVersion = "null"

// badVersion is S3's answer to a version ID that is none of its.
func badVersion() *wire.Error {
	return s3Error(http.StatusBadRequest, "InvalidArgument", `Invalid version id specified: this store keeps one version of each object, "null"`)
}

// objectVersion answers a GetObject, HeadObject or DeleteObject that
// names a version other than "null" with badVersion, and takes a
// "null" one out of r's query, for gofakes3 to serve the object; it
// reports whether it answered.
func objectVersion(w http.ResponseWriter, r *http.Request) bool {
	q := r.URL.Query()
	v, ok := q["versionId"]
	if !ok {
		return false
	}
	if len(v) != 1 || v[0] != nullVersion {
		e := badVersion()
		writeError(w, e.Status, e.Code, e.Message)
		return true
	}
	q.Del("versionId")
	r.URL.RawQuery = q.Encode()
	return false
}

// listVersionsResult is ListObjectVersions' answer.
type listVersionsResult struct {
	XMLName             xml.Name `xml:"ListVersionsResult"`
	Xmlns               string   `xml:"xmlns,attr"`
	Name                string
	Prefix              string
	KeyMarker           string
	VersionIdMarker     string
	NextKeyMarker       string `xml:",omitempty"`
	NextVersionIdMarker string `xml:",omitempty"`
	MaxKeys             int64
	Delimiter           string `xml:",omitempty"`
	IsTruncated         bool
	Versions            []objectVersionItem     `xml:"Version"`
	CommonPrefixes      []gofakes3.CommonPrefix `xml:"CommonPrefixes,omitempty"`
}

type objectVersionItem struct {
	Key          string
	VersionId    string
	IsLatest     bool
	LastModified gofakes3.ContentTime
	ETag         string
	Size         int64
	StorageClass string
}

// listVersions answers ListObjectVersions of bucket: each object, as
// the store lists it (listLocked: prefix, delimiter, S3's order, a page
// of max-keys), as its one version, "null", the latest. A key-marker
// goes on after that key; a version-id-marker is "null" (after the
// key's one version, the same) and needs a key-marker, as on S3.
func (s *Server) listVersions(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	keyMarker, versionMarker := q.Get("key-marker"), q.Get("version-id-marker")
	switch {
	case versionMarker != "" && keyMarker == "":
		writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidArgument", "A version-id marker cannot be specified without a key marker."))
		return
	case versionMarker != "" && versionMarker != nullVersion:
		writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidArgument", `Invalid version id specified: this store keeps one version of each object, "null"`))
		return
	}
	maxKeys := int64(gofakes3.DefaultMaxBucketKeys)
	if v, ok := q["max-keys"]; ok {
		n, err := strconv.ParseInt(v[0], 10, 32)
		if err != nil || n < 0 {
			writeAnyError(w, s3Error(http.StatusBadRequest, "InvalidArgument", "Provided max-keys not an integer or within integer range: it is 0 to 2147483647"))
			return
		}
		maxKeys = min(n, gofakes3.DefaultMaxBucketKeys)
	}
	prefix := gofakes3.Prefix{Prefix: q.Get("prefix"), Delimiter: q.Get("delimiter")}
	prefix.HasPrefix, prefix.HasDelimiter = prefix.Prefix != "", prefix.Delimiter != ""
	l, err := s.backend.ListBucket(bucket, &prefix, gofakes3.ListBucketPage{Marker: keyMarker, HasMarker: keyMarker != "", MaxKeys: maxKeys})
	if err != nil {
		writeAnyError(w, err)
		return
	}
	res := &listVersionsResult{Xmlns: s3Namespace, Name: bucket, Prefix: prefix.Prefix, Delimiter: prefix.Delimiter, KeyMarker: keyMarker,
		VersionIdMarker: versionMarker, MaxKeys: maxKeys, IsTruncated: l.IsTruncated, CommonPrefixes: l.CommonPrefixes}
	for _, c := range l.Contents {
		res.Versions = append(res.Versions, objectVersionItem{Key: c.Key, VersionId: nullVersion, IsLatest: true, LastModified: c.LastModified,
			ETag: c.ETag, Size: c.Size, StorageClass: "STANDARD"})
	}
	if l.IsTruncated {
		res.NextKeyMarker = l.NextMarker
		if n := len(res.Versions); n > 0 && res.Versions[n-1].Key == l.NextMarker {
			res.NextVersionIdMarker = nullVersion
		}
	}
	writeXML(w, res)
}

// deleteRequest is DeleteObjects' document.
type deleteRequest struct {
	XMLName xml.Name `xml:"Delete"`
	Objects []struct {
		Key       string
		VersionId string
	} `xml:"Object"`
	Quiet bool
}

// decodeDelete reads a DeleteObjects document, as Authorize (to
// authorize each key) and the store (to delete them) both do: well
// formed, its root a Delete, naming 1 to maxDeleteKeys objects; anything
// else is S3's MalformedXML.
func decodeDelete(body []byte) (*deleteRequest, *wire.Error) {
	var in deleteRequest
	if err := xml.Unmarshal(body, &in); err != nil { // its root must be Delete (deleteRequest.XMLName)
		return nil, s3Error(http.StatusBadRequest, "MalformedXML", "The XML you provided was not well-formed or did not validate against the published schema: a Delete document")
	}
	if n := len(in.Objects); n == 0 || n > maxDeleteKeys {
		return nil, s3Error(http.StatusBadRequest, "MalformedXML", fmt.Sprintf("The XML you provided was not well-formed or did not validate against the published schema: a Delete names 1 to %d objects, this one %d", maxDeleteKeys, n))
	}
	return &in, nil
}

type deleteResult struct {
	XMLName xml.Name `xml:"DeleteResult"`
	Xmlns   string   `xml:"xmlns,attr"`
	Deleted []deletedObject
	Errors  []deleteError `xml:"Error"`
}

type deletedObject struct {
	Key       string
	VersionId string `xml:",omitempty"`
}

type deleteError struct {
	Key       string
	VersionId string `xml:",omitempty"`
	Code      string
	Message   string
}

// deniedKeys is the context key under which Authorize gives the store
// the keys of a DeleteObjects that the principal may not delete: each is
// answered AccessDenied, in the answer's list, and the others deleted,
// as on S3.
type deniedKeys struct{}

// deleteObjects answers DeleteObjects of bucket: the keys that the
// document names with no version or "null" are deleted (the backend's
// DeleteMulti, which answers a key that no object has as deleted, as S3
// does), and each other entry is InvalidArgument (badVersion), or
// AccessDenied where
// Authorize denied it, in the answer's list; Quiet leaves the deleted out.
func (s *Server) deleteObjects(w http.ResponseWriter, r *http.Request, bucket string) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeAnyError(w, err) // the cap's, or the connection's
		return
	}
	in, werr := decodeDelete(body)
	if werr != nil {
		writeAnyError(w, werr)
		return
	}
	if !s.bucketThere(w, bucket) {
		return
	}
	denied, _ := r.Context().Value(deniedKeys{}).(map[string]bool)
	res := &deleteResult{Xmlns: s3Namespace}
	var keys []string
	version := map[string]string{} // the version each deleted key was named by
	for _, o := range in.Objects {
		switch {
		case denied[o.Key]:
			res.Errors = append(res.Errors, deleteError{Key: o.Key, VersionId: o.VersionId, Code: "AccessDenied", Message: "Access Denied"})
		case o.VersionId != "" && o.VersionId != nullVersion:
			e := badVersion()
			res.Errors = append(res.Errors, deleteError{Key: o.Key, VersionId: o.VersionId, Code: e.Code, Message: e.Message})
		default:
			keys = append(keys, o.Key)
			version[o.Key] = o.VersionId
		}
	}
	if len(keys) > 0 {
		out, err := s.backend.DeleteMulti(bucket, keys...)
		if err != nil {
			writeAnyError(w, err)
			return
		}
		for _, d := range out.Deleted {
			if !in.Quiet {
				res.Deleted = append(res.Deleted, deletedObject{Key: d.Key, VersionId: version[d.Key]})
			}
		}
		for _, e := range out.Error {
			res.Errors = append(res.Errors, deleteError{Key: e.Key, VersionId: version[e.Key], Code: string(e.Code), Message: e.Message})
		}
	}
	writeXML(w, res)
}

// withDenied returns r with the keys of a DeleteObjects that may not be
// deleted (deniedKeys), for the store to answer.
func withDenied(r *http.Request, denied map[string]bool) *http.Request {
	if len(denied) == 0 {
		return r
	}
	return r.WithContext(context.WithValue(r.Context(), deniedKeys{}, denied))
}

// bucketVersioning answers GetBucketVersioning of bucket as S3 answers
// it of a bucket never versioned: a VersioningConfiguration with no
// Status (gofakes3 gave an empty Status and MfaDelete, which a client
// reads as a status of "").
func (s *Server) bucketVersioning(w http.ResponseWriter, bucket string) {
	if !s.bucketThere(w, bucket) {
		return
	}
	writeXML(w, &struct {
		XMLName xml.Name `xml:"VersioningConfiguration"`
		Xmlns   string   `xml:"xmlns,attr"`
	}{Xmlns: s3Namespace})
}
