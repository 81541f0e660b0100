package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	s3server "qshare/aws/s3"
	"qshare/aws/s3/s3test"
	"qshare/internal/python"
)

// b64 is the base64 of h's sum of b.
func b64(h hash.Hash, b ...[]byte) string {
	for _, p := range b {
		h.Write(p)
	}
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func crc64nvme() hash.Hash { return crc64.New(crc64.MakeTable(0x9a6c9329ac4bc9b5)) }

// serveTLS serves a store kept in dir over HTTPS on a loopback port, and
// returns its server and an SDK client of it on the SDK's defaults: a
// PutObject and each part that send a checksum go aws-chunked, with it
// as their trailer. Each PUT's
// X-Amz-Content-Sha256 and X-Amz-Trailer are counted in puts.
func serveTLS(t *testing.T, dir string, puts *sync.Map) (*httptest.Server, *sdk.Client) {
	t.Helper()
	srv, err := s3server.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPut && puts != nil {
			puts.Store(r.Header.Get("X-Amz-Content-Sha256")+" "+r.Header.Get("X-Amz-Trailer"), true)
		}
		srv.ServeHTTP(w, r)
	}))
	return ts, sdk.New(sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), UsePathStyle: true, HTTPClient: ts.Client(), RetryMaxAttempts: 1,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", "")})
}

// corrupt changes the middle byte of the file of bucket/key in the store
// kept in dir (s3test.Corrupt).
func corrupt(t *testing.T, dir, bucket, key string) {
	t.Helper()
	s3test.Corrupt(t, dir, bucket, key, -1)
}

// corruptFails changes a byte of bkt/key on the store's disk (corrupt),
// and returns what is wrong with the SDK's GET of it then, which must
// fail with the SDK's checksum error ("" where it does).
func corruptFails(t *testing.T, c *sdk.Client, dir, key string) string {
	t.Helper()
	corrupt(t, dir, "bkt", key)
	if _, err := read(c, "bkt", key, ""); err == nil || !strings.Contains(err.Error(), "checksum did not match") {
		return fmt.Sprintf("a GET of %s changed on the disk: %v, want the SDK's checksum error", key, err)
	}
	return ""
}

// storeWithBucket serves a store kept in a new directory (serveTLS, until
// t ends) with the bucket bkt, and returns the directory, the server and
// a client.
func storeWithBucket(t *testing.T) (string, *httptest.Server, *sdk.Client) {
	t.Helper()
	dir := t.TempDir()
	ts, c := serveTLS(t, dir, nil)
	t.Cleanup(ts.Close)
	if _, err := c.CreateBucket(context.Background(), &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	return dir, ts, c
}

// read reads bucket/key with the SDK, asking for its checksum (which the
// SDK then checks where the answer gives one), with rng as its range (""
// for none).
func read(c *sdk.Client, bucket, key, rng string) ([]byte, error) {
	in := &sdk.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := c.GetObject(context.Background(), in)
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// TestTrailerChecksumKept: a PutObject whose CRC32 came as the trailer of
// an aws-chunked body (the Go SDK's default over HTTPS) keeps it, as one
// sent as a header is: HeadObject gives it with its type when asked, and
// only then; a restart keeps it; the SDK's GetObject checks it, so that a
// byte changed on the disk fails the read with the SDK's checksum error;
// a ranged GET gives none (the range is not what it is of), and reads. A
// copy keeps its source's checksum, or one in the algorithm it asks for.
func TestTrailerChecksumKept(t *testing.T) {
	dir := t.TempDir()
	var puts sync.Map
	ts, c := serveTLS(t, dir, &puts)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 256<<10)
	rand.Read(data)
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: bytes.NewReader(data), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
		t.Fatal(err)
	}
	if _, ok := puts.Load("STREAMING-UNSIGNED-PAYLOAD-TRAILER x-amz-checksum-crc32"); !ok {
		t.Fatal("the SDK sent the PutObject with no CRC32 trailer: the test tests nothing")
	}
	want := b64(crc32.NewIEEE(), data)
	head := func(c *sdk.Client, key string) *sdk.HeadObjectOutput {
		t.Helper()
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	if h := head(c, "k"); aws.ToString(h.ChecksumCRC32) != want || h.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("HeadObject gives CRC32 %q of type %q, want %q FULL_OBJECT", aws.ToString(h.ChecksumCRC32), h.ChecksumType, want)
	}
	// Not asked for, none.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/bkt/k", nil)
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	for k := range resp.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
			t.Errorf("a GET that asked for no checksum was given %s", k)
		}
	}
	// A copy keeps its source's; one that asks for SHA-256 gets it.
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/k")}); err != nil {
		t.Fatal(err)
	}
	if h := head(c, "copy"); aws.ToString(h.ChecksumCRC32) != want {
		t.Errorf("the copy keeps CRC32 %q, want its source's %q", aws.ToString(h.ChecksumCRC32), want)
	}
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy256"), CopySource: aws.String("bkt/k"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256}); err != nil {
		t.Fatal(err)
	}
	if h := head(c, "copy256"); aws.ToString(h.ChecksumSHA256) != b64(sha256.New(), data) || h.ChecksumCRC32 != nil {
		t.Errorf("the copy that asked for SHA256 keeps SHA256 %q and CRC32 %q, want %q and none", aws.ToString(h.ChecksumSHA256), aws.ToString(h.ChecksumCRC32), b64(sha256.New(), data))
	}
	ts.Close()

	ts, c = serveTLS(t, dir, nil)
	defer ts.Close()
	if h := head(c, "k"); aws.ToString(h.ChecksumCRC32) != want {
		t.Fatalf("after a restart HeadObject gives CRC32 %q, want %q", aws.ToString(h.ChecksumCRC32), want)
	}
	if b, err := read(c, "bkt", "k", "bytes=10-99"); err != nil || !bytes.Equal(b, data[10:100]) {
		t.Fatalf("a ranged GET with the SDK's checks: %d bytes, %v", len(b), err)
	}
	if msg := corruptFails(t, c, dir, "k"); msg != "" {
		t.Fatal(msg)
	}
}

// TestMultipartChecksums: an upload created with a checksum algorithm
// keeps each part's checksum (sent as the trailer, the SDK's way over
// HTTPS, or computed by the store where a part sends none), which
// ListParts gives back; CompleteMultipartUpload checks each listed
// part's against it (S3's InvalidRequest for one missing, InvalidPart
// for one that differs) and keeps the object's: COMPOSITE, the checksum
// of the parts' checksums and "-N", or FULL_OBJECT, the CRC of the whole
// object, which it answers and HeadObject gives back, and which the SDK
// checks on a GET, so that a byte changed on the disk fails the read.
func TestMultipartChecksums(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts, c := serveTLS(t, dir, nil)
	defer ts.Close()
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	part1, part2 := make([]byte, 5<<20), make([]byte, 1<<20+7)
	rand.Read(part1)
	rand.Read(part2)
	whole := append(append([]byte(nil), part1...), part2...)
	for _, tc := range []struct {
		algo types.ChecksumAlgorithm
		typ  types.ChecksumType
		h    func() hash.Hash
	}{
		{types.ChecksumAlgorithmCrc32, "", func() hash.Hash { return crc32.NewIEEE() }},
		{types.ChecksumAlgorithmCrc32, types.ChecksumTypeFullObject, func() hash.Hash { return crc32.NewIEEE() }},
		{types.ChecksumAlgorithmCrc32c, types.ChecksumTypeFullObject, func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) }},
		{types.ChecksumAlgorithmCrc64nvme, "", crc64nvme},
		{types.ChecksumAlgorithmSha256, types.ChecksumTypeComposite, sha256.New},
	} {
		key := "k-" + string(tc.algo) + "-" + string(tc.typ)
		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumAlgorithm: tc.algo, ChecksumType: tc.typ})
		if err != nil {
			t.Fatal(err)
		}
		p1, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(part1), ChecksumAlgorithm: tc.algo})
		if err != nil {
			t.Fatal(err)
		}
		// The second part sends no checksum: the store computes it.
		p2, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId, PartNumber: aws.Int32(2), Body: bytes.NewReader(part2)},
			func(o *sdk.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
		if err != nil {
			t.Fatal(err)
		}
		sum1, sum2 := b64(tc.h(), part1), b64(tc.h(), part2)
		parts := []types.CompletedPart{listed(tc.algo, 1, p1), listed(tc.algo, 2, p2)}
		if got := []string{oneChecksum(&parts[0]), oneChecksum(&parts[1])}; got[0] != sum1 || got[1] != sum2 {
			t.Fatalf("%s: UploadPart answered the checksums %q, want %q", key, got, []string{sum1, sum2})
		}
		l, err := c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId})
		if err != nil || len(l.Parts) != 2 {
			t.Fatalf("%s: ListParts: %v, %d parts", key, err, len(l.Parts))
		}
		if got := []string{oneChecksum(&l.Parts[0]), oneChecksum(&l.Parts[1])}; got[0] != sum1 || got[1] != sum2 || l.ChecksumAlgorithm != tc.algo {
			t.Errorf("%s: ListParts gives the checksums %q of %q, want %q of %q", key, got, l.ChecksumAlgorithm, []string{sum1, sum2}, tc.algo)
		}

		// One missing, or not the part's, and nothing is stored.
		missing := []types.CompletedPart{parts[0], {ETag: p2.ETag, PartNumber: aws.Int32(2)}}
		_, err = c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: missing}})
		if code, st := apiError(t, err); code != "InvalidRequest" || st != 400 || !strings.Contains(err.Error(), "It was missing for part 2 in the request") {
			t.Errorf("%s: a completion without part 2's checksum: %v, want InvalidRequest (400)", key, err)
		}
		wrong := []types.CompletedPart{listed(tc.algo, 1, p1), listed(tc.algo, 2, p1)}
		wrong[1].ETag = p2.ETag
		_, err = c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: wrong}})
		if code, st := apiError(t, err); code != "InvalidPart" || st != 400 {
			t.Errorf("%s: a completion with part 1's checksum for part 2: %v, want InvalidPart (400)", key, err)
		}
		if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)}); status(t, err) != 404 {
			t.Fatalf("%s: after the refused completions HeadObject: %v, want 404", key, err)
		}

		typ, want := tc.typ, ""
		if typ == "" {
			typ = types.ChecksumTypeComposite
			if tc.algo == types.ChecksumAlgorithmCrc64nvme {
				typ = types.ChecksumTypeFullObject
			}
		}
		if typ == types.ChecksumTypeComposite {
			r1, _ := base64.StdEncoding.DecodeString(sum1)
			r2, _ := base64.StdEncoding.DecodeString(sum2)
			want = b64(tc.h(), r1, r2) + "-2"
		} else {
			want = b64(tc.h(), whole)
		}
		out, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		if err != nil {
			t.Fatal(err)
		}
		answered := aws.ToString(map[types.ChecksumAlgorithm]*string{types.ChecksumAlgorithmCrc32: out.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: out.ChecksumCRC32C,
			types.ChecksumAlgorithmCrc64nvme: out.ChecksumCRC64NVME, types.ChecksumAlgorithmSha256: out.ChecksumSHA256}[tc.algo])
		if answered != want || out.ChecksumType != typ {
			t.Errorf("%s: CompleteMultipartUpload answered %q of type %q, want %q of type %q", key, answered, out.ChecksumType, want, typ)
		}
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if got := checksumOf(h, tc.algo); got != want || h.ChecksumType != typ {
			t.Errorf("%s: HeadObject gives %q of type %q, want %q of type %q", key, got, h.ChecksumType, want, typ)
		}
		if b, err := read(c, "bkt", key, ""); err != nil || !bytes.Equal(b, whole) {
			t.Fatalf("%s: GetObject: %d bytes, %v", key, len(b), err)
		}
		if typ == types.ChecksumTypeFullObject {
			if msg := corruptFails(t, c, dir, key); msg != "" {
				t.Error(msg)
			}
		}
	}
}

// TestUploadChecksumRefusals: an upload whose checksum type its
// algorithm cannot have, or a type without an algorithm, is S3's
// InvalidRequest; so is a part that sends a checksum in another
// algorithm than its upload's.
func TestUploadChecksumRefusals(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	for _, in := range []*sdk.CreateMultipartUploadInput{
		{ChecksumAlgorithm: types.ChecksumAlgorithmSha256, ChecksumType: types.ChecksumTypeFullObject},
		{ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme, ChecksumType: types.ChecksumTypeComposite},
		{ChecksumType: types.ChecksumTypeFullObject},
		{ChecksumAlgorithm: types.ChecksumAlgorithmCrc32, ChecksumType: "PARTIAL"},
	} {
		in.Bucket, in.Key = aws.String("bkt"), aws.String("k")
		_, err := c.CreateMultipartUpload(ctx, in)
		if code, st := apiError(t, err); code != "InvalidRequest" || st != 400 {
			t.Errorf("CreateMultipartUpload of %q %q: %v, want InvalidRequest (400)", in.ChecksumAlgorithm, in.ChecksumType, err)
		}
	}
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("k"), ChecksumAlgorithm: types.ChecksumAlgorithmSha1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("k"), UploadId: mp.UploadId, PartNumber: aws.Int32(1),
		Body: strings.NewReader("part"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}, func(o *sdk.Options) { o.RetryMaxAttempts = 1 })
	if code, st := apiError(t, err); code != "InvalidRequest" || st != 400 || !strings.Contains(err.Error(), "expected checksum Type: sha1, actual checksum Type: crc32") {
		t.Errorf("a CRC32 part of a SHA1 upload: %v, want InvalidRequest (400)", err)
	}
}

// TestBoto3Checksums: boto3's upload_file, in parts with its default
// CRC32, completes (it lists each part's checksum) and keeps the
// object's; download_file and a get_object that asks for the checksum
// read it back; get_object of part 2 gives its bytes, the parts count
// and the part's own CRC32 (before, 416: the store kept no parts); and
// boto3 checks the CRC32 that a put_object kept, and part 2's, so that a
// byte changed on the disk fails their reads.
func TestBoto3Checksums(t *testing.T) {
	t.Parallel()
	py, ok := python.With("boto3")
	if !ok {
		t.Skip("python3 with boto3 is not installed")
	}
	dir := t.TempDir()
	ts, _ := startWith(t, dir, "bkt")
	defer ts.Close()
	const script = `
import boto3, os, sys, zlib, base64
from boto3.s3.transfer import TransferConfig
url, store, dir = sys.argv[1], sys.argv[2], sys.argv[3]
s3 = boto3.client("s3", endpoint_url=url, region_name="us-east-1", aws_access_key_id="k", aws_secret_access_key="s",
                  config=boto3.session.Config(s3={"addressing_style": "path"}))
data = os.urandom(12 << 20)
src = os.path.join(dir, "src")
open(src, "wb").write(data)
s3.upload_file(src, "bkt", "big", Config=TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20))
h = s3.head_object(Bucket="bkt", Key="big", ChecksumMode="ENABLED")
assert h.get("ChecksumCRC32", "").endswith("-3"), h
dst = os.path.join(dir, "dst")
s3.download_file("bkt", "big", dst)
assert open(dst, "rb").read() == data
assert s3.get_object(Bucket="bkt", Key="big", ChecksumMode="ENABLED")["Body"].read() == data
part = s3.get_object(Bucket="bkt", Key="big", PartNumber=2, ChecksumMode="ENABLED")
body = part["Body"].read()
crc2 = base64.b64encode(zlib.crc32(data[5 << 20:10 << 20]).to_bytes(4, "big")).decode()
assert body == data[5 << 20:10 << 20] and part["PartsCount"] == 3 and part.get("ChecksumCRC32") == crc2, {k: v for k, v in part.items() if k != "Body"}
s3.put_object(Bucket="bkt", Key="small", Body=data[:1000])
crc = base64.b64encode(zlib.crc32(data[:1000]).to_bytes(4, "big")).decode()
got = s3.get_object(Bucket="bkt", Key="small", ChecksumMode="ENABLED")
assert got["ChecksumCRC32"] == crc and got["Body"].read() == data[:1000], got
name = os.path.join(store, "buckets", "bkt", "small")
b = bytearray(open(name, "rb").read()); b[500] ^= 0xff; open(name, "wb").write(b)
try:
    s3.get_object(Bucket="bkt", Key="small", ChecksumMode="ENABLED")["Body"].read()
    print("read the changed object")
except Exception as e:
    print("refused:", type(e).__name__)
name = os.path.join(store, "buckets", "bkt", "big")
st = os.stat(name)
b = bytearray(open(name, "rb").read()); b[(5 << 20) + 7] ^= 0xff; open(name, "wb").write(b)
os.utime(name, ns=(st.st_atime_ns, st.st_mtime_ns))
try:
    s3.get_object(Bucket="bkt", Key="big", PartNumber=2, ChecksumMode="ENABLED")["Body"].read()
    print("read the changed part")
except Exception as e:
    print("refused the part:", type(e).__name__)
`
	out, err := exec.Command(py, "-W", "ignore", "-c", script, ts.URL, dir, t.TempDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "refused: FlexibleChecksumError") || !strings.Contains(string(out), "refused the part: FlexibleChecksumError") {
		t.Fatalf("boto3: %v\n%s", err, out)
	}
}

// TestPartNumber: the store answers a GET or HEAD of one part of an
// object put whole as S3 does: part 1 is the whole object, with its checksum where asked (the
// transfer manager reads every object as its part 1 first, and checks
// it); part 2 is not satisfiable; a part number out of S3's range, or
// beside a Range, is refused.
func TestPartNumber(t *testing.T) {
	dir := t.TempDir()
	_, c := serveTLS(t, dir, nil)
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	body := []byte("one piece")
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32}); err != nil {
		t.Fatal(err)
	}
	out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), PartNumber: aws.Int32(1), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, body) || aws.ToString(out.ChecksumCRC32) != b64(crc32.NewIEEE(), body) {
		t.Fatalf("part 1: %q with CRC32 %q, want the whole object with its checksum", got, aws.ToString(out.ChecksumCRC32))
	}
	corrupt(t, dir, "bkt", "k")
	if out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), PartNumber: aws.Int32(1), ChecksumMode: types.ChecksumModeEnabled}); err == nil {
		_, err = io.ReadAll(out.Body)
		out.Body.Close()
		if err == nil || !strings.Contains(err.Error(), "checksum") {
			t.Fatalf("part 1 of an object changed on disk: %v, want the SDK's checksum error", err)
		}
	}
	for _, tc := range []struct {
		part   int32
		rng    string
		status int
		code   string
	}{
		{2, "", http.StatusRequestedRangeNotSatisfiable, "InvalidPartNumber"},
		{10001, "", http.StatusBadRequest, "InvalidArgument"},
		{1, "bytes=0-1", http.StatusBadRequest, "InvalidRequest"},
	} {
		in := &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), PartNumber: aws.Int32(tc.part)}
		if tc.rng != "" {
			in.Range = aws.String(tc.rng)
		}
		_, err := c.GetObject(ctx, in)
		var re *awshttp.ResponseError
		var api smithy.APIError
		if !errors.As(err, &re) || re.HTTPStatusCode() != tc.status || !errors.As(err, &api) || api.ErrorCode() != tc.code {
			t.Errorf("GetObject of part %d (range %q): %v, want %d %s", tc.part, tc.rng, err, tc.status, tc.code)
		}
		_, err = c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k"), PartNumber: aws.Int32(tc.part), Range: in.Range})
		if !errors.As(err, &re) || re.HTTPStatusCode() != tc.status {
			t.Errorf("HeadObject of part %d (range %q): %v, want %d", tc.part, tc.rng, err, tc.status)
		}
	}
}

// TestDefaultChecksum: an object put with no checksum (an SDK told to
// send one only where required, or a plain HTTP PUT) keeps a CRC64NVME
// of its whole body all the same, as S3 does: HeadObject gives it when
// asked, the SDK checks it on a GET, so that a byte changed on the disk
// fails the read, and a copy keeps it.
func TestDefaultChecksum(t *testing.T) {
	dir, ts, c := storeWithBucket(t)
	ctx := context.Background()
	data := make([]byte, 300<<10)
	rand.Read(data)
	want := b64(crc64nvme(), data)
	var sentChecksum bool
	noChecksum := func(o *sdk.Options) {
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
			return s.Finalize.Add(middleware.FinalizeMiddlewareFunc("sent", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
				if r, ok := in.Request.(*smithyhttp.Request); ok {
					for k := range r.Header {
						sentChecksum = sentChecksum || strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") || strings.EqualFold(k, "x-amz-trailer")
					}
				}
				return next.HandleFinalize(ctx, in)
			}), middleware.After)
		})
	}
	put, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("sdk"), Body: bytes.NewReader(data)}, noChecksum)
	if err != nil {
		t.Fatal(err)
	}
	if sentChecksum {
		t.Fatal("the SDK sent a checksum: the test tests nothing")
	}
	if aws.ToString(put.ChecksumCRC64NVME) != want || put.ChecksumType != types.ChecksumTypeFullObject {
		t.Errorf("PutObject answers CRC64NVME %q of type %q, want %q FULL_OBJECT", aws.ToString(put.ChecksumCRC64NVME), put.ChecksumType, want)
	}
	req, _ := http.NewRequest(http.MethodPut, ts.URL+"/bkt/plain", bytes.NewReader(data))
	resp, err := ts.Client().Do(req)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("a plain PUT: %v %v", resp, err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Amz-Checksum-Crc64nvme"); got != want {
		t.Errorf("a plain PUT answers CRC64NVME %q, want %q", got, want)
	}
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/sdk")}); err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"sdk", "plain", "copy"} {
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(h.ChecksumCRC64NVME) != want || h.ChecksumType != types.ChecksumTypeFullObject || h.ChecksumCRC32 != nil {
			t.Errorf("%s: HeadObject gives CRC64NVME %q of type %q (CRC32 %q), want %q FULL_OBJECT alone", key, aws.ToString(h.ChecksumCRC64NVME), h.ChecksumType, aws.ToString(h.ChecksumCRC32), want)
		}
		if b, err := read(c, "bkt", key, ""); err != nil || !bytes.Equal(b, data) {
			t.Errorf("%s: a GET with the SDK's checks: %d bytes, %v", key, len(b), err)
		}
	}
	if msg := corruptFails(t, c, dir, "plain"); msg != "" {
		t.Fatal(msg)
	}
}

// TestDefaultChecksumMultipart: an upload created without a checksum
// algorithm, whose parts send none, keeps a FULL_OBJECT CRC64NVME of the
// whole object, combined from the parts' as S3 adds it: the completion
// answers it, HeadObject gives it, the SDK checks it on a GET, so that a
// byte changed on the disk fails the read.
func TestDefaultChecksumMultipart(t *testing.T) {
	dir, _, c := storeWithBucket(t)
	ctx := context.Background()
	noChecksum := func(o *sdk.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired }
	parts := [][]byte{make([]byte, 5<<20), make([]byte, 5<<20), make([]byte, 777)}
	for _, p := range parts {
		rand.Read(p)
	}
	want := b64(crc64nvme(), parts...)
	up, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")}, noChecksum)
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range parts {
		out, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(p)}, noChecksum)
		if err != nil {
			t.Fatal(err)
		}
		if out.ChecksumCRC32 != nil || out.ChecksumCRC64NVME != nil {
			t.Fatalf("part %d was sent with a checksum (%q, %q): the test tests nothing", i+1, aws.ToString(out.ChecksumCRC32), aws.ToString(out.ChecksumCRC64NVME))
		}
		done = append(done, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(int32(i + 1))})
	}
	out, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}}, noChecksum)
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ChecksumCRC64NVME) != want || out.ChecksumType != types.ChecksumTypeFullObject {
		t.Errorf("CompleteMultipartUpload answers CRC64NVME %q of type %q, want %q FULL_OBJECT", aws.ToString(out.ChecksumCRC64NVME), out.ChecksumType, want)
	}
	h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC64NVME) != want || h.ChecksumType != types.ChecksumTypeFullObject {
		t.Fatalf("HeadObject: %v, CRC64NVME %q; want %q FULL_OBJECT", err, aws.ToString(h.ChecksumCRC64NVME), want)
	}
	if b, err := read(c, "bkt", "mp", ""); err != nil || !bytes.Equal(b, bytes.Join(parts, nil)) {
		t.Fatalf("a GET with the SDK's checks: %d bytes, %v", len(b), err)
	}
	if msg := corruptFails(t, c, dir, "mp"); msg != "" {
		t.Fatal(msg)
	}
}
