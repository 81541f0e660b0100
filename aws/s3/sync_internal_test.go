package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash/crc64"
	"io"
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

// TestCrashMidCommit: a server that dies between a commit's two renames
// (the data's into place, then its metadata's) leaves, once started
// again, the new object whole, with its own metadata and ETag (the
// commit is rolled forward from the metadata written first under tmp/);
// one that dies before the data's rename leaves the old object whole.
// Before, the first case gave the new data with the old object's user
// metadata. A multipart object rolled forward keeps its parts (its
// layout is in the metadata). The crash is played in the process
// (crashAt stops the commit and leaves the files as they are); a kill -9
// leaves the same files.
func TestCrashMidCommit(t *testing.T) {
	root := t.TempDir()
	ctx := context.Background()
	var crashAt string
	start := func() (*sdk.Client, func()) {
		srv, err := New(root)
		if err != nil {
			t.Fatal(err)
		}
		srv.backend.crashAt = func(step string) bool { return step == crashAt }
		ts := httptest.NewServer(srv)
		return sdk.New(sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), UsePathStyle: true, RetryMaxAttempts: 1,
			Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")}), ts.Close
	}
	put := func(c *sdk.Client, body, v string) error {
		_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("d/k"), Body: strings.NewReader(body),
			Metadata: map[string]string{"v": v}, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		return err
	}
	// check checks key's body, metadata, ETag and checksum (the SDK
	// checks the checksum of a GET against the body too).
	check := func(c *sdk.Client, key, body, v, etag, checksum string) {
		t.Helper()
		out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatalf("GetObject(%s): %v", key, err)
		}
		b, err := io.ReadAll(out.Body)
		out.Body.Close()
		if string(b) != body || out.Metadata["v"] != v || strings.Trim(aws.ToString(out.ETag), `"`) != etag || err != nil {
			t.Errorf("after the restart %s = %q (%v), v=%q, ETag %s; want %q, v=%q, ETag %s", key, b, err, out.Metadata["v"], aws.ToString(out.ETag), body, v, etag)
		}
		if got := aws.ToString(out.ChecksumSHA256) + aws.ToString(out.ChecksumCRC64NVME); got != checksum {
			t.Errorf("after the restart %s keeps the checksum %q, want %q", key, got, checksum)
		}
	}
	sha := func(s string) string { h := sha256.Sum256([]byte(s)); return base64.StdEncoding.EncodeToString(h[:]) }
	md5hex := func(s string) string { h := md5.Sum([]byte(s)); return hex.EncodeToString(h[:]) }

	c, stop := start()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	if err := put(c, "old body", "old"); err != nil {
		t.Fatal(err)
	}
	crashAt = "before the metadata's rename"
	if err := put(c, "the new body", "new"); err == nil {
		t.Fatal("the put that crashed answered success")
	}
	// A multipart upload whose completion crashed at the same step.
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m"), Metadata: map[string]string{"v": "mp"},
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme})
	if err != nil {
		t.Fatal(err)
	}
	part, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: strings.NewReader("the part"),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: part.ETag, PartNumber: aws.Int32(1), ChecksumCRC64NVME: part.ChecksumCRC64NVME}}}}); err == nil {
		t.Fatal("the completion that crashed answered success")
	}
	stop()

	crashAt = ""
	c, stop = start()
	check(c, "d/k", "the new body", "new", md5hex("the new body"), sha("the new body"))
	sum := md5.Sum([]byte("the part"))
	crc := crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5))
	crc.Write([]byte("the part"))
	check(c, "m", "the part", "mp", md5hex(string(sum[:]))+"-1", base64.StdEncoding.EncodeToString(crc.Sum(nil)))
	// Its parts with it: part 1 is its one part, not the whole object
	// of none.
	if h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m"), PartNumber: aws.Int32(1)}); err != nil || aws.ToInt32(h.PartsCount) != 1 || aws.ToInt64(h.ContentLength) != int64(len("the part")) {
		t.Errorf("after the restart part 1 of m: %v, parts count %v; want 1 part of %d bytes", err, h.PartsCount, len("the part"))
	}
	if ents, _ := os.ReadDir(filepath.Join(root, tmpDir)); len(ents) > 0 {
		t.Errorf("tmp/ after the restart holds %d entries, want none", len(ents))
	}

	crashAt = "before the data's rename"
	if err := put(c, "newer", "newer"); err == nil {
		t.Fatal("the put that crashed answered success")
	}
	stop()
	crashAt = ""
	c, stop = start()
	defer stop()
	check(c, "d/k", "the new body", "new", md5hex("the new body"), sha("the new body"))
}
