// Package s3 is qshare's embedded S3-compatible store: the endpoint that
// jobs' channels are staged from and their models uploaded to when no
// other store is named, so that one box needs nothing but qshare. The
// protocol (path-style requests, ListObjectsV2, multipart uploads, ranged
// GETs, the XML errors) is gofakes3's; this package gives it a home in the
// data directory that survives a restart, refuses keys that a file system
// cannot hold as S3 does, and writes every object atomically.
package s3

import (
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3afero"
	"github.com/spf13/afero"

	"qshare/aws/wire"
	"qshare/periodic"
)

// Server serves the S3 API over the objects kept in one directory. It is
// safe for concurrent use.
type Server struct {
	h       http.Handler
	dir     string
	uploads *uploads
	backend *wholeBackend
	log     *errorLog
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
	// A commit that the server died in the middle of, its data in place
	// and its metadata not, is finished (rollForward). The rest of what a
	// write left in tmp/ is no object, and the parts there belong to
	// uploads that gofakes3 has forgotten.
	if err := rollForward(dir); err != nil {
		return nil, fmt.Errorf("s3: finishing the commits under way at the last stop: %w", withoutPath(err))
	}
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
	b := &wholeBackend{MultiBucketBackend: mb, fs: fs, root: dir, syncDir: syncDirectory}
	b.uploads = newUploads(filepath.Join(dir, tmpDir, partsDir), filepath.Join(dir, tmpDir), b.commitFile)
	log := &errorLog{}
	g := gofakes3.New(b, gofakes3.WithoutVersioning(), gofakes3.WithLogger(log))
	return &Server{h: g.Server(), dir: dir, uploads: b.uploads, backend: b, log: log}, nil
}

// SetLog names the log that the store's internal errors go to, with
// their causes, which its answers (InternalError) leave out; until it is
// called they go nowhere.
func (s *Server) SetLog(log *slog.Logger) { s.log.to.Store(log) }

// errorLog is gofakes3's log: the internal errors it answers go to the
// log that SetLog named; its other messages are dropped. A client that
// closed its connection before an answer ended (a GET cut short, an
// `aws s3 cp` stopped with Ctrl-C) is no failure of the store: gofakes3
// takes the failed write for an internal error, and it goes to the log
// at debug level.
type errorLog struct{ to atomic.Pointer[slog.Logger] }

func (e *errorLog) Print(level gofakes3.LogLevel, v ...any) {
	l := e.to.Load()
	if l == nil || level != gofakes3.LogErr {
		return
	}
	for _, x := range v {
		if err, ok := x.(error); ok && clientGone(err) {
			l.Debug("a client went away before the embedded S3 store's answer ended", "err", err.Error())
			return
		}
	}
	l.Error("the embedded S3 store failed", "err", fmt.Sprint(v...))
}

// clientGone reports whether err is a write to a connection that its
// client closed or reset, or a request that its client gave up.
func clientGone(err error) bool {
	return errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, context.Canceled)
}

// DefaultAbortIdleUploads is how long a multipart upload may go without a
// part before the store aborts it and removes its parts' files: the bound
// of qshare serve's --s3-abort-idle-uploads.
const DefaultAbortIdleUploads = 24 * time.Hour

// AbortIdleUploads aborts the multipart uploads that no part has come to,
// nor been coming to, for longer than idle (counted from its start for
// an upload that has none yet), as S3's lifecycle rule
// AbortIncompleteMultipartUpload does, removing their parts' files; it
// returns how many it aborted. A part still coming keeps its upload.
func (s *Server) AbortIdleUploads(idle time.Duration) int {
	return s.uploads.abortIdle(idle)
}

// SweepIdleUploads calls AbortIdleUploads(idle) now and then every
// quarter of idle (at most every hour, at least every 10 ms) until stop
// is closed, and tells aborted how many each call aborted when it
// aborted some.
func (s *Server) SweepIdleUploads(idle time.Duration, stop <-chan struct{}, aborted func(n int)) {
	sweep := func() {
		if n := s.AbortIdleUploads(idle); n > 0 && aborted != nil {
			aborted(n)
		}
	}
	sweep()
	periodic.Run(min(max(idle/4, 10*time.Millisecond), time.Hour), sweep, stop)
}

// ServeHTTP answers one S3 request, path-style (/bucket/key). A request
// that names a bucket or key this store cannot hold, or asks for what it
// does not do, is refused first (checkRequest), so that no key can reach
// another bucket's files and no request is taken for another.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if e := checkRequest(r); e != nil {
		writeError(w, e.Status, e.Code, e.Message)
		return
	}
	r.Header.Del(sentKey) // the store's own
	r.Header.Del(requestMetadataKey)
	if bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); r.Method == http.MethodPut && key != "" && r.Header.Get("X-Amz-Copy-Source") != "" && !r.URL.Query().Has("uploadId") {
		if e := checkCopy(r, bucket, key); e != nil {
			writeError(w, e.Status, e.Code, e.Message)
			return
		}
	}
	var ew *etagWriter
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		fw := &fullWriter{ResponseWriter: w}
		defer fw.finish()
		w = fw
	} else {
		ew = &etagWriter{ResponseWriter: w, checksums: wantsChecksum(r)}
		if _, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); key != "" {
			ew.cond = takeReadConditions(r.Header)
		}
		defer ew.done()
		w = ew
	}
	sent, e := checkBody(r)
	if _, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/"); e == nil && key != "" && (r.Method == http.MethodGet || r.Method == http.MethodHead) {
		e = s.partNumber(r, ew)
	}
	if e == nil {
		e = s.checkUploadChecksum(r, sent)
	}
	if e != nil {
		writeError(w, e.Status, e.Code, e.Message)
		return
	}
	if sent != nil && !sent.part {
		defer s.backend.expect(r, sent)()
	}
	if r.ContentLength > MaxBody {
		writeError(w, http.StatusBadRequest, "EntityTooLarge", fmt.Sprintf("Your proposed upload exceeds the maximum allowed size: %d bytes, S3's limit of one PutObject or part", int64(MaxBody)))
		return
	}
	if r.Body == nil || r.Body == http.NoBody {
		s.route(w, r)
		return
	}
	limit, tooLarge := int64(MaxBody), s3Error(http.StatusBadRequest, "EntityTooLarge", fmt.Sprintf("Your proposed upload exceeds the maximum allowed size: %d bytes, S3's limit of one PutObject or part", int64(MaxBody)))
	if !objectData(r) {
		// Every other body is an XML document (CompleteMultipartUpload,
		// DeleteObjects, a bucket's configuration) that gofakes3 reads
		// whole.
		limit, tooLarge = MaxXMLBody, s3Error(http.StatusBadRequest, "MaxMessageLengthExceeded", fmt.Sprintf("Your request was too big: this request's XML body may hold at most %d bytes", int64(MaxXMLBody)))
		if r.ContentLength > limit {
			// A client that did not wait for "100 Continue" is writing
			// the body now: if it is small enough, it is read and thrown
			// away first, or the connection closed under the client's
			// write is reset, and the client sees the reset, not the
			// answer (as bodyErrorWriter does).
			if r.Header.Get("Expect") != "" || r.ContentLength > limit+drainLimit {
				w.Header().Set("Connection", "close")
			} else if n, _ := io.Copy(io.Discard, io.LimitReader(r.Body, r.ContentLength)); n != r.ContentLength {
				w.Header().Set("Connection", "close")
			}
			writeError(w, tooLarge.Status, tooLarge.Code, tooLarge.Message)
			return
		}
	}
	b := &failedBody{ReadCloser: &cappedBody{ReadCloser: r.Body, left: limit, err: tooLarge}, raw: r.Body, length: r.ContentLength, expect: r.Header.Get("Expect") != "", sent: sent}
	r.Body = b
	bw := &bodyErrorWriter{ResponseWriter: w, body: b}
	s.route(bw, r)
	if !bw.wrote { // the server writes its 200 now
		bw.closeUnlessRead()
		sent.answer(w.Header())
	}
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
// failed read (and drops the object for). It also knows whether it was
// read to its end.
type failedBody struct {
	io.ReadCloser
	// raw is the body under the cap, which drainRest reads past it.
	raw    io.Reader
	err    *wire.Error
	length int64 // the request's Content-Length, or -1
	expect bool  // the client waits for "100 Continue" before it sends
	read   int64
	eof    bool
	closed bool
	// sent is the checksum that a PutObject's or part's request sent,
	// which UploadPart keeps (gofakes3 gives it the body, not the
	// request), and a success answers (sentChecksum.answer): every
	// request that sends one has a body (a checked empty one included).
	sent *sentChecksum
}

// Close closes the body; one that bodyErrorWriter may keep the
// connection for (drainable) is read to its end first, up to drainLimit:
// the store closes a body it answers before (gofakes3 does), and the
// answer comes after.
func (b *failedBody) Close() error {
	b.drainRest()
	b.closed = true
	return b.ReadCloser.Close()
}

// drainable reports whether the client is sending the rest of the body,
// and it is small enough to read before the answer: a client that sent no
// "Expect: 100-continue" sends at once, and one that did sends once the
// store has started reading (the server's "100 Continue" goes out then),
// such as a body refused midway for want of disk space.
func (b *failedBody) drainable() bool {
	return !b.eof && !b.closed && (b.length < 0 || b.length-b.read <= drainLimit) && (!b.expect || b.read > 0)
}

// drainRest reads what is left of a drainable body, up to drainLimit
// (a chunked body's rest is not known until it is read), past the cap
// and any error of the reading, and throws it away; eof then says
// whether that was all.
func (b *failedBody) drainRest() {
	if !b.drainable() {
		return
	}
	n, err := io.Copy(io.Discard, io.LimitReader(b.raw, drainLimit+1))
	b.read += n
	if err == nil && n <= drainLimit {
		b.eof = true
	}
}

func (b *failedBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	b.read += int64(n)
	if e := (*wire.Error)(nil); b.err == nil && errors.As(err, &e) {
		b.err = e
	}
	if err == io.EOF {
		b.eof = true
	}
	return n, err
}

// bodyErrorWriter answers a request whose body failed with a *wire.Error
// with that error, in S3's shape, in place of what gofakes3 answers (an
// InternalError). An answer given before the body was read to its end (a
// part of an upload that does not exist) closes the connection: what is
// left of the body on the wire is no next request. (The HTTP server would
// not know: it looks for its own body type in the request, which holds
// failedBody now.)
//
// A small body that a client sent without waiting (no "Expect:
// 100-continue") is read to its end first, and the connection kept: the
// client is still writing it, and a connection closed under it is reset,
// so that the client sees a reset, not the answer (the AWS SDK for Go
// sends a part of 1 MiB so, and retried UploadPart of no upload until it
// failed with "connection reset by peer" instead of NoSuchUpload). So is
// the rest, if small, of a body refused midway, which its client sends
// whether or not it asked for "100 Continue" (a part that the disk has no
// room for: the SDK saw a broken pipe in place of XMinioStorageFull).
type bodyErrorWriter struct {
	http.ResponseWriter
	body     *failedBody
	wrote    bool
	replaced bool
}

// drainLimit is the most of a body that is read, and thrown away, to
// answer before it on a connection kept open: above the size from which
// the SDKs ask "Expect: 100-continue" (2 MB for the Go SDK, 1 MB for
// botocore), below S3's smallest part but the last (5 MiB).
const drainLimit = 4 << 20

// closeUnlessRead marks the connection to be closed after the answer when
// the body was not read to its end (after reading the rest of one that
// drain allows).
func (w *bodyErrorWriter) closeUnlessRead() {
	w.body.drainRest()
	if !w.body.eof {
		w.ResponseWriter.Header().Set("Connection", "close")
	}
}

func (w *bodyErrorWriter) WriteHeader(status int) {
	if w.wrote {
		return
	}
	w.wrote = true
	w.closeUnlessRead()
	if e := w.body.err; e != nil {
		w.replaced = true
		writeError(w.ResponseWriter, e.Status, e.Code, e.Message)
		return
	}
	if status == http.StatusOK {
		w.body.sent.answer(w.ResponseWriter.Header())
	}
	w.ResponseWriter.WriteHeader(status)
}

func (w *bodyErrorWriter) Write(p []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	if w.replaced {
		return len(p), nil
	}
	return w.ResponseWriter.Write(p)
}

// writeError writes an S3 error document.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	var c, m strings.Builder
	xml.EscapeText(&c, []byte(code))
	xml.EscapeText(&m, []byte(msg))
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message></Error>", c.String(), m.String())
}

const tmpDir = "tmp"

// SigningName is S3's service name in a SigV4 credential scope, by which
// the one router sends a request here.
const SigningName = "s3"

// Authorize returns next behind authorization: each request's S3 action
// and resource (Action) are decided by authorize (auth.Authorize, in
// qshare serve), and a refusal is S3's AccessDenied. Without
// authentication authorize allows everything.
func Authorize(next http.Handler, authorize func(r *http.Request, action, resource string) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if bucket, ok := deleteObjects(r); ok {
			// Each key on its own, as S3 does: a policy may allow or
			// deny s3:DeleteObject on a prefix.
			denied, e := authorizeDeletes(r, bucket, authorize)
			if e != nil {
				writeError(w, e.Status, e.Code, e.Message)
				return
			}
			next.ServeHTTP(w, withDenied(r, denied))
			return
		}
		action, resource := Action(r)
		if err := authorize(r, action, resource); err != nil {
			writeError(w, http.StatusForbidden, "AccessDenied", "Access Denied: "+action+" on "+resource)
			return
		}
		if src := r.Header.Get("X-Amz-Copy-Source"); src != "" {
			bucket, key, e := copySource(src)
			if e != nil {
				writeError(w, e.Status, e.Code, e.Message)
				return
			}
			if err := authorize(r, "s3:GetObject", objectARN(bucket+"/"+key)); err != nil {
				writeError(w, http.StatusForbidden, "AccessDenied", "Access Denied: s3:GetObject on the copy source")
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// deleteObjects reports whether r is a DeleteObjects of a bucket, and
// which.
func deleteObjects(r *http.Request) (string, bool) {
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	return bucket, r.Method == http.MethodPost && bucket != "" && key == "" && r.URL.Query().Has("delete")
}

// maxDeleteKeys is the most keys one DeleteObjects may name, as on S3.
const maxDeleteKeys = 1000

// authorizeDeletes authorizes a DeleteObjects of bucket as s3:DeleteObject
// on each key its XML body names, puts the body back for the store, and
// returns the keys that may not be deleted: the store answers each with
// AccessDenied in its list, and deletes the others, as S3 does. A body
// that is not a Delete document, or one of no key or more than
// maxDeleteKeys keys, is refused as S3 refuses it; one over MaxXMLBody
// goes on to the store, which refuses it.
func authorizeDeletes(r *http.Request, bucket string, authorize func(r *http.Request, action, resource string) error) (map[string]bool, *wire.Error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, MaxXMLBody+1))
		var we *wire.Error
		switch {
		case errors.As(err, &we): // authentication's check of the body
			return nil, we
		case err != nil:
			return nil, s3Error(http.StatusBadRequest, "IncompleteBody", "the DeleteObjects body could not be read: "+err.Error())
		case len(b) > MaxXMLBody:
			// The store refuses it, reading what is left to answer
			// before it (ServeHTTP), and deletes nothing.
			r.Body = struct {
				io.Reader
				io.Closer
			}{io.MultiReader(bytes.NewReader(b), r.Body), r.Body}
			return nil, nil
		}
		body = b
	}
	doc, werr := decodeDelete(body)
	if werr != nil {
		return nil, werr
	}
	var denied map[string]bool
	for _, o := range doc.Objects {
		if err := authorize(r, "s3:DeleteObject", objectARN(bucket+"/"+o.Key)); err != nil {
			if denied == nil {
				denied = map[string]bool{}
			}
			denied[o.Key] = true
		}
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return denied, nil
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
			return "s3:PutObject", barn + "/*" // an HTML form's upload, which the store refuses
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

func objectARN(bucketKey string) string { return "arn:aws:s3:::" + bucketKey }

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
