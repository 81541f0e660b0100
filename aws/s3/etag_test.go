package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// twoObjects stores, in bucket bkt, dir+"m" by a multipart upload of two
// parts and dir+"s" by a PutObject, and returns their ETags by key, as
// CompleteMultipartUpload and PutObject give them.
func twoObjects(t *testing.T, c *sdk.Client, dir string) map[string]string {
	t.Helper()
	etags := map[string]string{dir + "m": putMultipart(t, c, "bkt", dir+"m", bytes.Repeat([]byte("m"), 5<<20+1))}
	out, err := c.PutObject(context.Background(), &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(dir + "s"), Body: strings.NewReader("s")})
	if err != nil {
		t.Fatal(err)
	}
	etags[dir+"s"] = aws.ToString(out.ETag)
	return etags
}

// putMultipart stores body as bucket/key by a multipart upload of two
// parts, the first of S3's 5 MiB minimum, and returns its ETag as
// CompleteMultipartUpload gives it.
func putMultipart(t *testing.T, c *sdk.Client, bucket, key string, body []byte) string {
	t.Helper()
	ctx := context.Background()
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		t.Fatal(err)
	}
	parts := uploadParts(t, c, bucket, key, mp.UploadId, body[:5<<20], body[5<<20:])
	out, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		t.Fatal(err)
	}
	return aws.ToString(out.ETag)
}

// TestListedETags: ListObjectsV2 and ListObjects list each object's ETag
// as HeadObject gives it: a completed multipart upload's with S3's "-N",
// a PutObject's its MD5.
func TestListedETags(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	want := twoObjects(t, c, "dir/")
	if !strings.HasSuffix(want["dir/m"], `-2"`) || want["dir/s"] != fmt.Sprintf(`"%x"`, md5.Sum([]byte("s"))) {
		t.Fatalf("the objects' ETags are %v: no -2, or not the MD5", want)
	}
	for key, etag := range want {
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil || aws.ToString(h.ETag) != etag {
			t.Fatalf("HeadObject %s: ETag %s (%v), want %s", key, aws.ToString(h.ETag), err, etag)
		}
	}
	// A prefix that ends at a directory, one that does not (the
	// backend's two ways of listing), and none.
	for _, prefix := range []string{"dir/", "di", ""} {
		v2, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		v1, err := c.ListObjects(ctx, &sdk.ListObjectsInput{Bucket: aws.String("bkt"), Prefix: aws.String(prefix)})
		if err != nil {
			t.Fatal(err)
		}
		for name, contents := range map[string][]types.Object{"ListObjectsV2": v2.Contents, "ListObjects": v1.Contents} {
			if len(contents) != len(want) {
				t.Errorf("%s of %q listed %d objects, want %d", name, prefix, len(contents), len(want))
			}
			for _, o := range contents {
				if got := aws.ToString(o.ETag); got != want[aws.ToString(o.Key)] {
					t.Errorf("%s of %q lists %s with ETag %s, want %s", name, prefix, aws.ToString(o.Key), got, want[aws.ToString(o.Key)])
				}
			}
		}
	}
}

// status is the HTTP status of an SDK call's answer: 200 for no error.
func status(t *testing.T, err error) int {
	t.Helper()
	if err == nil {
		return http.StatusOK
	}
	var re *smithyhttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("got %v, want an answer", err)
	}
	return re.HTTPStatusCode()
}

// TestConditionalReads: a GetObject's or HeadObject's If-Match,
// If-None-Match, If-Modified-Since and If-Unmodified-Since are evaluated
// as S3 evaluates them, against the ETag that HeadObject gives (with its
// "-N" for a completed multipart upload's object): If-None-Match of the
// ETag is 304 Not Modified, If-Match of another is 412
// PreconditionFailed, and each ETag condition decides alone where it is
// given with its date's (RFC 9110's order, which S3 documents); a 304
// still gives the ETag.
func TestConditionalReads(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	etags := twoObjects(t, c, "")
	other := `"0123456789abcdef0123456789abcdef"`
	type cond struct {
		ifMatch, ifNoneMatch               string
		ifModifiedSince, ifUnmodifiedSince time.Time
	}
	type readCase struct {
		name string
		c    cond
		want int
	}
	for key, etag := range etags {
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil || h.LastModified == nil {
			t.Fatalf("HeadObject %s: %v, Last-Modified %v", key, err, h.LastModified)
		}
		// Since the object's Last-Modified, or an hour before it.
		at, past := *h.LastModified, h.LastModified.Add(-time.Hour)
		cases := []readCase{
			{"If-None-Match of its ETag", cond{ifNoneMatch: etag}, 304},
			{"If-None-Match of its ETag unquoted", cond{ifNoneMatch: strings.Trim(etag, `"`)}, 304},
			{"If-None-Match of a list with its ETag", cond{ifNoneMatch: other + ", " + etag}, 304},
			{"If-None-Match *", cond{ifNoneMatch: "*"}, 304},
			{"If-None-Match of another ETag", cond{ifNoneMatch: other}, 200},
			{"If-Match of its ETag", cond{ifMatch: etag}, 200},
			{"If-Match *", cond{ifMatch: "*"}, 200},
			{"If-Match of another ETag", cond{ifMatch: other}, 412},
			{"If-Modified-Since its Last-Modified", cond{ifModifiedSince: at}, 304},
			{"If-Modified-Since the past", cond{ifModifiedSince: past}, 200},
			{"If-Unmodified-Since the past", cond{ifUnmodifiedSince: past}, 412},
			{"If-Unmodified-Since its Last-Modified", cond{ifUnmodifiedSince: at}, 200},
			{"If-Match of its ETag, If-Unmodified-Since the past", cond{ifMatch: etag, ifUnmodifiedSince: past}, 200},
			{"If-None-Match of another ETag, If-Modified-Since its Last-Modified", cond{ifNoneMatch: other, ifModifiedSince: at}, 200},
			{"If-Match of another ETag, If-None-Match of its own", cond{ifMatch: other, ifNoneMatch: etag}, 412},
		}
		if strings.Contains(etag, "-") {
			cases = append(cases, readCase{"If-Match of the hash without -N", cond{ifMatch: etag[:strings.Index(etag, "-")] + `"`}, 412})
		}
		opt := func(s string) *string {
			if s == "" {
				return nil
			}
			return aws.String(s)
		}
		when := func(at time.Time) *time.Time {
			if at.IsZero() {
				return nil
			}
			return &at
		}
		for _, tc := range cases {
			in := &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), IfMatch: opt(tc.c.ifMatch), IfNoneMatch: opt(tc.c.ifNoneMatch),
				IfModifiedSince: when(tc.c.ifModifiedSince), IfUnmodifiedSince: when(tc.c.ifUnmodifiedSince)}
			out, err := c.GetObject(ctx, in)
			if got := status(t, err); got != tc.want {
				t.Errorf("%s: GetObject %s: %d, want %d", key, tc.name, got, tc.want)
			}
			if err == nil {
				out.Body.Close()
				if aws.ToString(out.ETag) != etag {
					t.Errorf("%s: GetObject %s: ETag %s, want %s", key, tc.name, aws.ToString(out.ETag), etag)
				}
			}
			var re *smithyhttp.ResponseError
			if errors.As(err, &re) && re.HTTPStatusCode() == 304 && re.Response.Header.Get("ETag") != etag {
				t.Errorf("%s: GetObject %s: 304 with ETag %s, want %s", key, tc.name, re.Response.Header.Get("ETag"), etag)
			}
			var ae smithy.APIError
			if tc.want == 412 && (!errors.As(err, &ae) || ae.ErrorCode() != "PreconditionFailed") {
				t.Errorf("%s: GetObject %s: %v, want PreconditionFailed", key, tc.name, err)
			}
			h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: in.Bucket, Key: in.Key, IfMatch: in.IfMatch, IfNoneMatch: in.IfNoneMatch,
				IfModifiedSince: in.IfModifiedSince, IfUnmodifiedSince: in.IfUnmodifiedSince})
			if got := status(t, err); got != tc.want {
				t.Errorf("%s: HeadObject %s: %d, want %d", key, tc.name, got, tc.want)
			}
			if err == nil && (aws.ToString(h.ETag) != etag || aws.ToInt64(h.ContentLength) == 0) {
				t.Errorf("%s: HeadObject %s: ETag %s, length %d", key, tc.name, aws.ToString(h.ETag), aws.ToInt64(h.ContentLength))
			}
		}
	}
	// A condition of no object is the answer of no object.
	_, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("none"), IfMatch: aws.String(other)})
	if code, st := apiError(t, err); code != "NoSuchKey" || st != 404 {
		t.Errorf("GetObject of no object with If-Match: %s (%d), want NoSuchKey (404)", code, st)
	}
	// A ranged GET whose condition holds is the range.
	out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m"), IfMatch: aws.String(etags["m"]), Range: aws.String("bytes=0-2")})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	if aws.ToInt64(out.ContentLength) != 3 {
		t.Errorf("a ranged GET with If-Match that holds gave %d bytes, want 3", aws.ToInt64(out.ContentLength))
	}
}
