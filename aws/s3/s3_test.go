package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	s3server "qshare/aws/s3"
	"qshare/internal/python"
)

func start(t *testing.T, dir string) (*httptest.Server, *sdk.Client) {
	t.Helper()
	_, ts, c := serve(t, dir)
	return ts, c
}

// startWith is start, with the empty buckets made.
func startWith(t *testing.T, dir string, buckets ...string) (*httptest.Server, *sdk.Client) {
	t.Helper()
	ts, c := start(t, dir)
	for _, b := range buckets {
		if _, err := c.CreateBucket(context.Background(), &sdk.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	return ts, c
}

// serve serves a store kept in dir on a loopback port, and returns it,
// its server (for the caller to close) and an SDK client of it.
func serve(tb testing.TB, dir string) (*s3server.Server, *httptest.Server, *sdk.Client) {
	tb.Helper()
	srv, err := s3server.New(dir)
	if err != nil {
		tb.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	return srv, ts, client(ts.URL)
}

// client is an SDK client of the store at url.
// mustPut puts body as key in the bucket bkt, failing t if it cannot.
func mustPut(t *testing.T, c *sdk.Client, key, body string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}

func client(url string) *sdk.Client {
	return sdk.New(sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
}

// TestAPI goes through what the SDKs use, with the AWS SDK for Go v2:
// buckets, objects, a multipart upload, a ranged GET, listing; and a
// restart over the same directory keeps it all.
func TestAPI(t *testing.T) {
	dir := t.TempDir()
	ts, c := start(t, dir)
	ctx := context.Background()
	must := func(_ any, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("team-a")}))
	must(c.HeadBucket(ctx, &sdk.HeadBucketInput{Bucket: aws.String("team-a")}))
	must(c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String("data/x.txt"), Body: strings.NewReader("hello world")}))
	// Multipart: two parts, the first of the 5 MiB minimum.
	part1 := make([]byte, 5<<20)
	rand.Read(part1)
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("team-a"), Key: aws.String("big.bin")})
	if err != nil {
		t.Fatal(err)
	}
	parts := uploadParts(t, c, "team-a", "big.bin", mp.UploadId, part1, []byte("tail"))
	must(c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("team-a"), Key: aws.String("big.bin"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}))
	ts.Close()

	_, c = start(t, dir) // a restart
	g, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("team-a"), Key: aws.String("big.bin"), Range: aws.String("bytes=5242878-5242881")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(g.Body)
	if want := append(append([]byte{}, part1[len(part1)-2:]...), "ta"...); !bytes.Equal(b, want) {
		t.Fatalf("ranged GET across the parts gave %q, want %q", b, want)
	}
	l, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("team-a"), Prefix: aws.String("data/")})
	if err != nil || len(l.Contents) != 1 || aws.ToString(l.Contents[0].Key) != "data/x.txt" {
		t.Fatalf("list after restart: %v %+v", err, l)
	}
	h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("team-a"), Key: aws.String("big.bin")})
	if err != nil || aws.ToInt64(h.ContentLength) != 5<<20+4 {
		t.Fatalf("head: %v %+v", err, h)
	}
	bs, err := c.ListBuckets(ctx, &sdk.ListBucketsInput{})
	if err != nil || len(bs.Buckets) != 1 {
		t.Fatalf("list buckets: %v %+v", err, bs)
	}
	must(c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("team-a"), Key: aws.String("data/x.txt")}))
	_, err = c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("team-a"), Key: aws.String("data/x.txt")})
	var nsk *types.NoSuchKey
	if !errors.As(err, &nsk) {
		t.Fatalf("a deleted object gave %v, want NoSuchKey", err)
	}
}

// TestHostileKeys: a key that would reach outside its bucket's files is
// refused with InvalidArgument, and nothing is written.
func TestHostileKeys(t *testing.T) {
	ts, c := start(t, t.TempDir())
	defer ts.Close()
	ctx := context.Background()
	for _, b := range []string{"victim", "attacker"} {
		if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range []string{"../victim/planted", "a/./b", "a//b", "/lead"} {
		_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("attacker"), Key: aws.String(k), Body: strings.NewReader("x")})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "InvalidArgument" {
			t.Errorf("key %q: got %v, want InvalidArgument", k, err)
		}
	}
	l, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("victim")})
	if err != nil || len(l.Contents) != 0 {
		t.Fatalf("the victim's bucket holds %+v (%v)", l.Contents, err)
	}
}

// TestBoto3 fills a bucket with boto3, a client no one here wrote, and
// reads it back with the Go SDK. In the same run (one interpreter: each
// costs a second of CPU), boto3's managed copy of an object over its
// multipart threshold (8 MiB), which `aws s3 cp s3://… s3://…` makes
// too, copies it with UploadPartCopy of ranges; and boto3's way to empty
// a bucket, Bucket.object_versions.delete() (ListObjectVersions, then
// DeleteObjects naming each version), empties one. The store answered
// both UploadPartCopy and ListObjectVersions with NotImplemented. User
// metadata comes back named in lower case, as from S3 (boto3 keeps a
// header name's case).
func TestBoto3(t *testing.T) {
	t.Parallel()
	py, ok := python.With("boto3")
	if !ok {
		t.Skip("python3 with boto3 is not installed: skipping the boto3 test")
	}
	ts, c := start(t, t.TempDir())
	defer ts.Close()
	script := `
import boto3, io, sys
from boto3.s3.transfer import TransferConfig
cfg = dict(endpoint_url=sys.argv[1], region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
           config=boto3.session.Config(s3={"addressing_style": "path"}))
s3 = boto3.client("s3", **cfg)
s3.create_bucket(Bucket="from-boto3")
s3.put_object(Bucket="from-boto3", Key="train/a.csv", Body=b"1,2,3\n", Metadata={"Team-Name": "a"})
s3.upload_fileobj(io.BytesIO(bytes(range(256)) * (9 << 12)), "from-boto3", "train/big.bin",
                  Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
s3.copy({"Bucket": "from-boto3", "Key": "train/big.bin"}, "from-boto3", "archive/big.bin")
print(sorted(o["Key"] for o in s3.list_objects_v2(Bucket="from-boto3")["Contents"]))
print(s3.head_object(Bucket="from-boto3", Key="archive/big.bin")["ETag"], s3.head_object(Bucket="from-boto3", Key="train/a.csv")["Metadata"])
s3.create_bucket(Bucket="scratch")
for k in ("run-1/model.tar.gz", "run-1/output/x", "top"):
    s3.put_object(Bucket="scratch", Key=k, Body=k.encode())
b = boto3.resource("s3", **cfg).Bucket("scratch")
print(sorted((v.object_key, v.id) for v in b.object_versions.all()))
b.object_versions.delete()
b.delete()
print("emptied and deleted")
`
	out, err := exec.Command(py, "-c", script, ts.URL).CombinedOutput()
	if err != nil {
		t.Fatalf("boto3: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 4 || lines[0] != "['archive/big.bin', 'train/a.csv', 'train/big.bin']" || !strings.HasSuffix(lines[1], `-2" {'team-name': 'a'}`) ||
		lines[2] != "[('run-1/model.tar.gz', 'null'), ('run-1/output/x', 'null'), ('top', 'null')]" || lines[3] != "emptied and deleted" {
		t.Fatalf("boto3 printed %s; want the three keys, the copy's ETag of two 8 MiB parts, user metadata named in lower case as S3 names it, the scratch bucket's versions, and its end", out)
	}
	want := bytes.Repeat(func() []byte {
		b := make([]byte, 256)
		for i := range b {
			b[i] = byte(i)
		}
		return b
	}(), 9<<12)
	for _, k := range []string{"train/big.bin", "archive/big.bin"} {
		got, err := c.GetObject(context.Background(), &sdk.GetObjectInput{Bucket: aws.String("from-boto3"), Key: aws.String(k)})
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(got.Body)
		got.Body.Close()
		if err != nil || !bytes.Equal(b, want) {
			t.Fatalf("%s holds %d bytes (%v), want the %d that boto3 put", k, len(b), err, len(want))
		}
	}
	if _, err := c.HeadBucket(context.Background(), &sdk.HeadBucketInput{Bucket: aws.String("scratch")}); err == nil {
		t.Error("the bucket that boto3 emptied and deleted is still there")
	}
}

// TestInterruptedPutLeavesTheOldObject: a PUT whose body stops halfway (a
// client or a server killed during an upload) leaves the object as it
// was, never half-written under its key.
func TestInterruptedPutLeavesTheOldObject(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "models")
	defer ts.Close()
	ctx := context.Background()
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("models"), Key: aws.String("m.tar.gz"), Body: strings.NewReader("old")}); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "PUT /models/m.tar.gz HTTP/1.1\r\nHost: %s\r\nContent-Length: 100000\r\n\r\n%s", strings.TrimPrefix(ts.URL, "http://"), strings.Repeat("n", 50000))
	time.Sleep(200 * time.Millisecond)
	conn.Close()
	time.Sleep(200 * time.Millisecond)
	out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("m.tar.gz")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(out.Body)
	if string(b) != "old" {
		t.Fatalf("after an interrupted PUT the object holds %d bytes (%.10q…), want the old object", len(b), b)
	}
}

// uploadParts uploads bodies as the parts 1, 2, ... of the multipart upload
// id of bucket/key, and returns them as CompleteMultipartUpload lists them.
func uploadParts(t *testing.T, c *sdk.Client, bucket, key string, id *string, bodies ...[]byte) []types.CompletedPart {
	t.Helper()
	var parts []types.CompletedPart
	for i, body := range bodies {
		n := aws.Int32(int32(i + 1))
		out, err := c.UploadPart(context.Background(), &sdk.UploadPartInput{Bucket: aws.String(bucket), Key: aws.String(key), UploadId: id, PartNumber: n, Body: bytes.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: n})
	}
	return parts
}

// TestClientGoneIsNoError: a client that resets its connection midway
// through a GET's body is no failure of the store. gofakes3 took the
// failed write for an internal error, which went to the server's log at
// ERROR for every download stopped by hand.
func TestClientGoneIsNoError(t *testing.T) {
	srv, ts, c := serve(t, t.TempDir())
	defer ts.Close()
	// The log goes to a file, which the test reads while the server's
	// goroutines write it.
	logPath := filepath.Join(t.TempDir(), "log")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	srv.SetLog(slog.New(slog.NewTextHandler(logFile, &slog.HandlerOptions{Level: slog.LevelDebug})))
	logged := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	if _, err := c.CreateBucket(context.Background(), &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 2<<20) // 32 MiB: more than the sockets' buffers hold
	if _, err := c.PutObject(context.Background(), &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /bkt/big HTTP/1.1\r\nHost: %s\r\n\r\n", strings.TrimPrefix(ts.URL, "http://"))
	if _, err := io.ReadFull(conn, make([]byte, 64<<10)); err != nil {
		t.Fatal(err)
	}
	conn.(*net.TCPConn).SetLinger(0) // a reset, not a close: the server's next write fails at once
	conn.Close()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logged(), "went away") && !strings.Contains(logged(), "level=ERROR") {
		if time.Now().After(deadline) {
			t.Fatalf("nothing logged of the GET cut short within 10 s: %q", logged())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(logged(), "level=ERROR") {
		t.Errorf("a GET that its client cut short was logged as the store's failure:\n%s", logged())
	}
}
