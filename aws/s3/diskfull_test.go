package s3_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// TestFullDisk: on a data directory with no room left (a tmpfs of 4 MiB),
// a PutObject, a part and a completion that do not fit are refused with
// XMinioStorageFull and 507 Insufficient Storage (MinIO's answer, which
// says why; the SDK does not send the body again), naming the cause and
// not the path; none leaves a byte behind: the old object stays, and
// once the refused bodies are gone a small PutObject fits. It needs to
// mount a tmpfs (root), and is skipped where it cannot.
func TestFullDisk(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=4m,mode=0700", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs for a full disk (%v: %s): skipping", err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(func() { exec.Command("umount", dir).Run() })
	ts, c := startWith(t, dir, "bkt")
	defer ts.Close()
	ctx := context.Background()
	once := func(o *sdk.Options) { o.RetryMaxAttempts = 1 }
	full := func(what string, err error) {
		t.Helper()
		var ae smithy.APIError
		errors.As(err, &ae)
		if code, st := apiError(t, err); code != "XMinioStorageFull" || st != 507 || !strings.Contains(ae.ErrorMessage(), "no space left on device") || strings.Contains(ae.ErrorMessage(), dir) {
			t.Errorf("%s on a full disk: %s (%d) %q; want XMinioStorageFull (507) naming the cause, not the path", what, code, st, ae.ErrorMessage())
		}
	}
	mustPut(t, c, "k", "old")
	big := bytes.Repeat([]byte("x"), 5<<20)
	_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: bytes.NewReader(big)}, once)
	full("PutObject", err)
	if b, _ := get(t, c, "bkt", "k"); string(b) != "old" {
		t.Errorf("after the refused PutObject the object holds %d bytes, want the old object", len(b))
	}

	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(big)}, once)
	full("UploadPart", err)
	// Two parts that fit, whose object does not fit beside them.
	var parts []types.CompletedPart
	for i := range 2 {
		out, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId, PartNumber: aws.Int32(int32(i + 1)),
			Body: bytes.NewReader(big[:3<<19])}, once)
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
	}
	_, err = c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}, once)
	full("CompleteMultipartUpload", err)
	if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m")}); err == nil {
		t.Error("the refused completion made the object")
	}
	if _, err := c.AbortMultipartUpload(ctx, &sdk.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId}); err != nil {
		t.Fatal(err)
	}
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files", n)
	}
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: bytes.NewReader(big[:1<<20])}); err != nil {
		t.Errorf("a PutObject that fits after the refusals: %v", err)
	}
}
