// Package s3 is qshare's embedded S3-compatible store: the endpoint that
// jobs' channels are staged from and their models uploaded to when no
// other store is named, so that one box needs nothing but qshare. The
// protocol (path-style requests, ListObjectsV2, multipart uploads, ranged
// GETs, the XML errors) is gofakes3's; this package gives it a home in the
// data directory that survives a restart, refuses keys that a file system
// cannot hold as S3 does, and writes every object atomically.
package s3

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"

	"qshare/aws/wire"
)

// Server serves the S3 API over the objects kept in one directory. It is
// safe for concurrent use.
type Server struct {
	h   http.Handler
	dir string
}

// New returns a Server that keeps its buckets and objects under dir
// (created if missing): buckets/<bucket>/<key> for the objects,
// metadata/ for their metadata, tmp/ for objects being written.
func New(dir string) (*Server, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{dir, filepath.Join(dir, tmpDir)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return nil, fmt.Errorf("s3: creating %s: %w", d, err)
		}
	}
	// What a write left in tmp/ when the server died is no object, and
	// the parts there belong to uploads that gofakes3 has forgotten.
	if ents, err := os.ReadDir(filepath.Join(dir, tmpDir)); err == nil {
		for _, e := range ents {
			os.RemoveAll(filepath.Join(dir, tmpDir, e.Name()))
		}
	}
	fs := &atomicFs{Fs: afero.NewBasePathFs(afero.NewOsFs(), dir)}
	mb, err := s3afero.MultiBucket(fs)
	if err != nil {
		return nil, fmt.Errorf("s3: %w", err)
	}
	g := gofakes3.New(&wholeBackend{MultiBucketBackend: mb, fs: fs, root: dir}, gofakes3.WithoutVersioning())
	return &Server{h: g.Server(), dir: dir}, nil
}

// ServeHTTP answers one S3 request, path-style (/bucket/key). A key that
// a file system cannot hold apart from others ("..", ".", an empty
// segment) is refused with S3's InvalidArgument, so that no key can reach
// another bucket's files.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if msg := badKey(r.URL.Path); msg != "" {
		writeError(w, http.StatusBadRequest, "InvalidArgument", msg)
		return
	}
	if r.Header.Get("X-Amz-Content-Sha256") == unsignedTrailer {
		if e := decodeTrailer(r); e != nil {
			writeError(w, e.Status, e.Code, e.Message)
			return
		}
	} else if r.ContentLength > MaxBody {
		writeError(w, http.StatusBadRequest, "EntityTooLarge", fmt.Sprintf("Your proposed upload exceeds the maximum allowed size: %d bytes, S3's limit of one PutObject or part", int64(MaxBody)))
		return
	}
	// Only a CreateMultipartUpload of this store marks its upload's parts
	// as files to read at its completion (parts.go).
	r.Header.Del(partsMarker)
	q := r.URL.Query()
	if _, ok := q["uploads"]; ok && r.Method == http.MethodPost {
		r.Header.Set(partsMarker, "1")
	}
	if q.Get("uploadId") != "" && (r.Method == http.MethodPost || r.Method == http.MethodDelete) {
		sw := &statusWriter{ResponseWriter: w}
		w = sw
		defer func() {
			if sw.ok() {
				removeParts(s.dir, r)
			}
		}()
	}
	if r.Body == nil || r.Body == http.NoBody {
		s.h.ServeHTTP(w, r)
		return
	}
	limit, tooLarge := int64(MaxBody), s3Error(http.StatusBadRequest, "EntityTooLarge", fmt.Sprintf("Your proposed upload exceeds the maximum allowed size: %d bytes, S3's limit of one PutObject or part", int64(MaxBody)))
	if !objectData(r) {
		// Every other body is an XML document (CompleteMultipartUpload,
		// DeleteObjects, a bucket's configuration) that gofakes3 reads
		// whole.
		limit, tooLarge = MaxXMLBody, s3Error(http.StatusBadRequest, "MaxMessageLengthExceeded", fmt.Sprintf("Your request was too big: this request's XML body may hold at most %d bytes", int64(MaxXMLBody)))
		if r.ContentLength > limit {
			w.Header().Set("Connection", "close")
			writeError(w, tooLarge.Status, tooLarge.Code, tooLarge.Message)
			return
		}
	}
	b := &failedBody{ReadCloser: &cappedBody{ReadCloser: r.Body, left: limit, err: tooLarge}}
	r.Body = b
	if r.Method == http.MethodPut && q.Get("partNumber") != "" && q.Get("uploadId") != "" {
		// UploadPart: the part goes to a file, gofakes3 keeps a reference.
		file, status, code, msg := spoolPart(s.dir, r)
		if status != 0 {
			if e := b.err; code == "" && e != nil {
				status, code, msg = e.Status, e.Code, e.Message
			} else if code == "" {
				code = "IncompleteBody"
			}
			w.Header().Set("Connection", "close")
			writeError(w, status, code, msg)
			return
		}
		sw := &statusWriter{ResponseWriter: w}
		s.h.ServeHTTP(sw, r)
		if !sw.ok() {
			os.Remove(file)
		}
		return
	}
	s.h.ServeHTTP(&bodyErrorWriter{ResponseWriter: w, body: b}, r)
}

// statusWriter keeps the status of the answer.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// ok reports whether the answer was a success: a handler that wrote
// nothing answered 200.
func (w *statusWriter) ok() bool { return w.status == 0 || w.status/100 == 2 }

func (w *statusWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

// MaxBody is the most bytes of one request's body: S3's limit of one
// PutObject or part, 5 GiB.
const MaxBody = 5 << 30

// MaxXMLBody is the most bytes of the body of a request that sends no
// object's data: an XML document, such as CompleteMultipartUpload's list
// of up to 10,000 parts (about 1 MB as the SDKs write it) or DeleteObjects'
// of up to 1,000 keys.
const MaxXMLBody = 2 << 20

// objectData reports whether r's body is an object's data: PutObject or
// UploadPart, a PUT of a key with no subresource but a part's.
func objectData(r *http.Request) bool {
	if r.Method != http.MethodPut {
		return false
	}
	if _, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); key == "" {
		return false
	}
	for k := range r.URL.Query() {
		if k != "partNumber" && k != "uploadId" && k != "x-id" {
			return false
		}
	}
	return true
}

// cappedBody reads at most left bytes of a body, and fails with err (an
// S3 error, which failedBody keeps for the answer) when it holds more.
type cappedBody struct {
	io.ReadCloser
	left int64
	err  *wire.Error
}

func (c *cappedBody) Read(p []byte) (int, error) {
	if c.left < 0 {
		return 0, c.err
	}
	if int64(len(p)) > c.left+1 {
		p = p[:c.left+1]
	}
	n, err := c.ReadCloser.Read(p)
	if c.left -= int64(n); c.left < 0 {
		return n - 1, c.err
	}
	return n, err
}

// failedBody is a request body that keeps the first *wire.Error its
// reader failed with: authentication's refusal of a body that is not what
// its signed X-Amz-Content-Sha256 declared, which the store only sees as a
// failed read (and drops the object for).
type failedBody struct {
	io.ReadCloser
	err *wire.Error
}

func (b *failedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if e := (*wire.Error)(nil); b.err == nil && errors.As(err, &e) {
		b.err = e
	}
	return n, err
}

// bodyErrorWriter answers a request whose body failed with a *wire.Error
// with that error, in S3's shape, in place of what gofakes3 answers (an
// InternalError).
type bodyErrorWriter struct {
	http.ResponseWriter
	body     *failedBody
	replaced bool
}

func (w *bodyErrorWriter) WriteHeader(status int) {
	if e := w.body.err; e != nil && !w.replaced {
		w.replaced = true
		// The body was not read to its end: the connection cannot carry
		// another request.
		w.ResponseWriter.Header().Set("Connection", "close")
		writeError(w.ResponseWriter, e.Status, e.Code, e.Message)
		return
	}
	if !w.replaced {
		w.ResponseWriter.WriteHeader(status)
	}
}

func (w *bodyErrorWriter) Write(p []byte) (int, error) {
	if !w.replaced && w.body.err != nil {
		w.WriteHeader(http.StatusBadRequest)
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// badKey says what is wrong with the key of a path-style request path,
// or "".
func badKey(p string) string {
	p = strings.TrimPrefix(p, "/")
	_, key, ok := strings.Cut(p, "/")
	if !ok || key == "" {
		return ""
	}
	segs := strings.Split(key, "/")
	for i, s := range segs {
		switch {
		case s == "." || s == "..":
			return "object keys with '.' or '..' segments are not supported by this store"
		case s == "" && i < len(segs)-1:
			return "object keys with empty segments ('//' or a leading '/') are not supported by this store"
		}
	}
	if strings.ContainsRune(key, 0) {
		return "object keys may not hold NUL"
	}
	return ""
}

// writeError writes an S3 error document.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
}

const tmpDir = "tmp"

// atomicFs writes every file it creates to tmp/ first and renames it into
// place when it is closed, so that a server killed during a PUT leaves
// the object as it was, never half-written under its key. A body that
// ended early (wholeBackend) sets abort, and the file being written is
// then dropped at its close.
type atomicFs struct {
	afero.Fs
	abort atomic.Bool
}

// wholeBackend is the file backend whose PutObject stores an object only
// when its whole body came: the backend copies the body under its lock
// and closes the file whatever the copy's error, so the reader tells
// atomicFs (one PutObject at a time holds the lock, so one flag serves).
type wholeBackend struct {
	*s3afero.MultiBucketBackend
	fs   *atomicFs
	root string
}

// PutObject stores an object. The object of a multipart upload that this
// store started (its metadata has partsMarker) is given as the references
// to its parts' files (parts.go), which are read in their place.
func (b *wholeBackend) PutObject(bucket, key string, meta map[string]string, input io.Reader, size int64, cond *gofakes3.PutConditions) (gofakes3.PutObjectResult, error) {
	if _, ok := meta[partsMarker]; ok {
		m := make(map[string]string, len(meta))
		for k, v := range meta {
			if k != partsMarker {
				m[k] = v
			}
		}
		parts, n, err := openParts(b.root, input)
		if err != nil {
			return gofakes3.PutObjectResult{}, err
		}
		defer parts.Close()
		meta, input, size = m, parts, n
	}
	return b.MultiBucketBackend.PutObject(bucket, key, meta, &wholeReader{r: input, left: size, fs: b.fs}, size, cond)
}

// wholeReader reads a body of a known size, and marks the write aborted
// when it fails or ends short.
type wholeReader struct {
	r    io.Reader
	left int64
	fs   *atomicFs
}

func (w *wholeReader) Read(p []byte) (int, error) {
	n, err := w.r.Read(p)
	w.left -= int64(n)
	if err == io.EOF && w.left != 0 {
		err = io.ErrUnexpectedEOF
	}
	if err != nil && err != io.EOF {
		w.fs.abort.Store(true)
	}
	return n, err
}

func (a *atomicFs) Create(name string) (afero.File, error) {
	return a.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o666)
}

func (a *atomicFs) OpenFile(name string, flag int, perm os.FileMode) (afero.File, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) != os.O_CREATE|os.O_TRUNC || flag&(os.O_WRONLY|os.O_RDWR) == 0 {
		return a.Fs.OpenFile(name, flag, perm)
	}
	f, err := afero.TempFile(a.Fs, tmpDir, "put-")
	if err != nil {
		return nil, err
	}
	return &atomicFile{File: f, fs: a, final: name}, nil
}

// atomicFile is a file being written under a temporary name.
type atomicFile struct {
	afero.File
	fs     afero.Fs
	final  string
	closed bool
}

func (f *atomicFile) Name() string { return f.final }

func (f *atomicFile) Close() error {
	if f.closed {
		return nil
	}
	f.closed = true
	tmp := f.File.Name()
	if f.fs.(*atomicFs).abort.Swap(false) {
		f.File.Close()
		f.fs.Remove(tmp)
		return errors.New("s3: the object's body ended early; nothing was stored")
	}
	if err := f.File.Sync(); err != nil {
		f.File.Close()
		f.fs.Remove(tmp)
		return err
	}
	if err := f.File.Close(); err != nil {
		f.fs.Remove(tmp)
		return err
	}
	if err := f.fs.Rename(tmp, f.final); err != nil {
		f.fs.Remove(tmp)
		return err
	}
	return nil
}

// SigningName is S3's service name in a SigV4 credential scope, by which
// the one router sends a request here.
const SigningName = "s3"

// Authorize returns next behind authorization: each request's S3 action
// and resource (Action) are decided by authorize (auth.Authorize, in
// qshare serve), and a refusal is S3's AccessDenied. Without
// authentication authorize allows everything.
func Authorize(next http.Handler, authorize func(r *http.Request, action, resource string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		action, resource := Action(r)
		if err := authorize(r, action, resource); err != nil {
			writeError(w, http.StatusForbidden, "AccessDenied", "Access Denied: "+action+" on "+resource)
			return
		}
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			if err := authorize(r, "s3:GetObject", objectARN(strings.TrimPrefix(src, "/"))); err != nil {
				writeError(w, http.StatusForbidden, "AccessDenied", "Access Denied: s3:GetObject on the copy source")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// Action returns the IAM action and resource ARN of a path-style S3
// request, as AWS names them: s3:GetObject on arn:aws:s3:::bucket/key,
// s3:ListBucket on arn:aws:s3:::bucket, s3:ListAllMyBuckets on "*".
func Action(r *http.Request) (string, string) {
	p := strings.TrimPrefix(r.URL.Path, "/")
	bucket, key, _ := strings.Cut(p, "/")
	q := r.URL.Query()
	if bucket == "" {
		return "s3:ListAllMyBuckets", "*"
	}
	barn := "arn:aws:s3:::" + bucket
	if key == "" {
		switch r.Method {
		case http.MethodPut:
			return "s3:CreateBucket", barn
		case http.MethodDelete:
			return "s3:DeleteBucket", barn
		case http.MethodPost:
			if q.Has("delete") {
				return "s3:DeleteObject", barn + "/*"
			}
		case http.MethodGet:
			switch {
			case q.Has("location"):
				return "s3:GetBucketLocation", barn
			case q.Has("uploads"):
				return "s3:ListBucketMultipartUploads", barn
			case q.Has("versions"):
				return "s3:ListBucketVersions", barn
			}
		}
		return "s3:ListBucket", barn
	}
	oarn := objectARN(p)
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if q.Has("uploadId") {
			return "s3:ListMultipartUploadParts", oarn
		}
		return "s3:GetObject", oarn
	case http.MethodDelete:
		if q.Has("uploadId") {
			return "s3:AbortMultipartUpload", oarn
		}
		return "s3:DeleteObject", oarn
	}
	return "s3:PutObject", oarn // PUT, a part, and the POSTs of a multipart upload
}

func objectARN(bucketKey string) string {
	if i := strings.IndexAny(bucketKey, "?"); i >= 0 {
		bucketKey = bucketKey[:i]
	}
	return "arn:aws:s3:::" + bucketKey
}

// Unavailable returns a handler that answers every request with S3's
// InternalError (503) and msg: the store of a server whose data
// directory it cannot use.
func Unavailable(msg string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusServiceUnavailable, "InternalError", msg)
	})
}

// IdleDeadlines returns h with the connection's read deadline moved to
// read from now before each read of a request's body, and its write
// deadline to write from now before each write of the answer: an object
// of any size moves as long as its bytes keep coming, where the HTTP
// server's whole-request ReadTimeout and WriteTimeout (30 s and 60 s in
// qshare serve) would cut a large PutObject or GetObject short. A client
// that stops sending for read is still cut off.
func IdleDeadlines(h http.Handler, read, write time.Duration) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rc := http.NewResponseController(w)
		if r.Body != nil && r.Body != http.NoBody {
			r.Body = &idleBody{ReadCloser: r.Body, rc: rc, idle: read, write: write}
		}
		h.ServeHTTP(&idleWriter{ResponseWriter: w, rc: rc, idle: write}, r)
	})
}

type idleBody struct {
	io.ReadCloser
	rc          *http.ResponseController
	idle, write time.Duration
}

// Read moves the read deadline, and the write deadline too: the answer
// is written once the body has come, however long it took.
func (b *idleBody) Read(p []byte) (int, error) {
	now := time.Now()
	_ = b.rc.SetReadDeadline(now.Add(b.idle)) // a writer that cannot: the server's own timeouts stay
	_ = b.rc.SetWriteDeadline(now.Add(b.write))
	return b.ReadCloser.Read(p)
}

type idleWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

func (w *idleWriter) Write(p []byte) (int, error) {
	_ = w.rc.SetWriteDeadline(time.Now().Add(w.idle))
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's own writer.
func (w *idleWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
