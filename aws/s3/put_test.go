package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// get returns bucket/key's body and its ETag, as GetObject gives them.
func get(t *testing.T, c *sdk.Client, bucket, key string) ([]byte, string) {
	t.Helper()
	out, err := c.GetObject(context.Background(), &sdk.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b, aws.ToString(out.ETag)
}

// apiError returns err's S3 error code and HTTP status, or fails t.
func apiError(t *testing.T, err error) (string, int) {
	t.Helper()
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	if !errors.As(err, &ae) || !errors.As(err, &re) {
		t.Fatalf("got %v, want an S3 error", err)
	}
	return ae.ErrorCode(), re.HTTPStatusCode()
}

// TestPutObjectRefusals: a PutObject whose body is not its Content-MD5,
// or whose If-None-Match does not hold, is refused with S3's error, and
// the object stays as it was, with nothing left in tmp/; one whose
// Content-MD5 holds is stored with that MD5 as its ETag, as HeadObject,
// GetObject and a restart give it.
func TestPutObjectRefusals(t *testing.T) {
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	ctx := context.Background()
	put := func(body string, in sdk.PutObjectInput) error {
		in.Bucket, in.Key, in.Body = aws.String("bkt"), aws.String("k"), strings.NewReader(body)
		_, err := c.PutObject(ctx, &in, func(o *sdk.Options) { o.RetryMaxAttempts = 1 })
		return err
	}
	sum := md5.Sum([]byte("old"))
	if err := put("old", sdk.PutObjectInput{ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:]))}); err != nil {
		t.Fatal(err)
	}
	err := put("new", sdk.PutObjectInput{ContentMD5: aws.String(base64.StdEncoding.EncodeToString(sum[:]))})
	if code, status := apiError(t, err); code != "BadDigest" || status != 400 {
		t.Errorf("a body that is not its Content-MD5: %s (%d), want BadDigest (400)", code, status)
	}
	err = put("new", sdk.PutObjectInput{IfNoneMatch: aws.String("*")})
	if code, status := apiError(t, err); code != "PreconditionFailed" || status != 412 {
		t.Errorf("If-None-Match * on an object that exists: %s (%d), want PreconditionFailed (412)", code, status)
	}
	err = put("new", sdk.PutObjectInput{IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
	if code, _ := apiError(t, err); code != "PreconditionFailed" {
		t.Errorf("If-Match of another ETag: %s, want PreconditionFailed", code)
	}
	for _, restart := range []bool{false, true} {
		if restart {
			ts.Close()
			ts, c = start(t, dir)
		}
		if b, etag := get(t, c, "bkt", "k"); string(b) != "old" || etag != fmt.Sprintf(`"%x"`, sum) {
			t.Errorf("restart %v: the object holds %q, ETag %s; want the old object, ETag %x", restart, b, etag, sum)
		}
	}
	if err := put("new", sdk.PutObjectInput{IfMatch: aws.String(fmt.Sprintf(`"%x"`, sum))}); err != nil {
		t.Errorf("If-Match of the object's ETag: %v", err)
	}
	if b, _ := get(t, c, "bkt", "k"); string(b) != "new" {
		t.Errorf("after a PutObject whose If-Match holds the object holds %q", b)
	}
	ts.Close()
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files", n)
	}
}

// TestPutObjectDiskFailure: a PutObject that the store cannot write is
// S3's InternalError, which names the cause and not the server's path,
// and stores nothing.
func TestPutObjectDiskFailure(t *testing.T) {
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	defer ts.Close()
	// A file where tmp/ was: the body has nowhere to go (the tests run as
	// root, for whom a read-only directory is no obstacle).
	tmp := filepath.Join(dir, "tmp")
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutObject(context.Background(), &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("body")},
		func(o *sdk.Options) { o.RetryMaxAttempts = 1 })
	code, status := apiError(t, err)
	var ae smithy.APIError
	errors.As(err, &ae)
	if code != "InternalError" || status != 500 || strings.Contains(ae.ErrorMessage(), dir) || !strings.Contains(ae.ErrorMessage(), "not a directory") {
		t.Errorf("PutObject with no room: %s (%d) %q; want InternalError (500) naming the cause, not the path", code, status, ae.ErrorMessage())
	}
	if _, err := c.HeadObject(context.Background(), &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")}); err == nil {
		t.Error("the object is there")
	}
}

// TestConcurrentPuts: PutObjects that come at once, to keys of their own
// and to one key, with readers of that key meanwhile, leave every object
// whole; the readers always find an object whose ETag is its body's MD5
// (its data and metadata from the same PutObject); and tmp/ is empty.
func TestConcurrentPuts(t *testing.T) {
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	defer ts.Close()
	ctx := context.Background()
	mustPut(t, c, "shared", "first")
	body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i)}, 100_000+i*1000) }
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, 4*n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, key := range []string{fmt.Sprintf("own/%d", i), "shared"} {
				if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: bytes.NewReader(body(i))}); err != nil {
					errs <- err
				}
			}
		}()
	}
	done := make(chan struct{})
	read := make(chan int)
	go func() {
		reads := 0
		defer func() { read <- reads }()
		for {
			select {
			case <-done:
				return
			default:
			}
			out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("shared")})
			if err != nil {
				errs <- err
				return
			}
			b, err := io.ReadAll(out.Body)
			out.Body.Close()
			if err != nil {
				errs <- err
				return
			}
			if etag := fmt.Sprintf(`"%x"`, md5.Sum(b)); etag != aws.ToString(out.ETag) || int64(len(b)) != aws.ToInt64(out.ContentLength) {
				errs <- fmt.Errorf("a read amid PutObjects got %d bytes, ETag %s, length %d: not one object", len(b), aws.ToString(out.ETag), aws.ToInt64(out.ContentLength))
				return
			}
			reads++
		}
	}()
	wg.Wait()
	close(done)
	t.Logf("%d reads of the shared key amid the PutObjects", <-read)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range n {
		if b, etag := get(t, c, "bkt", fmt.Sprintf("own/%d", i)); !bytes.Equal(b, body(i)) || etag != fmt.Sprintf(`"%x"`, md5.Sum(body(i))) {
			t.Errorf("own/%d holds %d bytes, ETag %s", i, len(b), etag)
		}
	}
	b, etag := get(t, c, "bkt", "shared")
	if etag != fmt.Sprintf(`"%x"`, md5.Sum(b)) || len(b) < 100_000 || !bytes.Equal(b, bytes.Repeat(b[:1], len(b))) {
		t.Errorf("the shared key holds %d bytes, ETag %s: not one of the bodies", len(b), etag)
	}
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files", n)
	}
}

// TestMultipartETagAfterwards: the ETag "<hash>-N" of a completed
// multipart upload's object is its own: If-Match takes it, as S3 does; a
// PutObject over the object, a copy of it, and a client that sends the
// header the store keeps N in, each give an object whose ETag is its
// body's MD5.
func TestMultipartETagAfterwards(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	multipart := func(key string) string {
		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		parts := uploadParts(t, c, "bkt", key, mp.UploadId, bytes.Repeat([]byte("1"), 5<<20), []byte("2"))
		out, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		if err != nil {
			t.Fatal(err)
		}
		return aws.ToString(out.ETag)
	}
	etag := multipart("m")
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/m")}); err != nil {
		t.Fatal(err)
	}
	if b, got := get(t, c, "bkt", "copy"); got != fmt.Sprintf(`"%x"`, md5.Sum(b)) {
		t.Errorf("a copy of a multipart upload's object has ETag %s, want its MD5", got)
	}
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m"), Body: strings.NewReader("new"), IfMatch: aws.String(etag)}); err != nil {
		t.Fatalf("PutObject with If-Match %s, the object's ETag: %v", etag, err)
	}
	if b, got := get(t, c, "bkt", "m"); string(b) != "new" || got != fmt.Sprintf(`"%x"`, md5.Sum(b)) {
		t.Errorf("a PutObject over a multipart upload's object: %q, ETag %s", b, got)
	}
	_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("p"), Body: strings.NewReader("p")},
		func(o *sdk.Options) {
			o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Amz-Mp-Parts-Count", "7"))
		})
	if err != nil {
		t.Fatal(err)
	}
	if _, got := get(t, c, "bkt", "p"); got != fmt.Sprintf(`"%x"`, md5.Sum([]byte("p"))) {
		t.Errorf("a PutObject that sent x-amz-mp-parts-count has ETag %s", got)
	}
}
