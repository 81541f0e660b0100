package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// apiCode is the S3 error code of err, or "" for none.
func apiCode(err error) string {
	var api smithy.APIError
	if errors.As(err, &api) {
		return api.ErrorCode()
	}
	return ""
}

// partSize is S3's smallest part but the last.
const partSize = 5 << 20

// TestUploadPartCopy: a multipart upload whose parts are ranges of an
// object already in the store (UploadPartCopy, as the AWS CLI and
// boto3 copy any object over 8 MiB) makes the same object, each part
// answered with its ETag and checksum as S3 answers them; a source, a
// range, a condition or an upload that is not one is refused with S3's
// error, and no part is kept for it.
func TestUploadPartCopy(t *testing.T) {
	t.Parallel()
	ts, c := startWith(t, t.TempDir(), "src", "dst")
	defer ts.Close()
	ctx := context.Background()

	// The source is itself a multipart object ("-3" in its ETag), so
	// that the conditions are checked against S3's ETag, not its hash.
	data := make([]byte, 2*partSize+3<<20+7)
	rand.Read(data)
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("src"), Key: aws.String("data/big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	parts := uploadParts(t, c, "src", "data/big.bin", mp.UploadId, data[:partSize], data[partSize:2*partSize], data[2*partSize:])
	done, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("src"), Key: aws.String("data/big.bin"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		t.Fatal(err)
	}
	srcETag := aws.ToString(done.ETag)
	if !strings.HasSuffix(srcETag, `-3"`) {
		t.Fatalf("the source's ETag is %s, want a multipart one", srcETag)
	}
	head, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("src"), Key: aws.String("data/big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	modified := aws.ToTime(head.LastModified)

	up, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("copy.bin"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	copyPart := func(in sdk.UploadPartCopyInput) (*sdk.UploadPartCopyOutput, error) {
		if in.Bucket == nil {
			in.Bucket = aws.String("dst")
		}
		if in.Key == nil {
			in.Key = aws.String("copy.bin")
		}
		if in.UploadId == nil {
			in.UploadId = up.UploadId
		}
		if in.CopySource == nil {
			in.CopySource = aws.String("src/data/big.bin")
		}
		if in.PartNumber == nil {
			in.PartNumber = aws.Int32(1)
		}
		return c.UploadPartCopy(ctx, &in)
	}

	// What is refused keeps no part.
	past, future := modified.Add(-time.Hour), modified.Add(time.Hour)
	for _, tc := range []struct {
		what string
		in   sdk.UploadPartCopyInput
		code string
	}{
		{"a range with no end", sdk.UploadPartCopyInput{CopySourceRange: aws.String("bytes=0-")}, "InvalidArgument"},
		{"a range with no unit", sdk.UploadPartCopyInput{CopySourceRange: aws.String("0-9")}, "InvalidArgument"},
		{"two ranges", sdk.UploadPartCopyInput{CopySourceRange: aws.String("bytes=0-1,3-4")}, "InvalidArgument"},
		{"a suffix range", sdk.UploadPartCopyInput{CopySourceRange: aws.String("bytes=-10")}, "InvalidArgument"},
		{"a range that ends before it starts", sdk.UploadPartCopyInput{CopySourceRange: aws.String("bytes=10-9")}, "InvalidArgument"},
		{"a range past the end", sdk.UploadPartCopyInput{CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", len(data)))}, "InvalidArgument"},
		{"an offset too large for a number", sdk.UploadPartCopyInput{CopySourceRange: aws.String("bytes=0-99999999999999999999")}, "InvalidArgument"},
		{"another ETag", sdk.UploadPartCopyInput{CopySourceIfMatch: aws.String(`"0123"`)}, "PreconditionFailed"},
		{"its own ETag, not to match", sdk.UploadPartCopyInput{CopySourceIfNoneMatch: aws.String(srcETag)}, "PreconditionFailed"},
		{"modified since a later time", sdk.UploadPartCopyInput{CopySourceIfModifiedSince: aws.Time(future)}, "PreconditionFailed"},
		{"unmodified since an earlier time", sdk.UploadPartCopyInput{CopySourceIfUnmodifiedSince: aws.Time(past)}, "PreconditionFailed"},
		{"a source of no key", sdk.UploadPartCopyInput{CopySource: aws.String("src/data/none")}, "NoSuchKey"},
		{"a source of no bucket", sdk.UploadPartCopyInput{CopySource: aws.String("nobucket/data/big.bin")}, "NoSuchBucket"},
		{"a source's older version", sdk.UploadPartCopyInput{CopySource: aws.String("src/data/big.bin?versionId=3HL4kqtJlcpXroDTDmJ")}, "InvalidArgument"},
		{"a source with a dot segment", sdk.UploadPartCopyInput{CopySource: aws.String("src/data/../data/big.bin")}, "InvalidArgument"},
		{"an upload never made", sdk.UploadPartCopyInput{UploadId: aws.String("12345")}, "NoSuchUpload"},
		{"the upload of another key", sdk.UploadPartCopyInput{Key: aws.String("other.bin")}, "NoSuchUpload"},
		{"a bucket that is not there", sdk.UploadPartCopyInput{Bucket: aws.String("nobucket")}, "NoSuchBucket"},
		{"part 0", sdk.UploadPartCopyInput{PartNumber: aws.Int32(0)}, "InvalidArgument"},
		{"part 10001", sdk.UploadPartCopyInput{PartNumber: aws.Int32(10001)}, "InvalidArgument"},
	} {
		if _, err := copyPart(tc.in); apiCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.what, err, tc.code)
		}
	}
	if l, err := c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("dst"), Key: aws.String("copy.bin"), UploadId: up.UploadId}); err != nil || len(l.Parts) != 0 {
		t.Fatalf("after the refused copies the upload has parts %+v (%v)", l, err)
	}

	// The object in two ranges, the first under conditions that hold
	// (If-Match that holds outweighs If-Unmodified-Since that does not,
	// as on S3), the second in the whole source's part 2's place.
	cut := 7<<20 + 1
	var completed []types.CompletedPart
	for i, in := range []sdk.UploadPartCopyInput{
		{CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", cut-1)), CopySourceIfMatch: aws.String(srcETag), CopySourceIfUnmodifiedSince: aws.Time(past),
			CopySourceIfModifiedSince: aws.Time(past)},
		{CopySourceRange: aws.String(fmt.Sprintf("bytes=%d-%d", cut, len(data)-1)), CopySourceIfNoneMatch: aws.String(`"0123"`), CopySource: aws.String("/src/data%2Fbig.bin?versionId=null")},
	} {
		in.PartNumber = aws.Int32(int32(i + 1))
		out, err := copyPart(in)
		if err != nil {
			t.Fatalf("part %d: %v", i+1, err)
		}
		want := data[:cut]
		if i == 1 {
			want = data[cut:]
		}
		sum := md5.Sum(want)
		r := out.CopyPartResult
		if r == nil || aws.ToString(r.ETag) != `"`+hex.EncodeToString(sum[:])+`"` || aws.ToString(r.ChecksumCRC32) != b64(crc32.NewIEEE(), want) || r.LastModified == nil || r.LastModified.Before(modified.Add(-time.Second)) {
			t.Fatalf("part %d answered %+v, want the ETag %x and the CRC32 %s of its %d bytes", i+1, r, sum, b64(crc32.NewIEEE(), want), len(want))
		}
		completed = append(completed, types.CompletedPart{PartNumber: in.PartNumber, ETag: r.ETag, ChecksumCRC32: r.ChecksumCRC32})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("copy.bin"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: completed}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("dst"), Key: aws.String("copy.bin"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(got.Body)
	got.Body.Close()
	if err != nil || !bytes.Equal(b, data) || !strings.HasSuffix(aws.ToString(got.ETag), `-2"`) {
		t.Fatalf("the copy holds %d bytes (equal: %v, %v), ETag %s; want the source's %d", len(b), bytes.Equal(b, data), err, aws.ToString(got.ETag), len(data))
	}

	// CopyObject of the multipart source answers the copy's own ETag, an
	// object of one part (gofakes3 answered the source's hash).
	cp, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("dst"), Key: aws.String("whole-copy.bin"), CopySource: aws.String("src/data/big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	if sum := md5.Sum(data); aws.ToString(cp.CopyObjectResult.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Errorf("CopyObject of the multipart source answered the ETag %s, want the copy's %x", aws.ToString(cp.CopyObjectResult.ETag), sum)
	}
	if h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("dst"), Key: aws.String("whole-copy.bin")}); err != nil || aws.ToString(h.ETag) != aws.ToString(cp.CopyObjectResult.ETag) {
		t.Errorf("the copy's ETag: %v %s, answered %s", err, aws.ToString(h.ETag), aws.ToString(cp.CopyObjectResult.ETag))
	}

	// With no range, the part is the whole source. An empty source
	// makes no part, as an UploadPart of no bytes makes none.
	whole, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("dst"), Key: aws.String("whole.bin")})
	if err != nil {
		t.Fatal(err)
	}
	out, err := copyPart(sdk.UploadPartCopyInput{Key: aws.String("whole.bin"), UploadId: whole.UploadId})
	if err != nil {
		t.Fatalf("the whole source: %v", err)
	}
	if sum := md5.Sum(data); aws.ToString(out.CopyPartResult.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
		t.Errorf("the whole source answered the ETag %s, want %x", aws.ToString(out.CopyPartResult.ETag), sum)
	}
	if out.CopyPartResult.ChecksumCRC32 != nil {
		t.Errorf("a part of an upload with no checksum algorithm answered a CRC32")
	}
	mustPutIn(t, c, "src", "empty", "")
	for _, rng := range []string{"", "bytes=0-0"} {
		in := sdk.UploadPartCopyInput{Key: aws.String("whole.bin"), UploadId: whole.UploadId, PartNumber: aws.Int32(2), CopySource: aws.String("src/empty")}
		want := "InvalidRequest"
		if rng != "" {
			in.CopySourceRange, want = aws.String(rng), "InvalidArgument"
		}
		if _, err := copyPart(in); apiCode(err) != want {
			t.Errorf("the empty source, range %q: %v, want %s", rng, err, want)
		}
	}
	l, err := c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("dst"), Key: aws.String("whole.bin"), UploadId: whole.UploadId})
	if err != nil || len(l.Parts) != 1 || aws.ToInt64(l.Parts[0].Size) != int64(len(data)) {
		t.Fatalf("the upload of whole copies lists %+v (%v)", l, err)
	}
}

// TestCopyObjectConditions: a CopyObject's conditions on its source
// (x-amz-copy-source-if-*) are checked, as S3 checks them, where gofakes3
// ignored them and kept them as the copy's metadata; one that fails
// writes nothing.
func TestCopyObjectConditions(t *testing.T) {
	t.Parallel()
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	mustPut(t, c, "src", "source")
	head, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("src")})
	if err != nil {
		t.Fatal(err)
	}
	modified := aws.ToTime(head.LastModified)
	past, future := modified.Add(-time.Hour), modified.Add(time.Hour)
	for _, tc := range []struct {
		what string
		in   sdk.CopyObjectInput
		ok   bool
	}{
		{"If-Match of another ETag", sdk.CopyObjectInput{CopySourceIfMatch: aws.String(`"0123"`)}, false},
		{"If-None-Match of its ETag", sdk.CopyObjectInput{CopySourceIfNoneMatch: head.ETag}, false},
		{"If-None-Match * ", sdk.CopyObjectInput{CopySourceIfNoneMatch: aws.String("*")}, false},
		{"If-Modified-Since later", sdk.CopyObjectInput{CopySourceIfModifiedSince: aws.Time(future)}, false},
		{"If-Unmodified-Since earlier", sdk.CopyObjectInput{CopySourceIfUnmodifiedSince: aws.Time(past)}, false},
		{"If-None-Match that holds, If-Modified-Since that does not", sdk.CopyObjectInput{CopySourceIfNoneMatch: aws.String(`"0123"`), CopySourceIfModifiedSince: aws.Time(future)}, true},
		{"If-Match of its ETag, If-Unmodified-Since that does not hold", sdk.CopyObjectInput{CopySourceIfMatch: head.ETag, CopySourceIfUnmodifiedSince: aws.Time(past)}, true},
		{"a source's older version", sdk.CopyObjectInput{CopySource: aws.String("bkt/src?versionId=3HL4kqtJlcpXroDTDmJ")}, false},
		{"the source's one version", sdk.CopyObjectInput{CopySource: aws.String("bkt/src?versionId=null")}, true},
	} {
		in := tc.in
		in.Bucket, in.Key = aws.String("bkt"), aws.String("dst")
		if in.CopySource == nil {
			in.CopySource = aws.String("bkt/src")
		}
		_, err := c.CopyObject(ctx, &in)
		_, headErr := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dst")})
		switch {
		case tc.ok && (err != nil || headErr != nil):
			t.Errorf("%s: %v (the copy: %v), want it copied", tc.what, err, headErr)
		case !tc.ok && (apiCode(err) != "PreconditionFailed" && apiCode(err) != "InvalidArgument" || headErr == nil):
			t.Errorf("%s: %v (the copy: %v), want it refused and nothing written", tc.what, err, headErr)
		}
		c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dst")})
	}
	// The conditions are no metadata of the copy.
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dst"), CopySource: aws.String("bkt/src"), CopySourceIfMatch: head.ETag}); err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodHead, ts.URL+"/bkt/dst", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k := range resp.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-copy-source-if") {
			t.Errorf("the copy answers the copy's header %s: %q", k, resp.Header.Values(k))
		}
	}
}
