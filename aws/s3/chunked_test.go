package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"

	s3server "qshare/aws/s3"
	"qshare/internal/python"
)

// TestSDKOverHTTPSOnItsDefaults: over HTTPS the Go SDK sends a PutObject
// and each part as aws-chunked with a CRC32 trailer
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER); the store takes the framing away,
// checks the checksum and keeps the bytes, as they were put. boto3 does
// the same over HTTPS.
func TestSDKOverHTTPSOnItsDefaults(t *testing.T) {
	t.Parallel()
	srv, err := s3server.New(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	seen := map[string]int{}
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut {
			mu.Lock()
			seen[r.Header.Get("X-Amz-Content-Sha256")]++
			mu.Unlock()
		}
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	c := sdk.New(sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), UsePathStyle: true, HTTPClient: ts.Client(),
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 20<<20)
	rand.Read(data)
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("small"), Body: bytes.NewReader(data[:3<<20])}); err != nil {
		t.Fatal(err)
	}
	if _, err := transfermanager.New(c).UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][]byte{"small": data[:3<<20], "big": data} {
		out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if !bytes.Equal(got, want) {
			t.Fatalf("%s reads %d bytes, not the %d put", key, len(got), len(want))
		}
	}
	if seen["STREAMING-UNSIGNED-PAYLOAD-TRAILER"] < 2 {
		t.Fatalf("the SDK's PUTs came with X-Amz-Content-Sha256 %v: the test did not see aws-chunked", seen)
	}

	// boto3 does the same over HTTPS.
	py, ok := python.With("boto3")
	if !ok {
		t.Skip("python3 with boto3 is not installed: skipping boto3 over HTTPS")
	}
	mu.Lock()
	clear(seen)
	mu.Unlock()
	const script = `
import boto3, io, sys
from boto3.s3.transfer import TransferConfig
s3 = boto3.client("s3", endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s", verify=False,
                  config=boto3.session.Config(s3={"addressing_style": "path"}))
data = bytes(range(256)) * (32 << 10)
s3.put_object(Bucket="bkt", Key="boto3-small", Body=data[:1 << 20])
s3.upload_fileobj(io.BytesIO(data), "bkt", "boto3-big", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
for key, want in (("boto3-small", data[:1 << 20]), ("boto3-big", data)):
    assert s3.get_object(Bucket="bkt", Key=key)["Body"].read() == want, key
print("ok")
`
	out, err := exec.Command(py, "-W", "ignore", "-c", script, ts.URL).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "ok") {
		t.Fatalf("boto3 over HTTPS: %v\n%s", err, out)
	}
	if seen["STREAMING-UNSIGNED-PAYLOAD-TRAILER"] < 2 {
		t.Fatalf("boto3's PUTs came with X-Amz-Content-Sha256 %v: the test did not see aws-chunked", seen)
	}
}

// chunked frames body as aws-chunked in chunks of size, with trailer.
func chunked(body []byte, size int, trailer string) string {
	var b strings.Builder
	for len(body) > 0 {
		n := min(size, len(body))
		fmt.Fprintf(&b, "%x\r\n%s\r\n", n, body[:n])
		body = body[n:]
	}
	return b.String() + "0\r\n" + trailer + "\r\n\r\n"
}

// TestChunkedBodyRefusals: an aws-chunked body whose trailer's checksum is
// not its own is refused with BadDigest, one whose framing is wrong with
// IncompleteBody; neither leaves anything under its key or in tmp/.
func TestChunkedBodyRefusals(t *testing.T) {
	dir := t.TempDir()
	ts, c := start(t, dir)
	defer ts.Close()
	if _, err := c.CreateBucket(context.Background(), &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("x"), 100<<10)
	sum := crc32.ChecksumIEEE(body)
	crc := "x-amz-checksum-crc32:" + base64.StdEncoding.EncodeToString([]byte{byte(sum >> 24), byte(sum >> 16), byte(sum >> 8), byte(sum)})
	put := func(key, framed string) (int, string) {
		return rawPut(t, ts.URL+"/bkt/"+key, map[string]string{"X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked",
			"X-Amz-Trailer": "x-amz-checksum-crc32", "X-Amz-Decoded-Content-Length": fmt.Sprint(len(body))}, framed)
	}
	if status, code := put("good", chunked(body, 64<<10, crc)); status != http.StatusOK {
		t.Fatalf("a good aws-chunked body: %d %s", status, code)
	}
	// A trailer that X-Amz-Trailer does not name: the message said the
	// store checked no XXHASH.
	status, doc := raw(t, http.MethodPut, ts.URL+"/bkt/unnamed", map[string]string{"X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked",
		"X-Amz-Decoded-Content-Length": fmt.Sprint(len(body))}, strings.NewReader(chunked(body, 64<<10, crc)))
	if status != http.StatusBadRequest || !strings.Contains(doc, "must name its checksum in X-Amz-Trailer") {
		t.Errorf("a trailer X-Amz-Trailer does not name: %d %s", status, doc)
	}
	for _, tc := range []struct{ key, framed, code string }{
		{"bad-crc", chunked(body, 64<<10, "x-amz-checksum-crc32:AAAAAA=="), "BadDigest"},
		{"no-trailer", chunked(body, 64<<10, ""), "BadDigest"},
		{"bad-size", strings.Replace(chunked(body, 64<<10, crc), "10000\r\n", "zz\r\n", 1), "IncompleteBody"},
		{"short", chunked(body[:1000], 64<<10, crc), "IncompleteBody"},
	} {
		if status, code := put(tc.key, tc.framed); status != http.StatusBadRequest || code != tc.code {
			t.Errorf("%s: %d %q, want 400 %s", tc.key, status, code, tc.code)
		}
		if _, err := c.HeadObject(context.Background(), &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(tc.key)}); err == nil {
			t.Errorf("%s: an object is stored after the refusal", tc.key)
		}
	}
	out, err := c.GetObject(context.Background(), &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("good")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	if !bytes.Equal(got, body) || out.ContentEncoding != nil {
		t.Fatalf("the good aws-chunked body reads %d bytes, Content-Encoding %v", len(got), aws.ToString(out.ContentEncoding))
	}
	if ents, err := os.ReadDir(filepath.Join(dir, "tmp")); err != nil || len(ents) != 0 {
		t.Fatalf("tmp/ after refused bodies: %v %v, want empty", ents, err)
	}
}
