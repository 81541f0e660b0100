package s3_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestMetadataAsS3Keeps: an object keeps what S3 keeps of the request
// that wrote it (its x-amz-meta-* and content headers), not the
// request's other x-amz-* headers, which gofakes3 kept and answered on
// every read (the writer's x-amz-security-token among them); a
// PutObject over an object replaces its metadata, as on S3, where
// gofakes3 merged the old object's in; and an object that an earlier
// store wrote with such headers is read without them.
func TestMetadataAsS3Keeps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt", "legacy")
	defer ts.Close()
	ctx := context.Background()
	const token = "THE-WRITERS-SESSION-TOKEN"
	withToken := sdk.New(sdk.Options{Region: "us-east-1", BaseEndpoint: aws.String(ts.URL), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("k", "s", token)})

	// head is the answer's header to a HEAD and a GET of bkt/key.
	head := func(bucket, key string) []http.Header {
		t.Helper()
		var hs []http.Header
		for _, m := range []string{http.MethodHead, http.MethodGet} {
			req, _ := http.NewRequest(m, ts.URL+"/"+bucket+"/"+key, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("%s %s/%s: %s", m, bucket, key, resp.Status)
			}
			hs = append(hs, resp.Header)
		}
		return hs
	}
	// check fails t unless each answer gives want's headers and none of
	// the request's that S3 does not keep.
	check := func(what string, hs []http.Header, want map[string]string, not ...string) {
		t.Helper()
		for _, h := range hs {
			for k, v := range want {
				if h.Get(k) != v {
					t.Errorf("%s: %s is %q, want %q", what, k, h.Get(k), v)
				}
			}
			for _, k := range append(not, "X-Amz-Security-Token", "X-Amz-Date", "X-Amz-Content-Sha256", "X-Amz-Copy-Source", "X-Amz-Checksum-Algorithm", "X-Amz-Sdk-Checksum-Algorithm", "X-Amz-Decoded-Content-Length", "X-Amz-Trailer") {
				if v := h.Values(k); len(v) > 0 {
					t.Errorf("%s: the answer gives %s %q", what, k, v)
				}
			}
			for k, v := range h {
				if strings.Contains(strings.Join(v, ","), token) {
					t.Errorf("%s: the answer gives the writer's session token as %s", what, k)
				}
			}
		}
	}

	if _, err := withToken.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), Body: strings.NewReader("first"),
		Metadata: map[string]string{"a": "1"}, ContentType: aws.String("text/plain"), ContentDisposition: aws.String("attachment")}); err != nil {
		t.Fatal(err)
	}
	check("a PutObject", head("bkt", "obj"), map[string]string{"X-Amz-Meta-A": "1", "Content-Type": "text/plain", "Content-Disposition": "attachment"})
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), Body: strings.NewReader("second"),
		Metadata: map[string]string{"b": "2"}}); err != nil {
		t.Fatal(err)
	}
	check("a PutObject over it", head("bkt", "obj"), map[string]string{"X-Amz-Meta-B": "2", "X-Amz-Meta-A": "", "Content-Disposition": ""})
	// On the wire, user metadata is named in lower case, as S3 names it
	// (Go's client makes every name canonical: read the bytes).
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "HEAD /bkt/obj HTTP/1.1\r\nHost: s3\r\nConnection: close\r\n\r\n")
	wire, _ := io.ReadAll(conn)
	conn.Close()
	if !strings.Contains(string(wire), "\r\nx-amz-meta-b: 2\r\n") {
		t.Errorf("the answer names the user metadata otherwise than x-amz-meta-b:\n%s", wire)
	}

	mp, err := withToken.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("parts"),
		Metadata: map[string]string{"c": "3"}, ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("p"), 1<<20)
	part, err := withToken.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("parts"), UploadId: mp.UploadId, PartNumber: aws.Int32(1),
		Body: bytes.NewReader(body), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := withToken.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("parts"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: part.ETag, ChecksumSHA256: part.ChecksumSHA256}}}}); err != nil {
		t.Fatal(err)
	}
	check("a multipart upload's object", head("bkt", "parts"), map[string]string{"X-Amz-Meta-C": "3"})
	if h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("parts"), ChecksumMode: types.ChecksumModeEnabled}); err != nil || aws.ToString(h.ChecksumSHA256) == "" || !strings.HasSuffix(aws.ToString(h.ETag), `-1"`) {
		t.Errorf("the multipart object's checksum and parts are not kept: %v %+v", err, h)
	}

	if _, err := withToken.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("copy"), CopySource: aws.String("bkt/parts")}); err != nil {
		t.Fatal(err)
	}
	check("a copy", head("bkt", "copy"), map[string]string{"X-Amz-Meta-C": "3"})

	// An object whose metadata an earlier store kept with the request's
	// headers.
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("legacy"), Key: aws.String("old"), Body: strings.NewReader("old"),
		Metadata: map[string]string{"d": "4"}}); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(dir, "metadata", "legacy", "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("the legacy bucket's metadata files: %v %v", files, err)
	}
	js, err := os.ReadFile(files[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(js, &m); err != nil {
		t.Fatal(err)
	}
	meta := m["Meta"].(map[string]any)
	meta["X-Amz-Security-Token"], meta["X-Amz-Date"] = token, "20261207T000000Z"
	if js, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(files[0], js, 0o600); err != nil {
		t.Fatal(err)
	}
	check("an object an earlier store wrote", head("legacy", "old"), map[string]string{"X-Amz-Meta-D": "4"})
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("legacy"), Key: aws.String("new"), CopySource: aws.String("legacy/old")}); err != nil {
		t.Fatal(err)
	}
	check("its copy", head("legacy", "new"), map[string]string{"X-Amz-Meta-D": "4"})
}

// TestCopyMetadataDirective: a copy's metadata is its source's
// (x-amz-metadata-directive COPY, the default) or its request's
// (REPLACE), as on S3, where gofakes3 merged the two; a copy of an
// object to itself that changes nothing is refused, as on S3, and one
// that replaces its metadata is how a client changes it.
func TestCopyMetadataDirective(t *testing.T) {
	t.Parallel()
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	if _, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("src"), Body: strings.NewReader("data"),
		Metadata: map[string]string{"a": "1", "b": "source"}, ContentType: aws.String("text/plain")}); err != nil {
		t.Fatal(err)
	}
	// got is bkt/key's user metadata and Content-Type.
	got := func(key string) (map[string]string, string) {
		t.Helper()
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		return h.Metadata, aws.ToString(h.ContentType)
	}
	for _, tc := range []struct {
		what      string
		directive types.MetadataDirective
		meta      map[string]string
		ctype     string
	}{
		{"no directive", "", map[string]string{"a": "1", "b": "source"}, "text/plain"},
		{"COPY", types.MetadataDirectiveCopy, map[string]string{"a": "1", "b": "source"}, "text/plain"},
		{"REPLACE", types.MetadataDirectiveReplace, map[string]string{"b": "request", "c": "3"}, "application/json"},
	} {
		if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dst"), CopySource: aws.String("bkt/src"),
			MetadataDirective: tc.directive, Metadata: map[string]string{"b": "request", "c": "3"}, ContentType: aws.String("application/json")}); err != nil {
			t.Fatalf("%s: %v", tc.what, err)
		}
		if meta, ctype := got("dst"); !maps.Equal(meta, tc.meta) || ctype != tc.ctype {
			t.Errorf("%s: the copy has %v and %s, want %v and %s", tc.what, meta, ctype, tc.meta, tc.ctype)
		}
	}
	for _, tc := range []struct {
		what string
		in   sdk.CopyObjectInput
		code string
	}{
		{"another directive", sdk.CopyObjectInput{Key: aws.String("dst2"), MetadataDirective: "MOVE"}, "InvalidArgument"},
		{"to itself", sdk.CopyObjectInput{Key: aws.String("src")}, "InvalidRequest"},
		{"to itself, COPY", sdk.CopyObjectInput{Key: aws.String("src"), MetadataDirective: types.MetadataDirectiveCopy, Metadata: map[string]string{"z": "9"}}, "InvalidRequest"},
		{"to itself, by its one version", sdk.CopyObjectInput{Key: aws.String("src"), CopySource: aws.String("bkt/src?versionId=null")}, "InvalidRequest"},
	} {
		in := tc.in
		in.Bucket = aws.String("bkt")
		if in.CopySource == nil {
			in.CopySource = aws.String("bkt/src")
		}
		if _, err := c.CopyObject(ctx, &in); apiCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.what, err, tc.code)
		}
	}
	if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("dst2")}); err == nil {
		t.Errorf("a copy of another directive was written")
	}
	if meta, ctype := got("src"); !maps.Equal(meta, map[string]string{"a": "1", "b": "source"}) || ctype != "text/plain" {
		t.Errorf("the refused copies changed the source to %v and %s", meta, ctype)
	}
	if _, err := c.CopyObject(ctx, &sdk.CopyObjectInput{Bucket: aws.String("bkt"), Key: aws.String("src"), CopySource: aws.String("bkt/src"),
		MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"z": "9"}, ContentType: aws.String("text/csv")}); err != nil {
		t.Fatal(err)
	}
	if meta, ctype := got("src"); !maps.Equal(meta, map[string]string{"z": "9"}) || ctype != "text/csv" {
		t.Errorf("a copy to itself with REPLACE left %v and %s", meta, ctype)
	}
	if b, _ := get(t, c, "bkt", "src"); string(b) != "data" {
		t.Errorf("the object copied to itself holds %q", b)
	}
}
