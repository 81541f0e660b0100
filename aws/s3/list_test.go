package s3_test

import (
	"context"
	"crypto/md5"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// s3List is how S3 lists keys: those with the prefix, sorted by their
// bytes, each a content or, where the delimiter follows the prefix in
// it, a common prefix: the key up to and with that delimiter.
func s3List(keys []string, prefix, delim string) (contents, prefixes []string) {
	seen := map[string]bool{}
	sort.Strings(keys)
	for _, k := range keys {
		if !strings.HasPrefix(k, prefix) {
			continue
		}
		if i := strings.Index(k[len(prefix):], delim); delim != "" && i >= 0 {
			if p := k[:len(prefix)+i+len(delim)]; !seen[p] {
				seen[p] = true
				prefixes = append(prefixes, p)
			}
			continue
		}
		contents = append(contents, k)
	}
	return contents, prefixes
}

// TestListAsS3Lists: ListObjectsV2 and ListObjects answer every prefix
// and delimiter as S3 would (s3List). The file backend's listing with a
// '/' delimiter answered a prefix of no directory with NoSuchBucket, one
// under an object with a 500, gave "d" the common prefix "d/d/", and
// ignored any other delimiter.
func TestListAsS3Lists(t *testing.T) {
	_, c := startWith(t, t.TempDir(), "bkt")
	ctx := context.Background()
	keys := []string{"d/x", "d/y/z", "d/y/w/v", "e/x", "f", "dd", "d-1", "a+b", "d/y.txt", "é/1"}
	for _, k := range keys {
		mustPutIn(t, c, "bkt", k, k)
	}
	for _, prefix := range []string{"", "d", "d/", "d/y", "d/y/", "d/y/w/", "dd", "e/x", "f", "f/", "zz/", "zz", "é", "a+"} {
		for _, delim := range []string{"", "/", "y", "-", "/x"} {
			wantC, wantP := s3List(keys, prefix, delim)
			in := &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String(prefix)}
			if delim != "" {
				in.Delimiter = aws.String(delim)
			}
			out, err := c.ListObjectsV2(ctx, in)
			if err != nil {
				t.Errorf("prefix %q, delimiter %q: %v", prefix, delim, err)
				continue
			}
			var gotC, gotP []string
			for _, o := range out.Contents {
				gotC = append(gotC, aws.ToString(o.Key))
			}
			for _, p := range out.CommonPrefixes {
				gotP = append(gotP, aws.ToString(p.Prefix))
			}
			if strings.Join(gotC, " ") != strings.Join(wantC, " ") || strings.Join(gotP, " ") != strings.Join(wantP, " ") {
				t.Errorf("prefix %q, delimiter %q: contents %q prefixes %q; want %q %q", prefix, delim, gotC, gotP, wantC, wantP)
			}
			v1, err := c.ListObjects(ctx, &sdk.ListObjectsInput{Bucket: aws.String("bkt"), Prefix: in.Prefix, Delimiter: in.Delimiter})
			if err != nil || len(v1.Contents) != len(wantC) || len(v1.CommonPrefixes) != len(wantP) {
				t.Errorf("ListObjects, prefix %q, delimiter %q: %v, %d contents %d prefixes; want %d %d", prefix, delim, err, len(v1.Contents), len(v1.CommonPrefixes), len(wantC), len(wantP))
			}
		}
	}
}

// TestListPages: ListObjectsV2 (continuation tokens and start-after) and
// ListObjects (markers) page a listing as S3 does: at most MaxKeys keys
// and common prefixes a page, in S3's order, IsTruncated on every page
// but the last, and the pages together the whole listing (s3List). The
// store gave every key in one answer, whatever MaxKeys said.
func TestListPages(t *testing.T) {
	_, c := startWith(t, t.TempDir(), "bkt")
	ctx := context.Background()
	keys := []string{"d/x", "d/y/z", "d/y/w/v", "e/x", "f", "dd", "d-1", "a+b", "d/y.txt", "é/1", "d/y/q", "g/1", "g/2", "h"}
	for _, k := range keys {
		mustPutIn(t, c, "bkt", k, k)
	}
	entries := func(cs []types.Object, ps []types.CommonPrefix) []string {
		var e []string
		for _, o := range cs {
			e = append(e, aws.ToString(o.Key))
		}
		for _, p := range ps {
			e = append(e, aws.ToString(p.Prefix))
		}
		sort.Strings(e)
		return e
	}
	for _, prefix := range []string{"", "d", "d/", "d/y/", "g", "zz"} {
		for _, delim := range []string{"", "/", "y"} {
			wantC, wantP := s3List(keys, prefix, delim)
			want := append(append([]string{}, wantC...), wantP...)
			sort.Strings(want)
			var pfx, dlm *string = aws.String(prefix), nil
			if delim != "" {
				dlm = aws.String(delim)
			}
			for _, max := range []int32{1, 2, 3, 7} {
				name := fmt.Sprintf("prefix %q, delimiter %q, MaxKeys %d", prefix, delim, max)
				// V2, by continuation tokens.
				var got []string
				var token *string
				for page := 0; ; page++ {
					out, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: pfx, Delimiter: dlm, MaxKeys: aws.Int32(max), ContinuationToken: token})
					if err != nil {
						t.Fatalf("%s: %v", name, err)
					}
					e := entries(out.Contents, out.CommonPrefixes)
					if len(e) > int(max) || aws.ToInt32(out.KeyCount) != int32(len(e)) {
						t.Errorf("%s: a page of %d entries, KeyCount %d", name, len(e), aws.ToInt32(out.KeyCount))
					}
					got = append(got, e...)
					truncated := aws.ToBool(out.IsTruncated)
					if truncated != (len(got) < len(want)) || (truncated && out.NextContinuationToken == nil) {
						t.Fatalf("%s: page %d IsTruncated %v (token %v) after %d of %d entries", name, page, truncated, out.NextContinuationToken != nil, len(got), len(want))
					}
					if !truncated {
						break
					}
					token = out.NextContinuationToken
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s: ListObjectsV2's pages %q, want %q", name, got, want)
				}
				// V1, by markers: NextMarker where there is a delimiter,
				// else the page's last key, as S3's documentation says.
				got = nil
				var marker *string
				for {
					out, err := c.ListObjects(ctx, &sdk.ListObjectsInput{Bucket: aws.String("bkt"), Prefix: pfx, Delimiter: dlm, MaxKeys: aws.Int32(max), Marker: marker})
					if err != nil {
						t.Fatalf("%s, ListObjects: %v", name, err)
					}
					e := entries(out.Contents, out.CommonPrefixes)
					got = append(got, e...)
					if !aws.ToBool(out.IsTruncated) || len(e) == 0 {
						break
					}
					if marker = out.NextMarker; marker == nil {
						marker = out.Contents[len(out.Contents)-1].Key
					}
				}
				if strings.Join(got, " ") != strings.Join(want, " ") {
					t.Errorf("%s: ListObjects' pages %q, want %q", name, got, want)
				}
			}
			// start-after: what sorts after it, each key and common
			// prefix of the listing in turn.
			for _, after := range want {
				out, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: pfx, Delimiter: dlm, StartAfter: aws.String(after)})
				if err != nil {
					t.Fatal(err)
				}
				var rest []string
				for _, e := range want {
					if e > after {
						rest = append(rest, e)
					}
				}
				if got := entries(out.Contents, out.CommonPrefixes); strings.Join(got, " ") != strings.Join(rest, " ") {
					t.Errorf("prefix %q, delimiter %q, StartAfter %q: %q, want %q", prefix, delim, after, got, rest)
				}
			}
		}
	}
	// The SDK's own paginator, as the data staging lists a channel.
	var n int
	pg := sdk.NewListObjectsV2Paginator(c, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(4)})
	for pages := 0; pg.HasMorePages(); pages++ {
		out, err := pg.NextPage(ctx)
		if err != nil || pages > len(keys) {
			t.Fatalf("the paginator's page %d: %v", pages, err)
		}
		n += len(out.Contents)
	}
	if n != len(keys) {
		t.Errorf("the paginator listed %d keys, want %d", n, len(keys))
	}
	// max-keys 0: nothing, not truncated, as on S3 (the store listed
	// every key).
	v2, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(0)})
	if err != nil || len(v2.Contents) != 0 || aws.ToBool(v2.IsTruncated) || aws.ToInt32(v2.KeyCount) != 0 || v2.NextContinuationToken != nil {
		t.Errorf("ListObjectsV2 with MaxKeys 0: %v, %d keys, truncated %v", err, len(v2.Contents), aws.ToBool(v2.IsTruncated))
	}
	v1, err := c.ListObjects(ctx, &sdk.ListObjectsInput{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(0), Delimiter: aws.String("/")})
	if err != nil || len(v1.Contents)+len(v1.CommonPrefixes) != 0 || aws.ToBool(v1.IsTruncated) || v1.NextMarker != nil {
		t.Errorf("ListObjects with MaxKeys 0: %v, %d entries, truncated %v", err, len(v1.Contents)+len(v1.CommonPrefixes), aws.ToBool(v1.IsTruncated))
	}
	if _, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("nobkt"), MaxKeys: aws.Int32(0)}); apiCode(err) != "NoSuchBucket" {
		t.Errorf("a bucket that is not there, MaxKeys 0: %v, want NoSuchBucket", err)
	}
}

// TestDeletesLeaveNoDirectories: deleting every key under a prefix leaves
// no directory of it: no common prefix in a listing, a write of its name
// as a key, and the bucket empty for DeleteBucket.
func TestDeletesLeaveNoDirectories(t *testing.T) {
	_, c := startWith(t, t.TempDir(), "bkt")
	ctx := context.Background()
	mustPutIn(t, c, "bkt", "e/x", "x")
	mustPutIn(t, c, "bkt", "q/r/s", "s")
	if _, err := c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("e/x")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteObjects(ctx, &sdk.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("q/r/s")}}}}); err != nil {
		t.Fatal(err)
	}
	out, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt"), Delimiter: aws.String("/")})
	if err != nil || len(out.CommonPrefixes) != 0 || len(out.Contents) != 0 {
		t.Fatalf("listing after the deletes: %v, %d prefixes, %d objects; want none", err, len(out.CommonPrefixes), len(out.Contents))
	}
	mustPutIn(t, c, "bkt", "e", "now an object")
	mustPutIn(t, c, "bkt", "q/r", "now an object")
	for _, k := range []string{"e", "q/r"} {
		if _, err := c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeleteBucket(ctx, &sdk.DeleteBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatalf("DeleteBucket of the emptied bucket: %v", err)
	}
}

// TestLinksAndFIFOsInTheBucket: files that no write of the store makes,
// put in a bucket's directory by hand (a link to a directory outside
// it, a FIFO), are no objects: a listing does not follow the link along
// its prefix, a read of a key through it or of the FIFO finds nothing,
// and the FIFO does not block the store (the backend opened it under its
// lock, and every request waited).
func TestLinksAndFIFOsInTheBucket(t *testing.T) {
	dir := t.TempDir()
	_, c := startWith(t, filepath.Join(dir, "store"), "esc")
	ctx := context.Background()
	outside := filepath.Join(dir, "outside")
	if err := os.MkdirAll(filepath.Join(outside, "top", "alpha", "x"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(outside, "top", "alpha", "x", "secret"), []byte("secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	bucket := filepath.Join(dir, "store", "buckets", "esc")
	if err := os.Symlink(outside, filepath.Join(bucket, "lnk")); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(bucket, "fifo"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"lnk/", "lnk/top/", "lnk/top/alpha/x/", "fi"} {
		for _, d := range []*string{nil, aws.String("/")} {
			out, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("esc"), Prefix: aws.String(p), Delimiter: d})
			if err != nil {
				t.Errorf("list with prefix %q, delimiter %v: %v", p, aws.ToString(d), err)
			} else if len(out.Contents) != 0 || len(out.CommonPrefixes) != 0 {
				t.Errorf("list with prefix %q, delimiter %v: %d objects, %d prefixes; want nothing", p, aws.ToString(d), len(out.Contents), len(out.CommonPrefixes))
			}
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for _, k := range []string{"lnk/top/alpha/x/secret", "fifo", "lnk"} {
		_, err := c.GetObject(rctx, &sdk.GetObjectInput{Bucket: aws.String("esc"), Key: aws.String(k)})
		if code, status := apiError(t, err); code != "NoSuchKey" || status != http.StatusNotFound {
			t.Errorf("GetObject of %q: %s %d, want 404 NoSuchKey", k, code, status)
		}
	}
	mustPutIn(t, c, "esc", "after", "the store still answers")
}

// TestMetadataOutOfDate: an object whose metadata no longer describes its
// file keeps a true ETag. Only its time changed (a data directory copied
// without the files' times): the ETag it was put with. A file put by
// hand, with no metadata, or one whose size changed: the MD5 of its
// bytes. gofakes3's backend hashed the metadata file instead, and kept
// that, and answered a file of no metadata with a 500.
func TestMetadataOutOfDate(t *testing.T) {
	dir := t.TempDir()
	_, c := startWith(t, dir, "bkt")
	ctx := context.Background()
	mustPutIn(t, c, "bkt", "a", "hello")
	md5hex := func(s string) string { return fmt.Sprintf(`"%x"`, md5.Sum([]byte(s))) }
	file := func(k string) string { return filepath.Join(dir, "buckets", "bkt", filepath.FromSlash(k)) }
	if err := os.Chtimes(file("a"), time.Now(), time.Now().Add(-time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(file("hand/f")), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file("hand/f"), []byte("by hand"), 0o600); err != nil {
		t.Fatal(err)
	}
	check := func(k, body string) {
		t.Helper()
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k)})
		if err != nil {
			t.Fatalf("HeadObject of %s: %v", k, err)
		}
		if aws.ToString(h.ETag) != md5hex(body) {
			t.Errorf("HeadObject of %s: ETag %s; want %s", k, aws.ToString(h.ETag), md5hex(body))
		}
		if b, _ := get(t, c, "bkt", k); string(b) != body {
			t.Errorf("GetObject of %s: %q, want %q", k, b, body)
		}
	}
	out, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("bkt")})
	if err != nil || len(out.Contents) != 2 || aws.ToString(out.Contents[0].ETag) != md5hex("hello") || aws.ToString(out.Contents[1].ETag) != md5hex("by hand") {
		t.Errorf("listing: %v %+v; want a and hand/f with the MD5s of their bytes", err, out)
	}
	check("a", "hello")
	check("hand/f", "by hand")
	if err := os.WriteFile(file("a"), []byte("hello, longer"), 0o600); err != nil {
		t.Fatal(err)
	}
	check("a", "hello, longer")
}
