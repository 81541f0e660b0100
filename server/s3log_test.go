package server

import (
	"bytes"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	s3server "qshare/aws/s3"
)

// TestS3ServerErrorsLogged: an answer of the embedded store with a 5xx
// (here a PutObject that its disk refuses: tmp/ made a file under it) is
// in the server's log with its code and message, which the client gets
// without the data directory's paths; other answers are not.
func TestS3ServerErrorsLogged(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "s3")
	store, err := s3server.New(dir)
	serveMust(t, err)
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	store.SetLog(log)
	ts := httptest.NewServer(logServerErrors(store, log))
	defer ts.Close()
	do := func(method, path, body string) int {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := do(http.MethodPut, "/bkt", ""); st != http.StatusOK {
		t.Fatalf("CreateBucket: %d", st)
	}
	if st := do(http.MethodGet, "/bkt/missing", ""); st != http.StatusNotFound {
		t.Fatalf("GET of a missing key: %d", st)
	}
	if st := do(http.MethodPut, "/bkt?tagging", "<Tagging/>"); st != http.StatusNotImplemented {
		t.Fatalf("PutBucketTagging: %d, want 501", st)
	}
	if buf.Len() != 0 {
		t.Fatalf("a 404 or a 501 was logged: %s", buf.String())
	}
	if err := os.RemoveAll(filepath.Join(dir, "tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tmp"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if st := do(http.MethodPut, "/bkt/k", "body"); st != http.StatusInternalServerError {
		t.Fatalf("PutObject with tmp/ a file: %d, want 500", st)
	}
	line := buf.String()
	for _, want := range []string{"level=ERROR", "method=PUT", "path=/bkt/k", "status=500", "code=InternalError", "not a directory"} {
		if !strings.Contains(line, want) {
			t.Errorf("the log line lacks %q: %s", want, line)
		}
	}
	// A failure that gofakes3 answers itself, "Internal Error" and no
	// more: its cause is logged by the store (SetLog).
	buf.Reset()
	serveMust(t, os.RemoveAll(filepath.Join(dir, "buckets")))
	serveMust(t, os.WriteFile(filepath.Join(dir, "buckets"), nil, 0o600))
	if st := do(http.MethodGet, "/", ""); st != http.StatusInternalServerError {
		t.Fatalf("ListBuckets with buckets/ a file: %d, want 500", st)
	}
	for _, want := range []string{`msg="the embedded S3 store failed"`, "not a directory", "path=/ status=500"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("the log lacks %q: %s", want, buf.String())
		}
	}
}
