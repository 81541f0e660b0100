// Package s3test starts qshare's embedded S3 store (package aws/s3) on a
// loopback port for the tests of the executors that move a job's data,
// and fills its buckets. Only tests import it.
package s3test

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	s3server "qshare/aws/s3"
	"qshare/data"
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
	return ep, c.S3()
}

// TarGz reads the gzipped tar at bucket/key (a model.tar.gz) and returns
// its regular files' contents by name; it fails the test if the object is
// missing or is no gzipped tar.
func TarGz(t testing.TB, c *s3.Client, bucket, key string) map[string]string {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatalf("reading s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	zr, err := gzip.NewReader(out.Body)
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
