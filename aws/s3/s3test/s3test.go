// Package s3test starts qshare's embedded S3 store (package aws/s3) on a
// loopback port, or a third-party S3 server (versitygw, SeaweedFS), for
// the tests of the executors that move a job's data, and fills its
// buckets. Only tests import it.
package s3test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3server "qshare/aws/s3"
	"qshare/data"
	"qshare/internal/seaweedfs"
	"qshare/internal/toolcache"
	"qshare/internal/versitygw"
)

// Start serves an embedded store, kept in a temporary directory, until
// the test ends; it holds the buckets of objs (bucket → key → content).
// It returns the endpoint that executors and the data wrapper use (static
// credentials, which the store does not check) and an SDK client of it.
func Start(t testing.TB, objs map[string]map[string]string) (data.Endpoint, *s3.Client) {
	return StartWith(t, objs, nil)
}

// StartWith is Start with the store's handler wrapped by wrap (a test's
// delay or fault), when wrap is not nil.
func StartWith(t testing.TB, objs map[string]map[string]string, wrap func(http.Handler) http.Handler) (data.Endpoint, *s3.Client) {
	t.Helper()
	srv, err := s3server.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var h http.Handler = srv
	if wrap != nil {
		h = wrap(h)
	}
	ts := httptest.NewServer(h)
	t.Cleanup(ts.Close)
	ep := data.Endpoint{URL: ts.URL, Region: "us-east-1", AccessKeyID: "qshare", SecretAccessKey: "qshare"}
	return ep, Fill(t, ep, objs)
}

// Versitygw starts versitygw (package internal/versitygw), an S3 server
// that no one here wrote and that checks every signature, until the test
// ends, holding the buckets of objs; it skips the test, with a message,
// where the binary is absent.
func Versitygw(t testing.TB, objs map[string]map[string]string) (data.Endpoint, *s3.Client) {
	t.Helper()
	return thirdParty(t, "versitygw", versitygw.Available, versitygw.Start, objs)
}

// SeaweedFS starts SeaweedFS's S3 gateway (package internal/seaweedfs),
// another S3 server that no one here wrote and that checks every
// signature, until the test ends, holding the buckets of objs; it skips
// the test, with a message, where the binary is absent.
func SeaweedFS(t testing.TB, objs map[string]map[string]string) (data.Endpoint, *s3.Client) {
	t.Helper()
	return thirdParty(t, "SeaweedFS", seaweedfs.Available, seaweedfs.Start, objs)
}

// thirdParty starts a third-party server (name, in messages) in a
// temporary directory, skipping the test where available says its binary
// is absent, and stops it when the test ends, logging what it printed if
// the test failed; it fills its buckets with objs.
func thirdParty(t testing.TB, name string, available func() error, start func(context.Context, string) (*toolcache.S3Server, error), objs map[string]map[string]string) (data.Endpoint, *s3.Client) {
	t.Helper()
	if err := available(); err != nil {
		t.Skip(err)
	}
	srv, err := start(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			t.Logf("%s's log:\n%s", name, srv.Log())
		}
	})
	ep := data.Endpoint{URL: srv.URL, Region: "us-east-1", AccessKeyID: srv.AccessKey, SecretAccessKey: srv.SecretKey}
	return ep, Fill(t, ep, objs)
}

// Fill creates the buckets of objs (bucket → key → content) in the store
// at ep, puts their objects, and returns an SDK client of the store.
func Fill(t testing.TB, ep data.Endpoint, objs map[string]map[string]string) *s3.Client {
	t.Helper()
	c, err := data.NewClient(context.Background(), ep)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for b, keys := range objs {
		if _, err := c.S3().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
		for k, v := range keys {
			if _, err := c.S3().PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(b), Key: aws.String(k), Body: strings.NewReader(v)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	return c.S3()
}

// Read returns the bytes of the object at bucket/key, as c reads them; it
// fails the test if they cannot be read to the end.
func Read(t testing.TB, c *s3.Client, bucket, key string) []byte {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err == nil {
		defer out.Body.Close()
		var b []byte
		if b, err = io.ReadAll(out.Body); err == nil {
			return b
		}
	}
	t.Fatalf("reading s3://%s/%s: %v", bucket, key, err)
	return nil
}

// TarGz reads the gzipped tar at bucket/key (a model.tar.gz) and returns
// its regular files' contents by name; it fails the test if the object is
// missing or is no gzipped tar.
func TarGz(t testing.TB, c *s3.Client, bucket, key string) map[string]string {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(Read(t, c, bucket, key)))
	if err != nil {
		t.Fatalf("s3://%s/%s is not gzipped: %v", bucket, key, err)
	}
	files := map[string]string{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files
		}
		if err != nil {
			t.Fatalf("s3://%s/%s is not a tar: %v", bucket, key, err)
		}
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = string(b)
		}
	}
}

// Corrupt changes one byte of the file of bucket/key in the embedded
// store kept in dir: the byte at offset at, or the middle one where at is
// negative. The file keeps its size and its time, as a disk's fault
// does: a file of another time the store takes for an object written
// anew, and hashes again.
func Corrupt(t testing.TB, dir, bucket, key string, at int64) {
	t.Helper()
	name := filepath.Join(dir, "buckets", bucket, filepath.FromSlash(key))
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	if at < 0 {
		at = st.Size() / 2
	}
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := []byte{0}
	if _, err = f.ReadAt(b, at); err == nil {
		b[0] ^= 0xff
		_, err = f.WriteAt(b, at)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chtimes(name, st.ModTime(), st.ModTime())
	}
	if err != nil {
		t.Fatal(err)
	}
}
