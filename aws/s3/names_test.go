package s3_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"io/fs"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	neturl "net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3server "qshare/aws/s3"
)

// tree lists the files under dir, with their contents, as "path=body".
func tree(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		out = append(out, rel+"="+string(b))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// raw sends one request to the store and returns its status and body.
func raw(t *testing.T, method, url string, header map[string]string, body io.Reader) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// hostileStore is a store in root/store with the buckets attk, victim
// (victim/secret/data = "secret") and empty, whose files tree lists.
func hostileStore(t *testing.T) (root, url string, c *sdk.Client) {
	t.Helper()
	root = t.TempDir()
	ts, c := startWith(t, filepath.Join(root, "store"), "attk", "victim", "empty")
	t.Cleanup(ts.Close)
	if _, err := c.PutObject(context.Background(), &sdk.PutObjectInput{Bucket: aws.String("victim"), Key: aws.String("secret/data"), Body: strings.NewReader("secret")}); err != nil {
		t.Fatal(err)
	}
	return root, ts.URL, c
}

// unchanged fails t unless the files under root are before's, and the
// buckets are all there.
func unchanged(t *testing.T, root string, before []string, what string) {
	t.Helper()
	if after := tree(t, root); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Errorf("%s changed the files:\nbefore %q\nafter  %q", what, before, after)
	}
	for _, b := range []string{"attk", "victim", "empty"} {
		if st, err := os.Stat(filepath.Join(root, "store", "buckets", b)); err != nil || !st.IsDir() {
			t.Errorf("%s: the bucket %s is gone (%v)", what, b, err)
		}
	}
}

// TestHostileRequests: what a second look at the store with hostile
// requests found, each refused or answered as S3 would, with nothing
// written, deleted or read outside the bucket that the request names,
// and no 500.
func TestHostileRequests(t *testing.T) {
	ctx := context.Background()

	t.Run("FormUploadRefused", func(t *testing.T) {
		// An HTML form's upload (POST Object) took its key from the
		// form, unchecked: "../" wrote anywhere the server could.
		root, url, _ := hostileStore(t)
		before := tree(t, root)
		for _, key := range []string{"../../../outside/pwned", "../victim/secret/data", "fine"} {
			var b bytes.Buffer
			w := multipart.NewWriter(&b)
			w.WriteField("key", key)
			fw, _ := w.CreateFormFile("file", "f")
			fw.Write([]byte("planted"))
			w.Close()
			status, body := raw(t, http.MethodPost, url+"/attk", map[string]string{"Content-Type": w.FormDataContentType()}, &b)
			if status != http.StatusNotImplemented || !strings.Contains(body, "<Code>NotImplemented</Code>") {
				t.Errorf("form upload of %q: %d %s, want 501 NotImplemented", key, status, body)
			}
		}
		unchanged(t, root, before, "form uploads")
	})

	t.Run("DeleteObjectsKeys", func(t *testing.T) {
		// DeleteObjects' keys come in its XML, past the URL's check.
		root, _, c := hostileStore(t)
		before := tree(t, root)
		for _, bucket := range []string{"attk", "empty"} {
			out, err := c.DeleteObjects(ctx, &sdk.DeleteObjectsInput{Bucket: aws.String(bucket), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
				{Key: aws.String("../victim/secret/data")}, {Key: aws.String(".")}, {Key: aws.String("..")}, {Key: aws.String("../empty")},
				{Key: aws.String("a/")}, {Key: aws.String(strings.Repeat("k", 300))}, {Key: aws.String("not-there")}}}})
			if err != nil {
				t.Fatalf("DeleteObjects on %s: %v", bucket, err)
			}
			refused := map[string]string{}
			for _, e := range out.Errors {
				refused[aws.ToString(e.Key)] = aws.ToString(e.Code)
			}
			for _, k := range []string{"../victim/secret/data", ".", "..", "../empty"} {
				if refused[k] != "InvalidArgument" {
					t.Errorf("DeleteObjects on %s: key %q answered %q, want InvalidArgument", bucket, k, refused[k])
				}
			}
			if len(out.Deleted) != 3 {
				t.Errorf("DeleteObjects on %s: deleted %d keys, want the 3 that no object has", bucket, len(out.Deleted))
			}
		}
		unchanged(t, root, before, "DeleteObjects")
	})

	t.Run("SubresourcesRefused", func(t *testing.T) {
		// gofakes3 does not know ?tagging, ?acl and the like, and took
		// them for the request without them.
		root, url, _ := hostileStore(t)
		before := tree(t, root)
		// Each: the method, the path and query, and the body, if any.
		for _, rq := range []string{
			"PUT /victim/secret/data?tagging <Tagging><TagSet/></Tagging>",
			"PUT /victim/secret/data?acl",
			"PUT /victim/secret/data?legal-hold <LegalHold><Status>ON</Status></LegalHold>",
			"PUT /victim/secret/data?retention",
			"DELETE /victim/secret/data?tagging",
			"GET /victim/secret/data?attributes",
			"DELETE /empty?policy",
			"DELETE /empty?cors",
			"DELETE /empty?tagging",
			"PUT /empty?lifecycle <LifecycleConfiguration/>",
			"GET /victim?policy",
		} {
			f := append(strings.Fields(rq), "")
			status, body := raw(t, f[0], url+f[1], map[string]string{"Content-Type": "application/xml"}, strings.NewReader(f[2]))
			if status != http.StatusNotImplemented || !strings.Contains(body, "<Code>NotImplemented</Code>") {
				t.Errorf("%s: %d %s, want 501 NotImplemented", rq, status, body)
			}
		}
		unchanged(t, root, before, "subresource requests")
		status, body := raw(t, "PATCH", url+"/victim/secret/data", nil, nil)
		if status != http.StatusMethodNotAllowed || !strings.Contains(body, "<Code>MethodNotAllowed</Code>") {
			t.Errorf("PATCH of an object: %d %s, want 405 MethodNotAllowed", status, body)
		}
	})

	t.Run("LongKeys", func(t *testing.T) {
		// A key whose metadata's file name would pass 255 bytes put its
		// data in place, failed its metadata, and left an intent that
		// kept the store from opening again.
		root, url, c := hostileStore(t)
		before := tree(t, root)
		long := strings.Repeat("k", 100) + "/" + strings.Repeat("k", 100) + "/" + strings.Repeat("k", 100)
		for _, k := range []string{long, strings.Repeat("x", 223), strings.Repeat("x", 1025)} {
			_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("attk"), Key: aws.String(k), Body: strings.NewReader("x")})
			if code, status := apiError(t, err); code != "KeyTooLongError" || status != http.StatusBadRequest {
				t.Errorf("PutObject of a key of %d bytes: %s %d, want 400 KeyTooLongError", len(k), code, status)
			}
			_, err = c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("attk"), Key: aws.String(k)})
			if code, _ := apiError(t, err); code != "KeyTooLongError" {
				t.Errorf("CreateMultipartUpload of a key of %d bytes: %s, want KeyTooLongError", len(k), code)
			}
		}
		_, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("attk"), Key: aws.String(long)})
		if _, status := apiError(t, err); status != http.StatusNotFound {
			t.Errorf("HeadObject of a key too long for the store: %d, want 404", status)
		}
		if status, body := raw(t, http.MethodDelete, url+"/attk/"+long, nil, nil); status != http.StatusNoContent {
			t.Errorf("DeleteObject of a key too long for the store: %d %s, want 204", status, body)
		}
		ok := strings.Repeat("y", 222)
		mustPutIn(t, c, "attk", ok, "fits")
		if b, _ := get(t, c, "attk", ok); string(b) != "fits" {
			t.Errorf("a key of 222 bytes reads %q", b)
		}
		if _, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("attk")}); err != nil {
			t.Errorf("listing after the long keys: %v", err)
		}
		// The store opens again over what is left.
		_, c2 := start(t, filepath.Join(root, "store"))
		if b, _ := get(t, c2, "victim", "secret/data"); string(b) != "secret" {
			t.Errorf("after a restart the victim's object reads %q", b)
		}
		_ = before
	})

	t.Run("FolderMarkers", func(t *testing.T) {
		// A key ending in '/' landed in the file of the key without it.
		root, url, c := hostileStore(t)
		mustPutIn(t, c, "attk", "m", "object m")
		mustPutIn(t, c, "attk", "e/x", "object e/x")
		before := tree(t, root)
		for _, k := range []string{"q/", "e/", "m/"} {
			_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("attk"), Key: aws.String(k), Body: strings.NewReader("")})
			if code, status := apiError(t, err); code != "InvalidArgument" || status != http.StatusBadRequest {
				t.Errorf("PutObject of %q: %s %d, want 400 InvalidArgument", k, code, status)
			}
			_, err = c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("attk"), Key: aws.String(k)})
			if code, status := apiError(t, err); code != "NoSuchKey" || status != http.StatusNotFound {
				t.Errorf("GetObject of %q: %s %d, want 404 NoSuchKey", k, code, status)
			}
			if _, err := c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("attk"), Key: aws.String(k)}); err != nil {
				t.Errorf("DeleteObject of %q: %v", k, err)
			}
		}
		unchanged(t, root, before, "folder markers")
		if status, body := raw(t, http.MethodGet, url+"/attk?list-type=2&delimiter=%2F", nil, nil); status != http.StatusOK || !strings.Contains(body, "<Prefix>e/</Prefix>") {
			t.Errorf("listing: %d %s", status, body)
		}
	})

	t.Run("FileAndDirectoryClash", func(t *testing.T) {
		// "f" and "f/g" cannot both be files: a 500 before, which named
		// the data directory.
		root, _, c := hostileStore(t)
		mustPutIn(t, c, "attk", "f", "object f")
		mustPutIn(t, c, "attk", "e/x", "object e/x")
		before := tree(t, root)
		for _, tc := range []struct {
			key, code string
			status    int
		}{{"f/g", "XMinioParentIsObject", http.StatusBadRequest}, {"f/g/h", "XMinioParentIsObject", http.StatusBadRequest}, {"e", "XMinioObjectExistsAsDirectory", http.StatusConflict}} {
			_, err := c.PutObject(ctx, &sdk.PutObjectInput{Bucket: aws.String("attk"), Key: aws.String(tc.key), Body: strings.NewReader("x")})
			code, status := apiError(t, err)
			if code != tc.code || status != tc.status {
				t.Errorf("PutObject of %q: %s %d, want %d %s", tc.key, code, status, tc.status, tc.code)
			}
			if strings.Contains(err.Error(), root) {
				t.Errorf("PutObject of %q: the answer names the data directory: %v", tc.key, err)
			}
			_, err = c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("attk"), Key: aws.String(tc.key)})
			if code, status := apiError(t, err); code != "NoSuchKey" || status != http.StatusNotFound {
				t.Errorf("GetObject of %q: %s %d, want 404 NoSuchKey", tc.key, code, status)
			}
			if _, err := c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("attk"), Key: aws.String(tc.key)}); err != nil {
				t.Errorf("DeleteObject of %q: %v", tc.key, err)
			}
		}
		// A multipart upload's object is refused at its completion.
		mp, err := c.CreateMultipartUpload(ctx, &sdk.CreateMultipartUploadInput{Bucket: aws.String("attk"), Key: aws.String("f/g")})
		if err != nil {
			t.Fatal(err)
		}
		parts := uploadParts(t, c, "attk", "f/g", mp.UploadId, []byte("tail"))
		_, err = c.CompleteMultipartUpload(ctx, &sdk.CompleteMultipartUploadInput{Bucket: aws.String("attk"), Key: aws.String("f/g"), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		if code, status := apiError(t, err); code != "XMinioParentIsObject" || status != http.StatusBadRequest {
			t.Errorf("CompleteMultipartUpload under an object: %s %d, want 400 XMinioParentIsObject", code, status)
		}
		c.AbortMultipartUpload(ctx, &sdk.AbortMultipartUploadInput{Bucket: aws.String("attk"), Key: aws.String("f/g"), UploadId: mp.UploadId})
		unchanged(t, root, before, "clashing writes")
	})

	t.Run("ListingPrefixes", func(t *testing.T) {
		// The backend took a prefix's "../" as the directory above the
		// bucket: the other buckets' names and folders.
		_, _, c := hostileStore(t)
		for _, p := range []string{"../", "../victim/", "../victim/secret/", "./", "a//", "/", ".."} {
			for _, d := range []*string{aws.String("/"), nil} {
				l, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("attk"), Prefix: aws.String(p), Delimiter: d})
				if err != nil || len(l.Contents) != 0 || len(l.CommonPrefixes) != 0 {
					t.Errorf("list attk with prefix %q, delimiter %v: %v, %d objects, %d prefixes; want nothing", p, aws.ToString(d), err, len(l.Contents), len(l.CommonPrefixes))
				}
			}
		}
		l, err := c.ListObjectsV2(ctx, &sdk.ListObjectsV2Input{Bucket: aws.String("victim"), Prefix: aws.String("secret/"), Delimiter: aws.String("/")})
		if err != nil || len(l.Contents) != 1 {
			t.Errorf("list victim with prefix secret/: %v, %+v", err, l)
		}
	})

	t.Run("CopySources", func(t *testing.T) {
		root, url, _ := hostileStore(t)
		before := tree(t, root)
		for _, tc := range []struct{ src, code string }{
			{"attk/../victim/secret/data", "InvalidArgument"},
			{"/attk/../victim/secret/data", "InvalidArgument"},
			{"attk%2F..%2Fvictim%2Fsecret%2Fdata", "InvalidArgument"},
			{"victim/sec%00ret", "InvalidArgument"},
			{"victim/%zz", "InvalidArgument"},
			{"victim", "InvalidArgument"},
			{"no%zz", "InvalidArgument"},
			{"BAD_BUCKET/k", "NoSuchBucket"},
			{"victim/" + strings.Repeat("k", 300), "NoSuchKey"},
		} {
			status, body := raw(t, http.MethodPut, url+"/attk/copy", map[string]string{"X-Amz-Copy-Source": tc.src}, nil)
			if status >= 500 || !strings.Contains(body, "<Code>"+tc.code+"</Code>") {
				t.Errorf("copy from %q: %d %s, want %s", tc.src, status, body, tc.code)
			}
		}
		for _, path := range []string{"/attk/k?partNumber=1&uploadId=", "/attk/k?partNumber=1", "/attk/k?uploadId="} {
			if status, body := raw(t, http.MethodPut, url+path, nil, strings.NewReader("part")); status != http.StatusNotFound || !strings.Contains(body, "<Code>NoSuchUpload</Code>") {
				t.Errorf("PUT %s: %d %s, want 404 NoSuchUpload", path, status, body)
			}
		}
		status, body := raw(t, http.MethodPut, url+"/attk/k?partNumber=1&uploadId=1", map[string]string{"X-Amz-Copy-Source": "victim/secret/data"}, nil)
		if status != http.StatusNotFound || !strings.Contains(body, "<Code>NoSuchUpload</Code>") {
			t.Errorf("UploadPartCopy of no upload: %d %s, want 404 NoSuchUpload", status, body)
		}
		for _, src := range []string{"attk/../victim/secret/data", "victim%2F..%2Fvictim%2Fsecret%2Fdata", "victim/sec%00ret"} {
			status, body := raw(t, http.MethodPut, url+"/attk/k?partNumber=1&uploadId=1", map[string]string{"X-Amz-Copy-Source": src}, nil)
			if status != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidArgument</Code>") {
				t.Errorf("UploadPartCopy from %q: %d %s, want 400 InvalidArgument", src, status, body)
			}
		}
		unchanged(t, root, before, "copies and parts of no upload")
		if status, body := raw(t, http.MethodPut, url+"/attk/copy", map[string]string{"X-Amz-Copy-Source": "victim/secret/data"}, nil); status != http.StatusOK {
			t.Errorf("a good copy: %d %s", status, body)
		}
	})

	t.Run("BucketNames", func(t *testing.T) {
		root, url, _ := hostileStore(t)
		before := tree(t, root)
		long := strings.Repeat("b", 300)
		for _, rq := range []struct{ method, path string }{
			{http.MethodGet, "/a%00bc"}, {http.MethodHead, "/a%00bc"}, {http.MethodDelete, "/" + long},
			{http.MethodGet, "/" + long + "/k"}, {http.MethodPut, "/" + long + "/k"}, {http.MethodDelete, "/a%00bc/k"},
			{http.MethodPost, "/" + long + "?delete"}, {http.MethodGet, "/..?list-type=2"},
		} {
			status, body := raw(t, rq.method, url+rq.path, nil, nil)
			if status != http.StatusNotFound || (rq.method != http.MethodHead && !strings.Contains(body, "<Code>NoSuchBucket</Code>")) {
				t.Errorf("%s %.40s: %d %s, want 404 NoSuchBucket", rq.method, rq.path, status, body)
			}
		}
		if status, body := raw(t, http.MethodPut, url+"/"+long, nil, nil); status != http.StatusBadRequest || !strings.Contains(body, "<Code>InvalidBucketName</Code>") {
			t.Errorf("CreateBucket of a name too long: %d %s, want 400 InvalidBucketName", status, body)
		}
		unchanged(t, root, before, "bad bucket names")
	})
}

// TestCopySourceAuthorized: a copy (CopyObject, or UploadPartCopy) is
// authorized as s3:GetObject on its source as the store reads it, decoded: the whole source URL-encoded,
// or its key alone, names the same object.
func TestCopySourceAuthorized(t *testing.T) {
	// Each: a source, and the object it names.
	for _, c := range [][2]string{
		{"victim/secret/data", "victim/secret/data"},
		{"/victim/secret/data", "victim/secret/data"},
		{"victim%2Fsecret%2Fdata", "victim/secret/data"},
		{"victim/my%20file%3Fv", "victim/my file?v"},
		{"victim/k?versionId=3", "victim/k"},
		{"attk/..%2Fvictim%2Fsecret", "attk/../victim/secret"},
	} {
		for _, path := range []string{"/attk/copy", "/attk/copy?partNumber=1&uploadId=1"} { // CopyObject, UploadPartCopy
			var got []string
			h := s3server.Authorize(http.NotFoundHandler(), func(_ *http.Request, action, resource string) error {
				got = append(got, action+" "+resource)
				return nil
			})
			req := httptest.NewRequest(http.MethodPut, path, nil)
			req.Header.Set("X-Amz-Copy-Source", c[0])
			h.ServeHTTP(httptest.NewRecorder(), req)
			if want := "s3:GetObject arn:aws:s3:::" + c[1]; len(got) != 2 || got[0] != "s3:PutObject arn:aws:s3:::attk/copy" || got[1] != want {
				t.Errorf("%s from %q authorized as %q, want s3:PutObject on attk/copy, then %s", path, c[0], got, want)
			}
		}
	}
}

// TestDeleteObjectsDocument: Authorize reads DeleteObjects' document to
// authorize each key, and refuses one that is no Delete of 1 to 1,000
// keys as S3 does; the store then reads the same body.
func TestDeleteObjectsDocument(t *testing.T) {
	_, url, c := hostileStore(t)
	var keys strings.Builder
	for i := range 1001 {
		fmt.Fprintf(&keys, "<Object><Key>k%d</Key></Object>", i)
	}
	h := s3server.Authorize(http.NotFoundHandler(), func(*http.Request, string, string) error { return nil })
	for body, want := range map[string]string{
		"<Delete>" + keys.String() + "</Delete>":               "MalformedXML",
		"<Delete></Delete>":                                    "MalformedXML",
		"<NotDelete><Object><Key>k</Key></Object></NotDelete>": "MalformedXML",
		"<Delete><Object><Key>k":                               "MalformedXML",
		"<Delete><Object><Key>k</Key></Object></Delete>":       "",
	} {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/attk?delete", strings.NewReader(body)))
		if got := w.Body.String(); (want == "") != (w.Code == http.StatusNotFound) || !strings.Contains(got, want) {
			t.Errorf("DeleteObjects of %.60q: %d %s, want %q", body, w.Code, got, want)
		}
	}
	// Through Authorize, the store reads the body that was authorized.
	mustPutIn(t, c, "attk", "gone", "x")
	ts := httptest.NewServer(s3server.Authorize(serverOf(t, url), func(*http.Request, string, string) error { return nil }))
	defer ts.Close()
	if _, err := client(ts.URL).DeleteObjects(context.Background(), &sdk.DeleteObjectsInput{Bucket: aws.String("attk"),
		Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("gone")}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadObject(context.Background(), &sdk.HeadObjectInput{Bucket: aws.String("attk"), Key: aws.String("gone")}); err == nil {
		t.Error("the object is still there after DeleteObjects through Authorize")
	}
}

// serverOf is a handler that sends each request on to the store at url.
func serverOf(t *testing.T, url string) http.Handler {
	t.Helper()
	target, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	return httputil.NewSingleHostReverseProxy(target)
}

// mustPutIn puts body as key in bucket, failing t if it cannot.
func mustPutIn(t *testing.T, c *sdk.Client, bucket, key, body string) {
	t.Helper()
	if _, err := c.PutObject(context.Background(), &sdk.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader(body)}); err != nil {
		t.Fatal(err)
	}
}
