package s3

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"unicode/utf8"

	"github.com/johannesboyne/gofakes3"

	"qshare/aws/wire"
)

// What a request may name. The store keeps each object as a file under
// buckets/<bucket>/, named by its key, and its metadata in a file named
// after the key (metaName), so a key is a path here. Every bucket name
// and key a request carries, wherever it carries it (the URL's path, a
// copy's source, DeleteObjects' list, a listing's prefix), is checked
// before the file system sees it: a key that would leave its bucket's
// directory, or name a file the store cannot make, is refused, and the
// request changes nothing.

// maxKeyBytes is the longest key this store holds: its metadata file's
// name is the key and 33 bytes more (metaName), and a file's name holds
// at most 255 bytes. S3 holds keys of up to 1024 bytes (maxS3KeyBytes).
const maxKeyBytes = 255 - 33

// maxS3KeyBytes is S3's own limit of a key's length.
const maxS3KeyBytes = gofakes3.KeySizeLimit

// keyFault is what is wrong with an object key for this store.
type keyFault struct {
	code gofakes3.ErrorCode
	msg  string
	// unheld marks a key that S3 would hold and this store cannot (a
	// folder marker, a key longer than maxKeyBytes): no object of it is
	// here, so a read of it finds none and a delete has nothing to do,
	// where a write is refused.
	unheld bool
}

// err is the fault as gofakes3 answers it.
func (f *keyFault) err() error { return gofakes3.ErrorMessage(f.code, f.msg) }

// checkKey says what is wrong with key, or nil.
func checkKey(key string) *keyFault {
	invalid := func(msg string) *keyFault { return &keyFault{code: gofakes3.ErrInvalidArgument, msg: msg} }
	switch {
	case key == "":
		return invalid("object keys may not be empty")
	case len(key) > maxS3KeyBytes:
		return &keyFault{code: gofakes3.ErrKeyTooLong, msg: fmt.Sprintf("Your key is too long: %d bytes, where S3 allows %d", len(key), maxS3KeyBytes)}
	case !utf8.ValidString(key):
		return invalid("object keys must be UTF-8")
	case strings.ContainsRune(key, 0):
		return invalid("object keys may not hold NUL")
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		switch {
		case s == "." || s == "..":
			return invalid("object keys with '.' or '..' segments are not supported by this store")
		case s == "" && i < len(segs)-1:
			return invalid("object keys with empty segments ('//' or a leading '/') are not supported by this store")
		}
	}
	if strings.HasSuffix(key, "/") {
		return &keyFault{code: gofakes3.ErrInvalidArgument, unheld: true,
			msg: "object keys that end in '/' (folder markers) are not supported by this store: it keeps each key as a file, and the keys under a prefix in its directory"}
	}
	if len(key) > maxKeyBytes {
		return &keyFault{code: gofakes3.ErrKeyTooLong, unheld: true,
			msg: fmt.Sprintf("Your key is too long for this store: %d bytes, where it holds keys of up to %d (a key names its files)", len(key), maxKeyBytes)}
	}
	return nil
}

// checkBucket says what is wrong with a bucket's name, or nil: S3's rules
// (gofakes3's check), which every bucket made here follows, so a name
// that breaks them names no bucket.
func checkBucket(name string) error { return gofakes3.ValidateBucketName(name) }

// errorMessage is the message of a gofakes3 error, without its code.
func errorMessage(err error) string {
	var e *gofakes3.ErrorResponse
	if errors.As(err, &e) && e.Message != "" {
		return e.Message
	}
	return err.Error()
}

// checkObject checks a bucket and key for a write to them.
func checkObject(bucket, key string) error {
	if err := checkBucket(bucket); err != nil {
		return err
	}
	if f := checkKey(key); f != nil {
		return f.err()
	}
	return nil
}

// checkRead checks a bucket and key that a read names: a key this store
// cannot hold (keyFault.unheld) is no object of it, S3's NoSuchKey.
func checkRead(bucket, key string) error {
	if err := checkBucket(bucket); err != nil {
		return gofakes3.BucketNotFound(bucket)
	}
	if f := checkKey(key); f != nil {
		if f.unheld {
			return gofakes3.KeyNotFound(key)
		}
		return f.err()
	}
	return nil
}

// prefixHeld reports whether a listing's prefix can match a key of this
// store, where the backend takes its part up to the last '/' as the
// directory to list: not if that part has a segment that no key has
// ('.', '..', an empty one) or NUL.
func prefixHeld(prefix string) bool {
	i := strings.LastIndex(prefix, "/")
	if i < 0 {
		return !strings.ContainsRune(prefix, 0)
	}
	f := checkKey(prefix[:i] + "/x")
	return f == nil || f.unheld
}

// Where a key's file clashes with another's: the store keeps "a" as a
// file and "a/b" as a file in the directory "a", so the two cannot both
// be. MinIO, whose file system mode keeps objects the same way, answers
// such a write with these codes, which clients of S3-compatible stores
// know; gofakes3 would answer them with 500, so fullWriter gives them
// their statuses.
const (
	parentIsObject    gofakes3.ErrorCode = "XMinioParentIsObject"
	objectIsDirectory gofakes3.ErrorCode = "XMinioObjectExistsAsDirectory"
)

// clash says whether bucket/key cannot be written because a prefix of it
// is an object, or it is the prefix of objects (a directory): root is the
// store's buckets/ directory. The store's lock is held.
func clash(root, bucket, key string) error {
	dir := filepath.Join(root, bucket)
	segs := strings.Split(key, "/")
	for i, s := range segs {
		dir = filepath.Join(dir, s)
		st, err := os.Lstat(dir)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return nil
		case err != nil:
			return nil // the write says what is wrong
		case i < len(segs)-1 && !st.IsDir():
			return gofakes3.ErrorMessage(parentIsObject, fmt.Sprintf("the key %q is an object, so no key can lie under it in this store", strings.Join(segs[:i+1], "/")))
		case i == len(segs)-1 && st.IsDir() && !holdsFile(dir):
			// What deletions left: no key lies under it.
			if err := os.RemoveAll(dir); err != nil {
				return nil // the write says what is wrong
			}
			return nil
		case i == len(segs)-1 && st.IsDir():
			return gofakes3.ErrorMessage(objectIsDirectory, "the key is the prefix of other objects in this store, which keeps it as their directory: it cannot be an object too")
		}
	}
	return nil
}

// notADirectory reports whether err is a lookup of a key under another
// key's file ("a/b" where "a" is an object): no such object.
func notADirectory(err error) bool { return errors.Is(err, syscall.ENOTDIR) }

// queryKeys are the query parameters this store acts on, by the level a
// request names (the buckets, a bucket, an object) and its method; any
// other, but the X-Amz- ones of a presigned request and the SDKs' x-id,
// names an S3 feature that this store does not have (a subresource such
// as ?tagging, ?acl or ?policy). gofakes3 would not refuse it: it would
// take a PutObjectTagging for a PutObject of its XML, and a
// DeleteBucketPolicy for a DeleteBucket. So such a request is answered
// with NotImplemented, and changes nothing.
var queryKeys = map[string]map[string][]string{
	"": {
		http.MethodGet: {"max-buckets", "continuation-token", "prefix", "bucket-region"},
	},
	"bucket": {
		http.MethodGet: {"list-type", "prefix", "delimiter", "marker", "max-keys", "continuation-token", "start-after", "fetch-owner", "encoding-type",
			"location", "uploads", "key-marker", "upload-id-marker", "max-uploads", "versions", "version-id-marker", "versioning"},
		http.MethodHead:   {},
		http.MethodPut:    {"versioning"},
		http.MethodDelete: {},
		http.MethodPost:   {"delete"},
	},
	"object": {
		http.MethodGet: {"partNumber", "versionId", "uploadId", "max-parts", "part-number-marker",
			"response-content-type", "response-content-language", "response-expires", "response-cache-control", "response-content-disposition", "response-content-encoding"},
		http.MethodHead: {"partNumber", "versionId",
			"response-content-type", "response-content-language", "response-expires", "response-cache-control", "response-content-disposition", "response-content-encoding"},
		http.MethodPut:    {"partNumber", "uploadId"},
		http.MethodDelete: {"uploadId", "versionId"},
		http.MethodPost:   {"uploads", "uploadId"},
	},
}

// presignV2 are the query parameters of a URL presigned with Signature
// Version 2 (aws s3 presign's, boto3's generate_presigned_url's by
// default), which are no subresources.
var presignV2 = map[string]bool{"AWSAccessKeyId": true, "Signature": true, "Expires": true}

// checkRequest refuses, before anything is read or written, a request
// that names a bucket or key this store cannot hold, or asks for what it
// does not do (queryKeys; a POST to a bucket other than DeleteObjects,
// which is an HTML form's upload). It returns nil for a request to serve.
func checkRequest(r *http.Request) *wire.Error {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	level := ""
	switch {
	case key != "":
		level = "object"
	case bucket != "":
		level = "bucket"
	}
	allowed, ok := queryKeys[level][r.Method]
	if !ok {
		return s3Error(http.StatusMethodNotAllowed, "MethodNotAllowed", fmt.Sprintf("The specified method is not allowed against this resource: %s of %s", r.Method,
			map[string]string{"": "the list of buckets", "bucket": "a bucket", "object": "an object"}[level]))
	}
	for k := range r.URL.Query() {
		if k == "x-id" || strings.HasPrefix(strings.ToLower(k), "x-amz-") || presignV2[k] || slices.Contains(allowed, k) {
			continue
		}
		return s3Error(http.StatusNotImplemented, "NotImplemented", fmt.Sprintf("This store does not implement the request with ?%s: it keeps objects, buckets, their listings and multipart uploads", k))
	}
	if q := r.URL.Query(); level == "object" && (q.Has("uploadId") || q.Has("partNumber") && r.Method == http.MethodPut) && q.Get("uploadId") == "" {
		// gofakes3 takes an empty uploadId for none: an UploadPart of
		// one would be a PutObject over the key.
		return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchUpload), "The specified multipart upload does not exist: the request names no uploadId")
	}
	if level == "bucket" && r.Method == http.MethodPost && !r.URL.Query().Has("delete") {
		return s3Error(http.StatusNotImplemented, "NotImplemented", "This store does not implement POST Object (an HTML form's upload): use PutObject")
	}
	if bucket == "" {
		return nil
	}
	if err := checkBucket(bucket); err != nil {
		if r.Method == http.MethodPut && level == "bucket" && len(r.URL.Query()) == 0 {
			return s3Error(http.StatusBadRequest, string(gofakes3.ErrInvalidBucketName), "The specified bucket is not valid: "+errorMessage(err))
		}
		return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchBucket), "The specified bucket does not exist: its name breaks S3's rules for bucket names")
	}
	if key == "" {
		return nil
	}
	if src := r.Header.Get("X-Amz-Copy-Source"); src != "" && r.Method == http.MethodPut {
		if e := checkCopySource(src); e != nil {
			return e
		}
	}
	f := checkKey(key)
	switch {
	case f == nil:
		return nil
	case !f.unheld:
		return s3Error(f.code.Status(), string(f.code), f.msg)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		if r.URL.Query().Has("uploadId") {
			return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchUpload), "The specified multipart upload does not exist")
		}
		return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchKey), "The specified key does not exist")
	case r.Method == http.MethodDelete:
		if r.URL.Query().Has("uploadId") {
			return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchUpload), "The specified multipart upload does not exist")
		}
		return nil // nothing to delete: the backend's DeleteObject says so
	}
	return s3Error(f.code.Status(), string(f.code), f.msg)
}

// copySource is the bucket and key of a CopyObject's or UploadPartCopy's
// X-Amz-Copy-Source as gofakes3 reads them (its copyObject):
// "bucket/key", with or without a leading '/', the key URL-encoded, or
// the whole of it URL-encoded, '/' included; a versionId after '?'. A
// source that gofakes3 could not decode is refused with InvalidArgument.
func copySource(src string) (bucket, key string, _ *wire.Error) {
	bad := func(why string) *wire.Error {
		return s3Error(http.StatusBadRequest, string(gofakes3.ErrInvalidArgument), "X-Amz-Copy-Source: "+why)
	}
	bucket, key, ok := strings.Cut(strings.TrimPrefix(src, "/"), "/")
	decoded := false
	if !ok {
		d, err := url.QueryUnescape(src)
		if err != nil {
			return "", "", bad("it is not URL-encoded right")
		}
		bucket, key, ok = strings.Cut(strings.TrimPrefix(d, "/"), "/")
		decoded = true
	}
	if !ok {
		return "", "", bad("it must hold a bucket and a key, separated by '/'")
	}
	key, _, _ = strings.Cut(key, "?")
	if !decoded {
		k, err := url.QueryUnescape(key)
		if err != nil {
			return "", "", bad("its key is not URL-encoded right")
		}
		key = k
	}
	return bucket, key, nil
}

// checkCopySource refuses a copy's source (copySource) that names a
// bucket, key or version (copySourceVersion) no object of this store has.
func checkCopySource(src string) *wire.Error {
	bucket, key, e := copySource(src)
	if e != nil {
		return e
	}
	if e := copySourceVersion(src); e != nil {
		return e
	}
	if checkBucket(bucket) != nil {
		return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchBucket), "The bucket of the copy's source does not exist: its name breaks S3's rules for bucket names")
	}
	if f := checkKey(key); f != nil {
		if f.unheld {
			return s3Error(http.StatusNotFound, string(gofakes3.ErrNoSuchKey), "The key of the copy's source does not exist")
		}
		return s3Error(http.StatusBadRequest, string(gofakes3.ErrInvalidArgument), "X-Amz-Copy-Source: "+f.msg)
	}
	return nil
}
