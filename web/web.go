// Package web is qshare's dashboard: a read-only web page that `qshare
// serve` serves at Path, from files embedded in the binary. It loads nothing
// from the internet. Its script reads what every other client reads: the
// AWS Batch JSON API (POST /v1/<operation>, with Content-Type
// application/json), and qshare's read-only extensions: who lends to whom
// (GET /qshare/v1/lending), the front of a queue with each job's wait reason
// (GET /qshare/v1/queue), a job's log (GET /qshare/v1/logs/{jobId}), and the
// event log's last hour (EventsHandler, at EventsPath).
//
// It sits at the server's edge, beside package api, behind the same request
// guard (package auth): the page is same-origin, so the browser's requests
// carry the server's own Origin or Sec-Fetch-Site: same-origin, which the
// guard lets through; a page of another origin is refused. With
// authentication (qshare serve --auth), the page's own files are served
// unsigned, and the page signs each request for data with an access key the
// user gives it (SigV4, computed in the browser), so the server decides
// every one by that principal's policies; WhoAmIHandler tells the page whose
// key it holds. docs/dashboard.md says what each view shows, and
// docs/security.md what is checked.
package web

import (
	"embed"
	"encoding/json"
	"io/fs"
	"net/http"
	"strings"
)

// Path is where the server mounts Handler.
const Path = "/ui/"

//go:embed static
var static embed.FS

// Config is what the page must know of the server before its first
// request, served as ConfigPath: whether requests must be signed, and for
// which region.
type Config struct {
	// Auth is true when the server authenticates every request (qshare
	// serve --auth): the page then asks for an access key of the auth file
	// and signs each of its requests with it (AWS Signature Version 4,
	// computed in the browser), so that it shows what that principal may
	// read.
	Auth bool `json:"auth"`
	// Region is the region requests are signed for (qshare serve
	// --region).
	Region string `json:"region"`
}

// ConfigPath is where Handler serves the Config, as JSON.
const ConfigPath = Path + "config.json"

// Handler serves the dashboard's files at Path: index.html at Path itself,
// its script and style sheet beside it, and cfg at ConfigPath. They hold no
// data of the server's, so a server with authentication serves them
// unsigned (auth.AuthConfig.PublicPrefixes); the page then signs its
// requests for data. Only GET and HEAD are allowed. Every answer carries a
// Content-Security-Policy that lets the page load and call only its own
// origin.
func Handler(cfg Config) http.Handler {
	sub, err := fs.Sub(static, "static")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	files := http.StripPrefix(strings.TrimSuffix(Path, "/"), http.FileServer(http.FS(sub)))
	conf, err := json.Marshal(cfg)
	if err != nil {
		panic(err) // a bool and a string
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "the dashboard is read-only: use GET", http.StatusMethodNotAllowed)
			return
		}
		h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("Cache-Control", "no-cache")
		if r.URL.Path == ConfigPath {
			h.Set("Content-Type", "application/json")
			w.Write(conf)
			return
		}
		files.ServeHTTP(w, r)
	})
}
