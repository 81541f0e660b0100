package s3_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	s3server "qshare/aws/s3"
)

// checksumOf returns the checksum of algo that a HeadObject (with its
// checksum asked for) gives.
func checksumOf(h *sdk.HeadObjectOutput, algo types.ChecksumAlgorithm) string {
	return aws.ToString(map[types.ChecksumAlgorithm]*string{
		types.ChecksumAlgorithmCrc32: h.ChecksumCRC32, types.ChecksumAlgorithmCrc32c: h.ChecksumCRC32C,
		types.ChecksumAlgorithmCrc64nvme: h.ChecksumCRC64NVME, types.ChecksumAlgorithmSha1: h.ChecksumSHA1,
		types.ChecksumAlgorithmSha256: h.ChecksumSHA256, types.ChecksumAlgorithmSha512: h.ChecksumSHA512,
	}[algo])
}

// sending returns an option of an SDK call that sends value as the
// checksum of algo, computing none of its own.
func sending(algo types.ChecksumAlgorithm, value string) func(*sdk.Options) {
	return func(o *sdk.Options) {
		o.RetryMaxAttempts = 1
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.APIOptions = append(o.APIOptions, smithyhttp.SetHeaderValue("X-Amz-Checksum-"+string(algo), value))
	}
}

// listed is part number n, of out, as CompleteMultipartUpload lists it,
// with its checksum in algo, as UploadPart gave it.
func listed(algo types.ChecksumAlgorithm, n int32, out *sdk.UploadPartOutput) types.CompletedPart {
	p := types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)}
	field := "Checksum" + string(algo) // the SDK's name of its field in both
	reflect.ValueOf(&p).Elem().FieldByName(field).Set(reflect.ValueOf(out).Elem().FieldByName(field))
	return p
}

// oneChecksum is the one Checksum<ALGORITHM> field that v (a pointer to
// an SDK's type) holds, or "".
func oneChecksum(v any) string {
	e := reflect.ValueOf(v).Elem()
	for i := 0; i < e.NumField(); i++ {
		if s, ok := e.Field(i).Interface().(*string); ok && s != nil && strings.HasPrefix(e.Type().Field(i).Name, "Checksum") {
			return *s
		}
	}
	return ""
}

// TestFlexibleChecksums: with the Go SDK, a PutObject or UploadPart that
// sends a checksum of its body in any of the algorithms the SDK computes
// (the SDK computes it, or the caller gives it as a header) is stored when it is the body's,
// and refused with S3's BadDigest when it is not, leaving the object as
// it was, the upload without the part, and nothing in tmp/; so is a part
// whose Content-MD5 is not its body's. A multipart upload over an object
// that had a checksum does not keep it: a GET that checks it reads the
// new object.
func TestFlexibleChecksums(t *testing.T) {
	dir := t.TempDir()
	srv, err := s3server.New(dir)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	sent := map[string]bool{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		for k := range r.Header {
			if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") {
				sent[strings.ToLower(k)] = true
			}
		}
		mu.Unlock()
		srv.ServeHTTP(w, r)
	}))
	defer ts.Close()
	c := client(ts.URL)
	ctx := context.Background()
	once := func(o *sdk.Options) { o.RetryMaxAttempts = 1 }
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	for _, algo := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme,
		types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256, types.ChecksumAlgorithmSha512} {
		key := "k-" + string(algo)
		if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("old"), ChecksumAlgorithm: algo}, once); err != nil {
			t.Fatalf("%s: PutObject with the SDK's checksum: %v", algo, err)
		}
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		oldSum := checksumOf(h, algo)
		if header := "x-amz-checksum-" + strings.ToLower(string(algo)); !sent[header] || oldSum == "" {
			t.Fatalf("%s: the SDK sent no %s (sent %v), or the object keeps none (%q)", algo, header, sent, oldSum)
		}
		// A range is not what the checksum is of: none comes with it.
		if b, err := read(c, "bkt", key, "bytes=0-1"); err != nil || string(b) != "ol" {
			t.Errorf("%s: a ranged GET that asks for the checksum reads %q, %v", algo, b, err)
		}
		// The checksum of "old" with the body "new".
		_, err = c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: strings.NewReader("new")}, sending(algo, oldSum))
		if code, st := apiError(t, err); code != "BadDigest" || st != 400 || !strings.Contains(err.Error(), "The "+string(algo)+" you specified did not match the calculated checksum") {
			t.Errorf("%s: PutObject whose checksum is not its body's: %v, want BadDigest (400)", algo, err)
		}
		out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(out.Body); err != nil || string(b) != "old" {
			t.Errorf("%s: after the refusal the object reads %q (%v), want the old object, its checksum checked", algo, b, err)
		}
		out.Body.Close()

		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumAlgorithm: algo})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId, PartNumber: aws.Int32(1),
			Body: strings.NewReader("new")}, sending(algo, oldSum))
		if code, st := apiError(t, err); code != "BadDigest" || st != 400 {
			t.Errorf("%s: UploadPart whose checksum is not its body's: %v, want BadDigest (400)", algo, err)
		}
		md5Old := md5.Sum([]byte("old"))
		_, err = c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId, PartNumber: aws.Int32(1),
			Body: strings.NewReader("new"), ContentMD5: aws.String(base64.StdEncoding.EncodeToString(md5Old[:]))}, once)
		if code, st := apiError(t, err); code != "BadDigest" || st != 400 {
			t.Errorf("%s: UploadPart whose Content-MD5 is not its body's: %v, want BadDigest (400)", algo, err)
		}
		if l, err := c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId}); err != nil || len(l.Parts) != 0 {
			t.Errorf("%s: after the refused parts the upload lists %d parts (%v)", algo, len(l.Parts), err)
		}
		p, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId, PartNumber: aws.Int32(1),
			Body: strings.NewReader("new"), ChecksumAlgorithm: algo}, once)
		if err != nil {
			t.Fatalf("%s: UploadPart with the SDK's checksum: %v", algo, err)
		}
		if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{listed(algo, 1, p)}}}); err != nil {
			t.Fatal(err)
		}
		out, err = c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(out.Body); err != nil || string(b) != "new" {
			t.Errorf("%s: the multipart upload's object reads %q (%v), want \"new\"", algo, b, err)
		}
		out.Body.Close()
	}
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files", n)
	}
}

// rawPut sends a PUT of body to url with headers, and returns the
// answer's status and S3 error code.
func rawPut(t *testing.T, url string, headers map[string]string, body string) (int, string) {
	t.Helper()
	status, doc := raw(t, http.MethodPut, url, headers, strings.NewReader(body))
	var e struct{ Code string }
	xml.Unmarshal([]byte(doc), &e) //nolint:errcheck // a 200 has no error document
	return status, e.Code
}

// TestChecksumRefusals: a checksum S3 would not take (an algorithm it does
// not know, by header, by x-amz-sdk-checksum-algorithm or as a trailer; a
// value that is no checksum of its algorithm; two checksums; a value
// with a copy, which has no body to check; an
// x-amz-sdk-checksum-algorithm of another algorithm than the one sent, or
// of one when none is sent) is
// S3's InvalidRequest (400), and stores nothing; an aws-chunked body with
// a CRC64NVME trailer, and one whose chunks are signed (without
// authentication, which refuses them), are stored as their decoded bytes;
// another STREAMING- form is NotImplemented.
func TestChecksumRefusals(t *testing.T) {
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	defer ts.Close()
	ctx := context.Background()
	mustPut(t, c, "src", "src")
	crc32Hello := "NhCmhg==" // CRC32 of "hello"
	chunkedHeaders := func(trailer string) map[string]string {
		return map[string]string{"X-Amz-Content-Sha256": "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked",
			"X-Amz-Trailer": trailer, "X-Amz-Decoded-Content-Length": "5"}
	}
	for _, tc := range []struct {
		what    string
		headers map[string]string
		body    string
		status  int
		code    string
	}{
		{"x-amz-sdk-checksum-algorithm MD4", map[string]string{"X-Amz-Sdk-Checksum-Algorithm": "MD4"}, "hello", 400, "InvalidRequest"},
		{"x-amz-checksum-md4", map[string]string{"X-Amz-Checksum-Md4": crc32Hello}, "hello", 400, "InvalidRequest"},
		{"x-amz-checksum-xxhash64", map[string]string{"X-Amz-Checksum-Xxhash64": "AAAAAAAAAAA="}, "hello", 400, "InvalidRequest"},
		{"an MD5 of another body", map[string]string{"X-Amz-Checksum-Md5": "AAAAAAAAAAAAAAAAAAAAAA=="}, "hello", 400, "BadDigest"},
		{"a CRC32 that is not base64", map[string]string{"X-Amz-Checksum-Crc32": "!!!!"}, "hello", 400, "InvalidRequest"},
		{"a CRC32 of 8 bytes", map[string]string{"X-Amz-Checksum-Crc32": "AAAAAAAAAAA="}, "hello", 400, "InvalidRequest"},
		{"two checksums", map[string]string{"X-Amz-Checksum-Crc32": crc32Hello, "X-Amz-Checksum-Sha1": "qvTGHdzF6KLavt4PO0gs2a6pQ00="}, "hello", 400, "InvalidRequest"},
		{"x-amz-sdk-checksum-algorithm of another", map[string]string{"X-Amz-Checksum-Crc32": crc32Hello, "X-Amz-Sdk-Checksum-Algorithm": "SHA256"}, "hello", 400, "InvalidRequest"},
		{"x-amz-sdk-checksum-algorithm and no checksum", map[string]string{"X-Amz-Sdk-Checksum-Algorithm": "CRC32"}, "hello", 400, "InvalidRequest"},
		{"a CRC32 of another body", map[string]string{"X-Amz-Checksum-Crc32": "AAAAAA=="}, "hello", 400, "BadDigest"},
		{"a CRC32 with a copy", map[string]string{"X-Amz-Checksum-Crc32": "AAAAAA==", "X-Amz-Copy-Source": "/bkt/src"}, "", 400, "InvalidRequest"},
		{"a trailer of MD4", chunkedHeaders("x-amz-checksum-md4"), chunked([]byte("hello"), 5, "x-amz-checksum-md4:AAAA"), 400, "InvalidRequest"},
		{"a trailer and a header", func() map[string]string {
			h := chunkedHeaders("x-amz-checksum-crc32")
			h["X-Amz-Checksum-Crc32"] = crc32Hello
			return h
		}(), chunked([]byte("hello"), 5, "x-amz-checksum-crc32:"+crc32Hello), 400, "InvalidRequest"},
		{"a CRC64NVME trailer of another body", chunkedHeaders("x-amz-checksum-crc64nvme"), chunked([]byte("hello"), 5, "x-amz-checksum-crc64nvme:AAAAAAAAAAA="), 400, "BadDigest"},
		{"signed chunks of ECDSA", map[string]string{"X-Amz-Content-Sha256": "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD", "X-Amz-Decoded-Content-Length": "5"}, chunked([]byte("hello"), 5, ""), 501, "NotImplemented"},
	} {
		key := strings.ReplaceAll(tc.what, " ", "-")
		if st, code := rawPut(t, ts.URL+"/bkt/"+key, tc.headers, tc.body); st != tc.status || code != tc.code {
			t.Errorf("a PutObject with %s: %d %s, want %d %s", tc.what, st, code, tc.status, tc.code)
		}
		if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)}); err == nil {
			t.Errorf("a PutObject with %s stored an object", tc.what)
		}
	}

	// Taken: the CRC64NVME of "hello" (the SDK's), and signed chunks.
	sig := strings.Repeat("0", 64)
	for key, tc := range map[string]struct {
		headers map[string]string
		body    string
	}{
		"crc64nvme": {chunkedHeaders("x-amz-checksum-crc64nvme"), chunked([]byte("hello"), 5, "x-amz-checksum-crc64nvme:"+crc64nvmeOf(t, c, "hello"))},
		"md5":       {map[string]string{"X-Amz-Checksum-Md5": "XUFAKrxLKna5cZ2REBfFkg=="}, "hello"},
		"signed": {map[string]string{"X-Amz-Content-Sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": "5"},
			fmt.Sprintf("5;chunk-signature=%s\r\nhello\r\n0;chunk-signature=%s\r\n\r\n", sig, sig)},
		"signed-trailer": {map[string]string{"X-Amz-Content-Sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER", "Content-Encoding": "aws-chunked",
			"X-Amz-Trailer": "x-amz-checksum-crc32", "X-Amz-Decoded-Content-Length": "5"},
			fmt.Sprintf("5;chunk-signature=%s\r\nhello\r\n0;chunk-signature=%s\r\nx-amz-checksum-crc32:%s\r\nx-amz-trailer-signature:%s\r\n\r\n", sig, sig, crc32Hello, sig)},
	} {
		if st, code := rawPut(t, ts.URL+"/bkt/"+key, tc.headers, tc.body); st != 200 {
			t.Errorf("%s: %d %s, want 200", key, st, code)
			continue
		}
		if b, _ := get(t, c, "bkt", key); string(b) != "hello" {
			t.Errorf("%s: the object holds %q, want \"hello\"", key, b)
		}
	}
	// A part of signed chunks is stored decoded too.
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp")})
	if err != nil {
		t.Fatal(err)
	}
	st, code := rawPut(t, ts.URL+"/bkt/mp?partNumber=1&uploadId="+aws.ToString(mp.UploadId),
		map[string]string{"X-Amz-Content-Sha256": "STREAMING-AWS4-HMAC-SHA256-PAYLOAD", "Content-Encoding": "aws-chunked", "X-Amz-Decoded-Content-Length": "5"},
		fmt.Sprintf("5;chunk-signature=%s\r\nhello\r\n0;chunk-signature=%s\r\n\r\n", sig, sig))
	l, err := c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: mp.UploadId})
	if err != nil {
		t.Fatal(err)
	}
	if sum := md5.Sum([]byte("hello")); st != 200 || len(l.Parts) != 1 || aws.ToString(l.Parts[0].ETag) != fmt.Sprintf(`"%x"`, sum) {
		t.Errorf("a part of signed chunks: %d %s, parts %+v; want its decoded bytes, ETag %x", st, code, l.Parts, sum)
	}
	if _, err := c.AbortMultipartUpload(ctx, &sdk.AbortMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("mp"), UploadId: mp.UploadId}); err != nil {
		t.Fatal(err)
	}
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files", n)
	}
}

// crc64nvmeOf returns the CRC64NVME of body as the SDK computes it: of an
// object it puts with that algorithm.
func crc64nvmeOf(t *testing.T, c *sdk.Client, body string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("crc64nvme-of"), Body: bytes.NewReader([]byte(body)),
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc64nvme}); err != nil {
		t.Fatal(err)
	}
	h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("crc64nvme-of"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC64NVME) == "" {
		t.Fatalf("no CRC64NVME kept: %v", err)
	}
	return aws.ToString(h.ChecksumCRC64NVME)
}
