package s3_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
)

// files lists the regular files under dir, with their sizes.
func files(t *testing.T, dir string) map[string]int64 {
	t.Helper()
	out := map[string]int64{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			out[p] = fi.Size()
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestUploadPartOfNoUpload: a part sent to an upload that does not exist,
// or that is another key's or another bucket's, is refused with
// NoSuchUpload before its body is read, and nothing is written to the
// data directory; the real upload goes on unharmed.
func TestUploadPartOfNoUpload(t *testing.T) {
	dir := t.TempDir()
	ts, c := start(t, dir)
	defer ts.Close()
	ctx := context.Background()
	for _, b := range []string{"bkt", "other"} {
		if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
	}
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	id := aws.ToString(mp.UploadId)
	before := files(t, dir)
	body := bytes.Repeat([]byte("p"), 1<<20)
	for _, tc := range []struct{ what, bucket, key, id string }{
		{"an ID never given", "bkt", "obj", "12345"},
		{"an ID that is no number", "bkt", "obj", "../../x"},
		{"the upload's ID for another key", "bkt", "obj2", id},
		{"the upload's ID in another bucket", "other", "obj", id},
	} {
		_, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String(tc.bucket), Key: aws.String(tc.key), UploadId: aws.String(tc.id),
			PartNumber: aws.Int32(1), Body: bytes.NewReader(body)})
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "NoSuchUpload" {
			t.Errorf("%s: %v, want NoSuchUpload", tc.what, err)
		}
		if after := files(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
			t.Errorf("%s: the data directory went from %v to %v", tc.what, before, after)
		}
	}

	// The answer comes before the body: of a part of 64 MiB, only the
	// headers and 1 KiB are sent, and NoSuchUpload comes back all the same.
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /bkt/obj?partNumber=1&uploadId=999 HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s",
		strings.TrimPrefix(ts.URL, "http://"), 64<<20, strings.Repeat("p", 1024))
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a part of no upload whose body has not come: %v", err)
	}
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("a part of no upload whose body has not come: %s, want 404 NoSuchUpload", resp.Status)
	}
	if !resp.Close {
		t.Errorf("the connection stays open after an answer that left the body's rest on the wire, to be read as the next request")
	}
	resp.Body.Close()
	if after := files(t, dir); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("the data directory went from %v to %v", before, after)
	}

	// A body of 1 MiB, sent whole without waiting (as the Go SDK sends a
	// part below 2 MB): the answer comes after it, on a connection kept
	// open for the next request. A connection closed under a client still
	// writing is reset, and the client sees the reset, not NoSuchUpload.
	keep, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer keep.Close()
	keep.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(keep)
	for i := range 2 {
		fmt.Fprintf(keep, "PUT /bkt/obj?partNumber=1&uploadId=999 HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s",
			strings.TrimPrefix(ts.URL, "http://"), 1<<20, strings.Repeat("p", 1<<20))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d on one connection: a part of no upload sent whole: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound || resp.Close {
			t.Fatalf("request %d on one connection: a part of no upload sent whole: %s (close: %v), want 404 NoSuchUpload on a connection kept open", i+1, resp.Status, resp.Close)
		}
	}

	// The upload itself is whole.
	parts := uploadParts(t, c, "bkt", "obj", mp.UploadId, []byte("only"))
	if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
}

// TestUploadPartCutShort: a part whose body ends before its Content-Length
// (the client half-closes its connection after 1 KiB of 1 MiB) is the
// client's fault: 400 IncompleteBody, never a 500, and no part is kept;
// the upload goes on unharmed.
func TestUploadPartCutShort(t *testing.T) {
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	defer ts.Close()
	ctx := context.Background()
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /bkt/obj?partNumber=1&uploadId=%s HTTP/1.1\r\nHost: %s\r\nContent-Length: %d\r\n\r\n%s",
		aws.ToString(mp.UploadId), strings.TrimPrefix(ts.URL, "http://"), 1<<20, strings.Repeat("p", 1024))
	conn.(*net.TCPConn).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no answer to a part cut short: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "IncompleteBody") {
		t.Errorf("a part cut short: %s %s, want 400 IncompleteBody", resp.Status, b)
	}
	l, err := c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Parts) != 0 {
		t.Errorf("the part cut short is listed: %+v", l.Parts)
	}
	parts := uploadParts(t, c, "bkt", "obj", mp.UploadId, []byte("whole"))
	if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatal(err)
	}
}

// TestListParts: ListParts gives each part's data's size, its ETag (the
// MD5 of its data, as UploadPart answered it) and when it came, by part
// number, a page at a time; a part sent again replaces the first.
func TestListParts(t *testing.T) {
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now().Add(-time.Second).Truncate(time.Second)
	bodies := [][]byte{bytes.Repeat([]byte("a"), 5<<20+1), bytes.Repeat([]byte("b"), 3<<20), []byte("tail")}
	// Part 3 first, then 1 and 2; then part 2 again, of another size.
	sent := map[int32][]byte{}
	etags := map[int32]string{}
	for _, n := range []int32{3, 1, 2, 2} {
		body := bodies[n-1]
		if sent[n] != nil {
			body = bytes.Repeat([]byte("c"), 1000)
		}
		out, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		sent[n], etags[n] = body, aws.ToString(out.ETag)
		if want := fmt.Sprintf(`"%x"`, md5.Sum(body)); etags[n] != want {
			t.Errorf("part %d: UploadPart's ETag %s, want the MD5 of its data %s", n, etags[n], want)
		}
	}
	var got []types.Part
	in := &sdk.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("obj"), UploadId: mp.UploadId, MaxParts: aws.Int32(2)}
	for pages := 0; ; pages++ {
		out, err := c.ListParts(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		if len(out.Parts) > 2 || pages > 2 {
			t.Fatalf("ListParts of at most 2 gave %d parts on page %d", len(out.Parts), pages)
		}
		got = append(got, out.Parts...)
		if !aws.ToBool(out.IsTruncated) {
			break
		}
		in.PartNumberMarker = out.NextPartNumberMarker
	}
	if len(got) != 3 {
		t.Fatalf("ListParts gave %d parts, want 3", len(got))
	}
	for i, p := range got {
		n := int32(i + 1)
		if aws.ToInt32(p.PartNumber) != n || aws.ToInt64(p.Size) != int64(len(sent[n])) || aws.ToString(p.ETag) != etags[n] {
			t.Errorf("part %d listed as number %d, size %d, ETag %s; want size %d, ETag %s",
				n, aws.ToInt32(p.PartNumber), aws.ToInt64(p.Size), aws.ToString(p.ETag), len(sent[n]), etags[n])
		}
		if lm := aws.ToTime(p.LastModified); lm.Before(begin) || lm.After(time.Now().Add(time.Second)) {
			t.Errorf("part %d: LastModified %v, not the time it came (after %v)", n, lm, begin)
		}
	}
}

// TestAbortIdleUploads: SweepIdleUploads aborts, at its start and then
// periodically, an upload that no part has come to for longer than its
// bound: its parts' files are gone and ListMultipartUploads no longer
// shows it. An upload whose part is still coming, slowly, for longer
// than the bound is kept and completes; a completed upload's object is
// unaffected.
func TestAbortIdleUploads(t *testing.T) {
	dir := t.TempDir()
	srv, ts, c := serve(t, dir)
	defer ts.Close()
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		t.Fatal(err)
	}
	create := func(key string) *string {
		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		return mp.UploadId
	}
	complete := func(key string, id *string, parts []types.CompletedPart) {
		t.Helper()
		if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String(key), UploadId: id,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			t.Fatal(err)
		}
	}
	done := create("done")
	complete("done", done, uploadParts(t, c, "bkt", "done", done, []byte("whole")))
	idle := create("idle")
	uploadParts(t, c, "bkt", "idle", idle, bytes.Repeat([]byte("i"), 1<<20), []byte("tail"))
	partsDir := filepath.Join(dir, "tmp", "parts", aws.ToString(idle))
	if n := len(files(t, partsDir)); n != 2 {
		t.Fatalf("the idle upload keeps %d part files, want 2", n)
	}
	slow := create("slow")

	const bound = 500 * time.Millisecond
	stop := make(chan struct{})
	swept := make(chan struct{})
	aborted := make(chan int, 100)
	go func() {
		defer close(swept)
		srv.SweepIdleUploads(bound, stop, func(n int) { aborted <- n })
	}()
	defer func() { close(stop); <-swept }()

	// A part of the slow upload that trickles in for almost five times the
	// bound.
	pr, pw := io.Pipe()
	go func() {
		for range 6 {
			time.Sleep(400 * time.Millisecond)
			pw.Write(bytes.Repeat([]byte("s"), 1000))
		}
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPut, ts.URL+"/bkt/slow?partNumber=1&uploadId="+aws.ToString(slow), pr)
	req.ContentLength = 6000
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("the slow part, coming for longer than the bound, was refused: %s", resp.Status)
	}
	complete("slow", slow, []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: aws.String(resp.Header.Get("ETag"))}})

	// By now the idle upload has been idle for over four times the bound.
	if n := <-aborted; n != 1 {
		t.Errorf("the sweep aborted %d uploads, want the idle one", n)
	}
	if _, err := os.Stat(partsDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the aborted upload's parts are still there: %v", err)
	}
	l, err := c.ListMultipartUploads(ctx, &sdk.ListMultipartUploadsInput{Bucket: aws.String("bkt")})
	if err != nil || len(l.Uploads) != 0 {
		t.Fatalf("ListMultipartUploads after the sweep: %v %+v", err, l)
	}
	_, err = c.ListParts(ctx, &sdk.ListPartsInput{Bucket: aws.String("bkt"), Key: aws.String("idle"), UploadId: idle})
	var api smithy.APIError
	if !errors.As(err, &api) || api.ErrorCode() != "NoSuchUpload" {
		t.Errorf("ListParts of the aborted upload: %v, want NoSuchUpload", err)
	}
	for key, want := range map[string]string{"done": "whole", "slow": strings.Repeat("s", 6000)} {
		out, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		got, _ := io.ReadAll(out.Body)
		out.Body.Close()
		if string(got) != want {
			t.Errorf("%s holds %d bytes, want %d", key, len(got), len(want))
		}
	}
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files after the sweep and the completions", n)
	}
}

// TestCompletedUpload: the object of a completed multipart upload (joined
// from its parts' files, beside the backend's PutObject) is whole, keeps
// the type and metadata its upload began with, and has as ETag, in
// HeadObject's and GetObject's answers too, the MD5 of its parts' MD5s
// and their number that CompleteMultipartUpload answered; so it stays
// after a restart.
func TestCompletedUpload(t *testing.T) {
	dir := t.TempDir()
	ts, c := startWith(t, dir, "bkt")
	ctx := context.Background()
	mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m/model.tar.gz"),
		ContentType: aws.String("application/x-tar"), Metadata: map[string]string{"job": "j1"}})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := bytes.Repeat([]byte("1"), 5<<20), bytes.Repeat([]byte("2"), 1234)
	parts := uploadParts(t, c, "bkt", "m/model.tar.gz", mp.UploadId, p1, p2)
	out, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("m/model.tar.gz"), UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		t.Fatal(err)
	}
	s1, s2 := md5.Sum(p1), md5.Sum(p2)
	sum := md5.Sum(append(s1[:], s2[:]...))
	if want := fmt.Sprintf(`"%x-2"`, sum); aws.ToString(out.ETag) != want {
		t.Errorf("CompleteMultipartUpload's ETag %s, want %s", aws.ToString(out.ETag), want)
	}
	for _, restart := range []bool{false, true} {
		if restart {
			ts.Close()
			ts, c = start(t, dir)
		}
		h, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m/model.tar.gz")})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToInt64(h.ContentLength) != int64(len(p1)+len(p2)) || aws.ToString(h.ContentType) != "application/x-tar" || h.Metadata["job"] != "j1" ||
			aws.ToString(h.ETag) != fmt.Sprintf(`"%x-2"`, sum) || h.PartsCount != nil {
			t.Errorf("restart %v: HeadObject gave length %d, type %s, metadata %v, ETag %s", restart, aws.ToInt64(h.ContentLength), aws.ToString(h.ContentType), h.Metadata, aws.ToString(h.ETag))
		}
		g, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("m/model.tar.gz")})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(g.Body)
		g.Body.Close()
		if !bytes.Equal(got, append(append([]byte(nil), p1...), p2...)) {
			t.Errorf("restart %v: the object holds %d bytes, not its parts joined", restart, len(got))
		}
		if aws.ToString(g.ETag) != fmt.Sprintf(`"%x-2"`, sum) {
			t.Errorf("restart %v: GetObject gave ETag %s", restart, aws.ToString(g.ETag))
		}
	}
	ts.Close()
	if n := len(files(t, filepath.Join(dir, "tmp"))); n != 0 {
		t.Errorf("tmp/ holds %d files after the completion", n)
	}
}

// BenchmarkCompleteMultipartUpload times CompleteMultipartUpload alone, of
// an upload of 8 parts of 8 MiB (random data) through the Go SDK: what
// the store does once the last part has come (join, sync, commit), the
// tail of every model's upload.
func BenchmarkCompleteMultipartUpload(b *testing.B) {
	_, ts, c := serve(b, b.TempDir())
	defer ts.Close()
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("bkt")}); err != nil {
		b.Fatal(err)
	}
	part := make([]byte, 8<<20)
	rand.Read(part)
	b.SetBytes(8 * int64(len(part)))
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("model.tar.gz")})
		if err != nil {
			b.Fatal(err)
		}
		var parts []types.CompletedPart
		for n := int32(1); n <= 8; n++ {
			out, err := c.UploadPart(ctx, &sdk.UploadPartInput{Bucket: aws.String("bkt"), Key: aws.String("model.tar.gz"), UploadId: mp.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(part)})
			if err != nil {
				b.Fatal(err)
			}
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(n)})
		}
		b.StartTimer()
		if _, err := c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("bkt"), Key: aws.String("model.tar.gz"), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
			b.Fatal(err)
		}
	}
}
