package server

import (
	"context"
	"encoding/xml"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"

	"qshare/auth"
	s3server "qshare/aws/s3"
	"qshare/data"
)

// routeS3 registers the embedded S3 store (package aws/s3), kept in the
// data directory's s3/, on the API's own address: a request signed for
// s3 goes to it, whatever its path. With --auth its requests are verified
// like every other, and each is authorized as its S3 action on its bucket
// or object (s3:GetObject on arn:aws:s3:::bucket/key). The store is made
// once and serves every term: it keeps nothing in the store.
// A store that cannot open its directory answers every request with
// S3's InternalError, saying why, and the server goes on. Until ctx ends,
// the store aborts the multipart uploads that no part has come to for
// --s3-abort-idle-uploads.
func (sv *server) routeS3(ctx context.Context, r *Router) {
	var h http.Handler
	store, err := s3server.New(filepath.Join(sv.s.DataDir, "s3"))
	if err != nil {
		sv.log.Error("the embedded S3 store cannot open its directory", "err", err)
		h = s3server.Unavailable("the embedded S3 store cannot open its directory in the server's data directory (see the server's log)")
	} else {
		store.SetLog(sv.log)
		h = s3server.Authorize(store, func(req *http.Request, action, resource string) error {
			return auth.Authorize(req.Context(), action, resource)
		})
		// An object moves as long as its bytes keep coming: the server's
		// whole-request timeouts (leader.go) become idle ones here.
		h = s3server.IdleDeadlines(h, readTimeout, writeTimeout)
		h = logServerErrors(h, sv.log)
		if idle, _ := parseAge("", sv.s.S3AbortIdleUploads, ""); idle > 0 { // checked at start
			go store.SweepIdleUploads(idle, ctx.Done(), func(n int) {
				sv.log.Info("aborted multipart uploads of the embedded S3 store that no part came to", "uploads", n, "idle", idle)
			})
		}
	}
	r.Handle(Route{Name: "s3", Match: Match{Service: s3server.SigningName}, BodyTypes: []string{"*"}, RawPath: true, WriteError: restXMLError, Handler: h})
}

// logServerErrors logs each answer of h whose status is 5xx but 501 (a
// request for what the store does not do), with the S3 error's code and
// message: the store's own failures (a disk that
// refuses a write) are answered without the data directory's paths, and
// are otherwise in no log.
func logServerErrors(h http.Handler, log *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h.ServeHTTP(sw, r)
		if sw.status < 500 || sw.status == http.StatusNotImplemented { // a request the store does not serve
			return
		}
		var doc struct{ Code, Message string }
		_ = xml.Unmarshal(sw.doc, &doc) // what could be read of it
		log.Error("the embedded S3 store answered with a server error", "method", r.Method, "path", r.URL.EscapedPath(),
			"status", sw.status, "code", doc.Code, "message", doc.Message)
	})
}

// statusWriter keeps the status of an answer and, for a 5xx, the start of
// its error document.
type statusWriter struct {
	http.ResponseWriter
	status int
	doc    []byte
}

// maxLoggedDoc bounds what statusWriter keeps of an error document.
const maxLoggedDoc = 4 << 10

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
	if w.status >= 500 && len(w.doc) < maxLoggedDoc {
		w.doc = append(w.doc, p[:min(len(p), maxLoggedDoc-len(w.doc))]...)
	}
	return w.ResponseWriter.Write(p)
}

// Unwrap lets http.ResponseController reach the server's own writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// jobKeysFile is the file in the data directory's state/ that holds the
// secret the job keys are derived from (auth.JobKeys): without --auth,
// the process executor gives each attempt a key of its own, which the
// guard takes from another local user (a job run with --run-as) for the
// embedded store only, while the attempt runs.
const jobKeysFile = "s3-job-keys"

// EmbeddedS3Credentials are the static credentials that executors sign
// with for the embedded store when the server runs without --auth (which
// then checks no signature).
const EmbeddedS3Credentials = "qshare"

// ExecutorS3 is where an executor of the server with settings s finds S3
// (see s3Endpoint).
func ExecutorS3(s Settings) data.Endpoint { return s3Endpoint(s) }

// s3Endpoint is where executors find S3: --s3-endpoint, with the SDK's
// credential chain; else the embedded store on the API's address (the
// loopback address when the API listens on every address), with static
// credentials when there is no --auth and the SDK's chain, as each job's
// user sees it, with it.
func s3Endpoint(s Settings) data.Endpoint {
	if s.S3Endpoint != "" {
		return data.Endpoint{URL: s.S3Endpoint, Region: s.Region}
	}
	addr := s.Addr
	if s.listenAddr != "" {
		addr = s.listenAddr
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		host, port = "127.0.0.1", addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
	}
	scheme := "http"
	if s.Guard.TLSCert != "" {
		scheme = "https"
	}
	ep := data.Endpoint{URL: scheme + "://" + net.JoinHostPort(host, port), Region: s.Region, ChecksumTrailer: true}
	if s.Guard.Auth == "" {
		ep.AccessKeyID, ep.SecretAccessKey = EmbeddedS3Credentials, EmbeddedS3Credentials
	}
	return ep
}
