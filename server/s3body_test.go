package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"qshare/auth"
	"qshare/aws/s3/s3test"
	"qshare/internal/python"
)

// readObject returns the object's bytes as k reads them.
func (e *s3WithAuth) readObject(t *testing.T, k auth.AccessKey, bucket, key string) []byte {
	t.Helper()
	return s3test.Read(t, e.client(k), bucket, key)
}

// TestEmbeddedS3WithAuthTakesLargeBodies: under --auth, S3 bodies are
// streamed to the store, their declared hash checked as they go, so
// objects of any size up to S3's own limit go in: a 2 MiB PutObject and a
// 64 MiB upload by the SDK's transfer manager (8 MiB parts), read back
// byte for byte.
func TestEmbeddedS3WithAuthTakesLargeBodies(t *testing.T) {
	t.Parallel() // a server of its own; with the package's other long tests
	e := startS3WithAuth(t)
	ctx := context.Background()
	a := e.client(e.alice)
	data := make([]byte, 64<<20)
	rand.New(rand.NewSource(31)).Read(data)
	if _, err := a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String("two"), Body: bytes.NewReader(data[:2<<20])}); err != nil {
		t.Fatalf("PutObject of 2 MiB under --auth: %v", err)
	}
	if got := e.readObject(t, e.alice, "team-a", "two"); !bytes.Equal(got, data[:2<<20]) {
		t.Fatalf("the 2 MiB object read back is %d bytes, not what was put", len(got))
	}
	tm := transfermanager.New(a)
	if _, err := tm.UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String("team-a"), Key: aws.String("model.bin"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatalf("the transfer manager's upload of 64 MiB under --auth: %v", err)
	}
	if got := e.readObject(t, e.alice, "team-a", "model.bin"); !bytes.Equal(got, data) {
		t.Fatalf("the 64 MiB object read back is %d bytes, not what was put", len(got))
	}
}

// TestEmbeddedS3WithAuthBoto3Multipart: boto3's upload_file of 8 MiB in
// parts under --auth (boto3 signs each part's SHA-256 over plain HTTP).
func TestEmbeddedS3WithAuthBoto3Multipart(t *testing.T) {
	t.Parallel() // a server of its own, mostly waiting on Python; with the package's other long tests
	py, ok := python.With("boto3")
	if !ok {
		t.Skip("python3 with boto3 is not installed: skipping the boto3 test")
	}
	e := startS3WithAuth(t)
	file := filepath.Join(t.TempDir(), "model.bin")
	data := make([]byte, 8<<20)
	rand.New(rand.NewSource(8)).Read(data)
	serveMust(t, os.WriteFile(file, data, 0o600))
	const script = `
import boto3, sys
from boto3.s3.transfer import TransferConfig
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name=sys.argv[2], aws_access_key_id=sys.argv[3], aws_secret_access_key=sys.argv[4],
                  config=boto3.session.Config(s3={"addressing_style": "path"}))
parts = []
s3.meta.events.register("after-call.s3.UploadPart", lambda **kw: parts.append(kw["http_response"].status_code))
s3.upload_file(sys.argv[5], "team-a", "boto3/model.bin", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
print("parts", parts)
`
	out, err := exec.Command(py, "-c", script, e.base, e.s.Region, e.alice.ID, e.alice.Secret, file).CombinedOutput()
	if err != nil {
		t.Fatalf("boto3 under --auth: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "parts [200, 200]") {
		t.Fatalf("boto3's upload of 8 MiB was not in two parts: %s", out)
	}
	if got := e.readObject(t, e.alice, "team-a", "boto3/model.bin"); !bytes.Equal(got, data) {
		t.Fatalf("the object boto3 put is %d bytes, not the file's", len(got))
	}
}

// signedPut returns a PutObject of body to the key that alice signed with
// declared as X-Amz-Content-Sha256.
func (e *s3WithAuth) signedPut(t *testing.T, key, declared string, body []byte) *http.Request {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, e.base+"/team-a/"+key, bytes.NewReader(body))
	serveMust(t, err)
	req.Header.Set("X-Amz-Content-Sha256", declared)
	serveMust(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: e.alice.ID, SecretAccessKey: e.alice.Secret}, req, declared, "s3", e.s.Region, time.Now()))
	return req
}

// s3Code sends req and returns its status and the Code of its XML error.
func s3Code(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	serveMust(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_, code, _ := strings.Cut(string(b), "<Code>")
	code, _, _ = strings.Cut(code, "</Code>")
	return resp.StatusCode, code
}

// TestEmbeddedS3WithAuthChecksBodies: a body altered after it was signed
// (its declared hash, which the signature covers, is not its own) is
// refused with S3's XAmzContentSHA256Mismatch and leaves nothing under
// its key, nor in the store's tmp/; UNSIGNED-PAYLOAD goes in, and so does
// aws-chunked with unsigned chunks and a CRC32 trailer (the Go SDK's over
// HTTPS); signed chunks are refused with NotImplemented; a Batch body over 1 MiB is still
// refused before it is read past the limit.
func TestEmbeddedS3WithAuthChecksBodies(t *testing.T) {
	t.Parallel()
	e := startS3WithAuth(t)
	a := e.client(e.alice)
	ctx := context.Background()
	body := bytes.Repeat([]byte("a"), 3<<20)
	sum := sha256.Sum256(body)
	altered := bytes.Repeat([]byte("b"), len(body))
	for _, key := range []string{"fresh", "kept"} {
		if key == "kept" {
			if _, err := a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String(key), Body: strings.NewReader("old")}); err != nil {
				t.Fatal(err)
			}
		}
		req := e.signedPut(t, key, hex.EncodeToString(sum[:]), body)
		req.Body = io.NopCloser(bytes.NewReader(altered))
		if status, code := s3Code(t, req); status != http.StatusBadRequest || code != "XAmzContentSHA256Mismatch" {
			t.Fatalf("an altered body of %s: %d %q, want 400 XAmzContentSHA256Mismatch", key, status, code)
		}
	}
	_, err := a.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("team-a"), Key: aws.String("fresh")})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "NotFound" {
		t.Fatalf("after a refused body, HeadObject = %v, want NotFound", err)
	}
	if got := e.readObject(t, e.alice, "team-a", "kept"); string(got) != "old" {
		t.Fatalf("after a refused body, the object that was there reads %d bytes, want the old 3", len(got))
	}
	if ents, err := os.ReadDir(filepath.Join(e.s.DataDir, "s3", "tmp")); err != nil || len(ents) != 0 {
		t.Fatalf("the store's tmp/ after refused bodies: %v %v, want empty", ents, err)
	}

	if status, code := s3Code(t, e.signedPut(t, "unsigned", "UNSIGNED-PAYLOAD", body)); status != http.StatusOK {
		t.Fatalf("an UNSIGNED-PAYLOAD PutObject: %d %q", status, code)
	}
	if got := e.readObject(t, e.alice, "team-a", "unsigned"); !bytes.Equal(got, body) {
		t.Fatalf("the UNSIGNED-PAYLOAD object reads %d bytes, not what was put", len(got))
	}
	// The Go SDK's form over HTTPS: aws-chunked, unsigned, a CRC32 trailer.
	crc := crc32.ChecksumIEEE(body)
	framed := fmt.Sprintf("%x\r\n%s\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n", len(body), body, base64.StdEncoding.EncodeToString([]byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)}))
	req := e.signedPut(t, "trailer", "STREAMING-UNSIGNED-PAYLOAD-TRAILER", []byte(framed))
	req.Header.Set("Content-Encoding", "aws-chunked")
	req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
	req.Header.Set("X-Amz-Decoded-Content-Length", fmt.Sprint(len(body)))
	if status, code := s3Code(t, req); status != http.StatusOK {
		t.Fatalf("an aws-chunked PutObject with a CRC32 trailer: %d %q", status, code)
	}
	if got := e.readObject(t, e.alice, "team-a", "trailer"); !bytes.Equal(got, body) {
		t.Fatalf("the aws-chunked object reads %d bytes, not what was put", len(got))
	}
	for _, h := range []string{"STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"} {
		if status, code := s3Code(t, e.signedPut(t, "chunked", h, []byte("5\r\nhello\r\n0\r\n\r\n"))); status != http.StatusNotImplemented || code != "NotImplemented" {
			t.Errorf("a body sent as %s: %d %q, want 501 NotImplemented", h, status, code)
		}
	}
	if status, code := s3Code(t, e.signedPut(t, "odd", "not-a-hash", []byte("x"))); status != http.StatusBadRequest || code != "InvalidArgument" {
		t.Errorf("X-Amz-Content-Sha256 not-a-hash: %d %q, want 400 InvalidArgument", status, code)
	}

	// A Batch body keeps the API's 1 MiB limit.
	big := []byte(`{"jobQueue":"` + strings.Repeat("q", 1<<20) + `"}`)
	bsum := sha256.Sum256(big)
	req, err = http.NewRequest(http.MethodPost, e.base+"/v1/describejobqueues", bytes.NewReader(big))
	serveMust(t, err)
	req.Header.Set("Content-Type", "application/json")
	serveMust(t, v4.NewSigner().SignHTTP(ctx, aws.Credentials{AccessKeyID: e.alice.ID, SecretAccessKey: e.alice.Secret}, req, hex.EncodeToString(bsum[:]), "batch", e.s.Region, time.Now()))
	resp, err := http.DefaultClient.Do(req)
	serveMust(t, err)
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(msg), "larger than 1048576 bytes") {
		t.Fatalf("a Batch body over 1 MiB: %d %s, want 400 and the limit", resp.StatusCode, msg)
	}
}
