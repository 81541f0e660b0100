package s3_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"hash/crc32"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/feature/s3/transfermanager"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// TestMultipartPartsChecked: an object that the transfer manager
// uploaded in three parts (its default: CRC32, COMPOSITE) is read by its
// DownloadObject part by part, as from S3, and each part checked against
// its own checksum: a byte changed on the store's disk in part 2 fails
// the download with the SDK's checksum error, where before the store
// answered the object as one part whose COMPOSITE checksum no SDK checks,
// and the download took the changed bytes. Part 2 alone is 206 with its
// range, the parts count, the object's ETag and its own CRC32; HeadObject
// of part 3 gives its size; part 4 is not satisfiable. The parts survive
// a restart; a PutObject or a CopyObject over the key makes an object of
// one part. No answer shows the store's own metadata.
func TestMultipartPartsChecked(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	ctx := context.Background()
	const part = 8 << 20 // the transfer manager's
	data := make([]byte, 2*part+part/2)
	rand.Read(data)
	if _, err := transfermanager.New(c).UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	head, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || !strings.HasSuffix(aws.ToString(head.ChecksumCRC32), "-3") || head.PartsCount != nil {
		t.Fatalf("HeadObject: %v, CRC32 %q, parts count %v; want a COMPOSITE CRC32 of 3 parts, and no parts count", err, aws.ToString(head.ChecksumCRC32), head.PartsCount)
	}
	crc := func(b []byte) string { return b64(crc32.NewIEEE(), b) }

	// download reads bucket/key with the transfer manager's
	// DownloadObject, which checks the checksums it is given.
	download := func(c *sdk.Client, key string) ([]byte, error) {
		f, err := os.Create(filepath.Join(t.TempDir(), "got"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := transfermanager.New(c).DownloadObject(ctx, &transfermanager.DownloadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), WriterAt: f}); err != nil {
			return nil, err
		}
		return os.ReadFile(f.Name())
	}
	if got, err := download(c, "big"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("DownloadObject: %d bytes (%v), want the %d put", len(got), err, len(data))
	}

	out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), PartNumber: aws.Int32(2), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, data[part:2*part]) || aws.ToString(out.ContentRange) != "bytes 8388608-16777215/20971520" ||
		aws.ToInt32(out.PartsCount) != 3 || aws.ToString(out.ETag) != aws.ToString(head.ETag) ||
		aws.ToString(out.ChecksumCRC32) != crc(data[part:2*part]) || out.ChecksumType != types.ChecksumTypeComposite {
		t.Errorf("part 2: %d bytes (%v), range %q, parts count %d, ETag %s, CRC32 %q %s; want part 2's bytes, range, 3 parts, ETag %s and CRC32 %q COMPOSITE",
			len(got), err, aws.ToString(out.ContentRange), aws.ToInt32(out.PartsCount), aws.ToString(out.ETag), aws.ToString(out.ChecksumCRC32), out.ChecksumType,
			aws.ToString(head.ETag), crc(data[part:2*part]))
	}
	h3, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), PartNumber: aws.Int32(3)})
	if err != nil || aws.ToInt64(h3.ContentLength) != part/2 || aws.ToInt32(h3.PartsCount) != 3 || h3.ChecksumCRC32 != nil {
		t.Errorf("HeadObject of part 3: %v, %d bytes, parts count %d, CRC32 %q; want %d bytes of 3 parts, no checksum unasked", err, aws.ToInt64(h3.ContentLength), aws.ToInt32(h3.PartsCount), aws.ToString(h3.ChecksumCRC32), part/2)
	}
	var re *awshttp.ResponseError
	var api smithy.APIError
	if _, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), PartNumber: aws.Int32(4)}); !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusRequestedRangeNotSatisfiable || !errors.As(err, &api) || api.ErrorCode() != "InvalidPartNumber" {
		t.Errorf("GetObject of part 4 of 3: %v, want 416 InvalidPartNumber", err)
	}
	// The raw answer: the status, and no header of the store's own.
	req, _ := http.NewRequest(http.MethodGet, ts.URL+"/bkt/big?partNumber=2", nil)
	req.Header.Set("X-Amz-Checksum-Mode", "ENABLED")
	resp, err := ts.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusPartialContent {
		t.Errorf("GET of part 2: %d, want 206", resp.StatusCode)
	}
	for k := range resp.Header {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-qshare") {
			t.Errorf("GET of part 2 answers the store's own %s", k)
		}
	}

	// A restart keeps the parts.
	ts.Close()
	ts, c = start(t, dir)
	defer ts.Close()
	if got, err := download(c, "big"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("DownloadObject after a restart: %d bytes (%v), want the %d put", len(got), err, len(data))
	}
	out, err = c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), PartNumber: aws.Int32(3), ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	out.Body.Close()
	if aws.ToInt32(out.PartsCount) != 3 || aws.ToString(out.ChecksumCRC32) != crc(data[2*part:]) {
		t.Errorf("part 3 after a restart: %d parts, CRC32 %q; want 3, %q", aws.ToInt32(out.PartsCount), aws.ToString(out.ChecksumCRC32), crc(data[2*part:]))
	}

	// A copy, and a PutObject over the key, are objects of one part.
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/big")}); err != nil {
		t.Fatal(err)
	}
	if got, err := download(c, "copy"); err != nil || !bytes.Equal(got, data) {
		t.Errorf("DownloadObject of the copy: %d bytes (%v), want the %d put", len(got), err, len(data))
	}
	for _, key := range []string{"copy", "big"} {
		if key == "big" {
			if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), Body: bytes.NewReader(data[:100])}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), PartNumber: aws.Int32(2)}); !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusRequestedRangeNotSatisfiable {
			t.Errorf("GetObject of part 2 of %s, an object of one part: %v, want 416", key, err)
		}
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), PartNumber: aws.Int32(1)})
		if err != nil || h.PartsCount != nil || strings.Contains(aws.ToString(h.ETag), "-") {
			t.Errorf("HeadObject of part 1 of %s: %v, parts count %v, ETag %s; want the whole object's, of no parts", key, err, h.PartsCount, aws.ToString(h.ETag))
		}
	}

	// A byte changed in part 2 on the store's disk fails the download.
	if _, err := transfermanager.New(c).UploadObject(ctx, &transfermanager.UploadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("big"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	corrupt(t, dir, "bkt", "big") // in part 2: its middle byte
	if _, err := download(c, "big"); err == nil || !strings.Contains(err.Error(), "checksum") {
		t.Errorf("DownloadObject of an object changed on disk in part 2: %v, want the SDK's checksum error", err)
	}
}
