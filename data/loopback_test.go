package data_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3server "qshare/aws/s3"
	"qshare/data"
)

// seen is what a request told the store of its body.
type seen struct {
	method, path, query, sha, trailer string
}

// recorder is the embedded store behind a handler that notes each
// request's payload hash and trailer, and can change one byte of the
// bodies of the first corrupt requests that carry an object's bytes.
type recorder struct {
	h       http.Handler
	corrupt atomic.Int32
	mu      sync.Mutex
	seen    []seen
}

func (rec *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rec.mu.Lock()
	rec.seen = append(rec.seen, seen{r.Method, r.URL.Path, r.URL.RawQuery, r.Header.Get("X-Amz-Content-Sha256"), r.Header.Get("X-Amz-Trailer")})
	rec.mu.Unlock()
	if r.Method == http.MethodPut && r.ContentLength > 1000 && rec.corrupt.Add(-1) >= 0 {
		r.Body = &flipByte{ReadCloser: r.Body, at: 500}
	}
	rec.h.ServeHTTP(w, r)
}

// flipByte changes the byte at offset at of what it reads: past an
// aws-chunked body's first chunk header, inside the object's bytes.
type flipByte struct {
	io.ReadCloser
	at, off int64
}

func (f *flipByte) Read(p []byte) (int, error) {
	n, err := f.ReadCloser.Read(p)
	if i := f.at - f.off; i >= 0 && i < int64(n) {
		p[i] ^= 0xff
	}
	f.off += int64(n)
	return n, err
}

// loopbackStore starts the embedded store behind a recorder on 127.0.0.1,
// and returns a client of it at host ("127.0.0.1" or "localhost"), told
// whether the store checks trailers.
func loopbackStore(t *testing.T, host string, trailer bool) (*recorder, *data.Client) {
	t.Helper()
	srv, err := s3server.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{h: srv}
	ts := httptest.NewServer(rec)
	t.Cleanup(ts.Close)
	url := strings.Replace(ts.URL, "127.0.0.1", host, 1)
	c, err := data.NewClient(context.Background(), data.Endpoint{URL: url, Region: "us-east-1", AccessKeyID: "test", SecretAccessKey: "test", ChecksumTrailer: trailer})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.S3().CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("out")}); err != nil {
		t.Fatal(err)
	}
	return rec, c
}

// modelJob is a job whose model directory holds 20 MiB of random bytes
// (the transfer manager sends it in parts), with a plan that uploads it
// as out/<job>/output/model.tar.gz.
func modelJob(t *testing.T) ([]byte, data.FS, data.Plan) {
	t.Helper()
	_, d, fsys := job(t)
	model := make([]byte, 20<<20)
	rand.Read(model)
	if err := os.WriteFile(filepath.Join(d.Model, "weights.bin"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	return model, fsys, plan(t, `{"TrainingJobName":"j","AlgorithmSpecification":{"TrainingImage":"x","TrainingInputMode":"File"},"RoleArn":"arn:aws:iam::1:role/r","OutputDataConfig":{"S3OutputPath":"s3://out/"},"ResourceConfig":{"InstanceType":"ml.m5.large","InstanceCount":1,"VolumeSizeInGB":1},"StoppingCondition":{"MaxRuntimeInSeconds":60}}`, 0, 1, d)
}

// modelKey is where modelJob's plan puts the model.
const modelKey = jobName + "/output/model.tar.gz"

var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// TestLoopbackUploadSendsCheckedTrailer: to a store that checks trailers
// on a loopback IP address over plain HTTP, an object's bytes (each part
// of the model, the output's PutObject) go as aws-chunked with a CRC32
// trailer, their payload unsigned, as the SDK sends them over HTTPS; every
// other request is signed with its SHA-256. To any other host name (here
// "localhost", the same server), or to a store not known to check
// trailers (a gofakes3 would keep the framing as the object's bytes),
// plain HTTP keeps the signed SHA-256 of every body. All leave the model
// whole.
func TestLoopbackUploadSendsCheckedTrailer(t *testing.T) {
	t.Parallel()
	type want struct {
		host           string
		takes, trailer bool // the store checks trailers; the bodies carry one
	}
	cases := map[string]want{
		"loopback":    {host: "127.0.0.1", takes: true, trailer: true},
		"name":        {host: "localhost", takes: true},
		"other-store": {host: "127.0.0.1"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			rec, c := loopbackStore(t, tc.host, tc.takes)
			model, fsys, p := modelJob(t)
			if err := c.Upload(context.Background(), fsys, p); err != nil {
				t.Fatal(err)
			}
			var bodies, parts int
			for _, s := range rec.seen {
				if s.method == http.MethodPut && strings.HasPrefix(s.path, "/out/") {
					bodies++
					if strings.Contains(s.query, "partNumber=") {
						parts++
					}
					if tc.trailer {
						if s.sha != "STREAMING-UNSIGNED-PAYLOAD-TRAILER" || s.trailer != "x-amz-checksum-crc32" {
							t.Errorf("PUT %s?%s: payload %q, trailer %q; want the unsigned payload with a CRC32 trailer", s.path, s.query, s.sha, s.trailer)
						}
						continue
					}
				}
				if !sha256Hex.MatchString(s.sha) {
					t.Errorf("%s %s?%s: payload %q, want its SHA-256, signed", s.method, s.path, s.query, s.sha)
				}
			}
			if parts < 2 || bodies != parts+1 {
				t.Errorf("%d PUTs with a body, %d of them parts: want the model in parts and the output in one", bodies, parts)
			}
			got := untar(t, newStoreClient(c).get(t, "out", modelKey))
			if !bytes.Equal([]byte(got["weights.bin"]), model) {
				t.Fatalf("model.tar.gz holds %d bytes of weights.bin, not the %d written", len(got["weights.bin"]), len(model))
			}
		})
	}
}

// TestLoopbackTrailerCatchesCorruption: a part whose bytes change on the
// way (one byte, past the chunk's header) is refused by the store, whose
// CRC32 of the body is not the trailer's (BadDigest); the upload fails
// with that reason and leaves no object.
func TestLoopbackTrailerCatchesCorruption(t *testing.T) {
	rec, c := loopbackStore(t, "127.0.0.1", true)
	rec.corrupt.Store(1)
	_, fsys, p := modelJob(t)
	err := c.Upload(context.Background(), fsys, p)
	if err == nil || !strings.Contains(data.Reason(err), "BadDigest") {
		t.Fatalf("upload of a corrupted part: %v, want BadDigest", err)
	}
	_, err = c.S3().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("out"), Key: aws.String(modelKey)})
	if err == nil {
		t.Fatal("model.tar.gz is in the store after a part was refused")
	}
}

// newStoreClient wraps c as a *store, for its get.
func newStoreClient(c *data.Client) *store { return &store{c: c} }
