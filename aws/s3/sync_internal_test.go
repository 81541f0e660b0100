package s3

import (
	"bytes"
	"context"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// TestCommitSyncsItsDirectories: a PutObject, a completed multipart
// upload and a CreateBucket sync the directories they wrote entries in
// (the object's, its metadata's, and the one above each directory made
// for them) before they answer; a sync that fails is S3's InternalError,
// naming the cause and not the path. (That the sync makes the entries
// survive a power cut is the file system's promise; no test here cuts
// the power.)
func TestCommitSyncsItsDirectories(t *testing.T) {
	root := t.TempDir()
	srv, err := New(root)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	synced := map[string]bool{}
	var fail error
	srv.backend.syncDir = func(dir string) error {
		mu.Lock()
		defer mu.Unlock()
		rel, _ := filepath.Rel(root, dir)
		synced[filepath.ToSlash(rel)] = true
		if fail != nil {
			return &os.PathError{Op: "sync", Path: dir, Err: fail}
		}
		return syncDirectory(dir)
	}
	took := func(want ...string) {
		t.Helper()
		mu.Lock()
		defer mu.Unlock()
		for _, d := range want {
			if !synced[d] {
				t.Errorf("%s was not synced; synced: %v", d, synced)
			}
		}
		clear(synced)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	c := sdk.New(sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), UsePathStyle: true, RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	took("buckets")
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a/b/c"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	took("buckets/bkt/a/b", "buckets/bkt/a", "buckets/bkt", "metadata/bkt", "metadata")
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m")})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("p"))})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	took("buckets/bkt", "metadata/bkt")

	mu.Lock()
	fail = syscall.EIO
	mu.Unlock()
	_, err = c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: strings.NewReader("x")})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "InternalError" || !strings.Contains(ae.ErrorMessage(), "input/output error") || strings.Contains(ae.ErrorMessage(), root) {
		t.Errorf("PutObject whose directory cannot be synced: %v; want InternalError naming the cause, not the path", err)
	}
	_, err = c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("other")})
	if !errors.As(err, &ae) || ae.ErrorCode() != "InternalError" || !strings.Contains(ae.ErrorMessage(), "input/output error") {
		t.Errorf("CreateBucket whose directory cannot be synced: %v; want InternalError naming the cause", err)
	}
}
