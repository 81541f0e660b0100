package data_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	s3server "qshare/aws/s3"
	"qshare/data"
)

// cutter serves the embedded store, and cuts the connection of a GET of
// an object once it has sent 1 MiB of the body: the first cuts such GETs,
// then the store is up again; or, with gone, the first, after which the
// store is away: every request's connection is closed unanswered.
type cutter struct {
	h    http.Handler
	gone bool
	cuts atomic.Int32 // GETs still to cut (without gone)
	down atomic.Bool
	cut  atomic.Int32 // requests cut
}

func (c *cutter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if c.down.Load() {
		c.cut.Add(1)
		hang(w)
		return
	}
	_, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if r.Method != http.MethodGet || key == "" {
		c.h.ServeHTTP(w, r)
		return
	}
	c.h.ServeHTTP(&cutWriter{ResponseWriter: w, left: 1 << 20, cut: func() bool {
		if !c.gone && c.cuts.Add(-1) < 0 {
			return false
		}
		c.cut.Add(1)
		c.down.Store(c.gone)
		return true
	}}, r)
}

// hang closes the client's connection without an answer.
func hang(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler)
}

// cutWriter passes left bytes of a body on; then, where cut says so, it
// closes the connection in the middle of the body.
type cutWriter struct {
	http.ResponseWriter
	left int
	cut  func() bool
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if w.left < 0 || len(p) <= w.left {
		w.left -= len(p)
		return w.ResponseWriter.Write(p)
	}
	if !w.cut() {
		w.left = -1
		return w.ResponseWriter.Write(p)
	}
	w.ResponseWriter.Write(p[:w.left])
	w.ResponseWriter.(http.Flusher).Flush()
	panic(http.ErrAbortHandler) // the server closes the connection mid-body
}

// TestStageStoreDownDuringDownload: the store goes away in the middle of
// an object's body. Cut once, the SDK reads the part again and the
// staging succeeds with every byte; gone for good, the staging fails
// with the store's reason (InternalServerError, not the job's fault),
// after the SDK's tries, in well under its bound.
func TestStageStoreDownDuringDownload(t *testing.T) {
	t.Parallel()
	big := make([]byte, 4<<20)
	rand.Read(big)
	for _, tc := range []struct {
		what string
		gone bool
	}{{"cut once", false}, {"gone", true}} {
		t.Run(tc.what, func(t *testing.T) {
			srv, err := s3server.New(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			c := &cutter{h: srv, gone: tc.gone}
			s := serve(t, c)
			s.put(t, "bkt", map[string]string{"p/small": "x", "p/big.bin": string(big)})
			c.cuts.Store(1)
			_, d, fsys := job(t)
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err = s.c.Stage(ctx, fsys, plan(t, channelPayload("s3://bkt/p/", "S3Prefix", ""), 0, 1, d), nil)
			if c.cut.Load() == 0 {
				t.Fatal("no GET was cut: the test tests nothing")
			}
			if !tc.gone {
				if err != nil {
					t.Fatalf("staging with a body cut once: %v, want the SDK to read it again", err)
				}
				got, err := os.ReadFile(filepath.Join(d.Channel("train"), "big.bin"))
				if err != nil || !bytes.Equal(got, big) {
					t.Fatalf("the object staged after a cut differs from what was put (%v)", err)
				}
				return
			}
			var de *data.Error
			if !asError(err, &de) || de.Client || !strings.HasPrefix(de.Reason, "InternalServerError: Data download failed: ") || ctx.Err() != nil {
				t.Fatalf("a store gone in the middle of a body gave %v (context: %v), want the store's failure", err, ctx.Err())
			}
			t.Logf("reason: %s (%d requests cut)", de.Reason, c.cut.Load())
		})
	}
}
