package s3_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	sdk "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3server "qshare/aws/s3"
)

// TestVersions: each object is its one version, "null", as on S3 for a
// bucket never versioned. ListObjectVersions lists it so, paged by
// key-marker; a read, a delete or a DeleteObjects entry of that version
// is the object's, and one of any other version is InvalidArgument and
// changes nothing. gofakes3 answered ListObjectVersions and a GET of a
// version with NotImplemented, a HEAD of any version with the object,
// and deleted the object for a DeleteObjects entry of any version.
func TestVersions(t *testing.T) {
	t.Parallel()
	ts, c := startWith(t, t.TempDir(), "bkt")
	defer ts.Close()
	ctx := context.Background()
	keys := []string{"a", "b/c", "b/d", "e", "f+g h"}
	for _, k := range keys {
		mustPutIn(t, c, "bkt", k, "data of "+k)
	}

	// The listing, whole and by pages of 1 and 2.
	out, err := c.ListObjectVersions(ctx, &sdk.ListObjectVersionsInput{Bucket: aws.String("bkt")})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, v := range out.Versions {
		listed = append(listed, aws.ToString(v.Key))
		if aws.ToString(v.VersionId) != "null" || !aws.ToBool(v.IsLatest) || aws.ToInt64(v.Size) != int64(len("data of "+aws.ToString(v.Key))) || aws.ToString(v.ETag) == "" || v.LastModified == nil {
			t.Errorf("the version of %s: %+v", aws.ToString(v.Key), v)
		}
	}
	if !slices.Equal(listed, keys) || aws.ToBool(out.IsTruncated) || len(out.DeleteMarkers) != 0 {
		t.Fatalf("ListObjectVersions listed %q (truncated %v), want %q", listed, aws.ToBool(out.IsTruncated), keys)
	}
	for _, max := range []int32{1, 2} {
		var got []string
		in := &sdk.ListObjectVersionsInput{Bucket: aws.String("bkt"), MaxKeys: aws.Int32(max)}
		for page := 0; page <= len(keys); page++ {
			out, err := c.ListObjectVersions(ctx, in)
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range out.Versions {
				got = append(got, aws.ToString(v.Key))
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			if aws.ToString(out.NextVersionIdMarker) != "null" {
				t.Errorf("MaxKeys %d: NextVersionIdMarker %q", max, aws.ToString(out.NextVersionIdMarker))
			}
			in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
		}
		if !slices.Equal(got, keys) {
			t.Errorf("ListObjectVersions by pages of %d listed %q", max, got)
		}
	}
	d, err := c.ListObjectVersions(ctx, &sdk.ListObjectVersionsInput{Bucket: aws.String("bkt"), Delimiter: aws.String("/"), Prefix: aws.String("")})
	if err != nil || len(d.CommonPrefixes) != 1 || aws.ToString(d.CommonPrefixes[0].Prefix) != "b/" || len(d.Versions) != 3 {
		t.Errorf("ListObjectVersions with the delimiter /: %v %+v", err, d)
	}
	for _, tc := range []struct {
		what string
		in   sdk.ListObjectVersionsInput
		code string
	}{
		{"a version marker without a key marker", sdk.ListObjectVersionsInput{Bucket: aws.String("bkt"), VersionIdMarker: aws.String("null")}, "InvalidArgument"},
		{"a version marker of another version", sdk.ListObjectVersionsInput{Bucket: aws.String("bkt"), KeyMarker: aws.String("a"), VersionIdMarker: aws.String("3HL4kq")}, "InvalidArgument"},
		{"a bucket that is not there", sdk.ListObjectVersionsInput{Bucket: aws.String("nobkt")}, "NoSuchBucket"},
	} {
		if _, err := c.ListObjectVersions(ctx, &tc.in); apiCode(err) != tc.code {
			t.Errorf("%s: %v, want %s", tc.what, err, tc.code)
		}
	}

	// The bucket was never versioned: no status.
	if v, err := c.GetBucketVersioning(ctx, &sdk.GetBucketVersioningInput{Bucket: aws.String("bkt")}); err != nil || v.Status != "" || v.MFADelete != "" {
		t.Errorf("GetBucketVersioning: %v %+v, want no status", err, v)
	}
	if resp, body := raw(t, http.MethodGet, ts.URL+"/bkt?versioning", nil, nil); resp != http.StatusOK || strings.Contains(body, "Status") {
		t.Errorf("GetBucketVersioning answered %d %s, want no Status element", resp, body)
	}
	if _, err := c.GetBucketVersioning(ctx, &sdk.GetBucketVersioningInput{Bucket: aws.String("nobkt")}); apiCode(err) != "NoSuchBucket" {
		t.Errorf("GetBucketVersioning of no bucket: %v, want NoSuchBucket", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &sdk.PutBucketVersioningInput{Bucket: aws.String("bkt"),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); apiCode(err) != "NotImplemented" {
		t.Errorf("PutBucketVersioning: %v, want NotImplemented", err)
	}

	// Reads and deletes of a version.
	get, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), VersionId: aws.String("null")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(get.Body)
	get.Body.Close()
	if string(b) != "data of a" {
		t.Errorf("GetObject of version null: %q", b)
	}
	if _, err := c.GetObject(ctx, &sdk.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), VersionId: aws.String("3HL4kq")}); apiCode(err) != "InvalidArgument" {
		t.Errorf("GetObject of another version: %v, want InvalidArgument", err)
	}
	if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), VersionId: aws.String("null")}); err != nil {
		t.Errorf("HeadObject of version null: %v", err)
	}
	if resp, err := http.Head(ts.URL + "/bkt/a?versionId=3HL4kq"); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("HEAD of another version: %v %v, want 400", resp, err)
	}
	if _, err := c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("a"), VersionId: aws.String("3HL4kq")}); apiCode(err) != "InvalidArgument" {
		t.Errorf("DeleteObject of another version: %v, want InvalidArgument", err)
	}
	del, err := c.DeleteObjects(ctx, &sdk.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("a"), VersionId: aws.String("3HL4kq")}, {Key: aws.String("e"), VersionId: aws.String("null")}, {Key: aws.String("b/c")}, {Key: aws.String("none")}}}})
	if err != nil {
		t.Fatal(err)
	}
	var deleted, failed []string
	for _, o := range del.Deleted {
		deleted = append(deleted, aws.ToString(o.Key)+"@"+aws.ToString(o.VersionId))
	}
	for _, e := range del.Errors {
		failed = append(failed, aws.ToString(e.Key)+"@"+aws.ToString(e.VersionId)+" "+aws.ToString(e.Code))
	}
	slices.Sort(deleted)
	if want := []string{"b/c@", "e@null", "none@"}; !slices.Equal(deleted, want) || !slices.Equal(failed, []string{"a@3HL4kq InvalidArgument"}) {
		t.Errorf("DeleteObjects: deleted %q, errors %q; want %q and a's InvalidArgument", deleted, failed, want)
	}
	if _, err := c.DeleteObject(ctx, &sdk.DeleteObjectInput{Bucket: aws.String("bkt"), Key: aws.String("b/d"), VersionId: aws.String("null")}); err != nil {
		t.Errorf("DeleteObject of version null: %v", err)
	}
	if left := keysIn(t, c, "bkt"); !slices.Equal(left, []string{"a", "f+g h"}) {
		t.Errorf("after the deletes the bucket holds %q, want a (its other version was named) and f+g h", left)
	}
	q, err := c.DeleteObjects(ctx, &sdk.DeleteObjectsInput{Bucket: aws.String("bkt"), Delete: &types.Delete{Quiet: aws.Bool(true), Objects: []types.ObjectIdentifier{
		{Key: aws.String("f+g h")}, {Key: aws.String("a"), VersionId: aws.String("x")}}}})
	if err != nil || len(q.Deleted) != 0 || len(q.Errors) != 1 {
		t.Errorf("a quiet DeleteObjects: %v, %d deleted, %d errors; want only the error", err, len(q.Deleted), len(q.Errors))
	}
}

// TestDeleteObjectsDeniesPerKey: through Authorize, DeleteObjects
// deletes the keys that the principal may delete and answers each other
// with AccessDenied in its list, as S3 does; it refused the whole
// request before, deleting none.
func TestDeleteObjectsDeniesPerKey(t *testing.T) {
	t.Parallel()
	srv, direct, c := serve(t, t.TempDir())
	defer direct.Close()
	ctx := context.Background()
	if _, err := c.CreateBucket(ctx, &sdk.CreateBucketInput{Bucket: aws.String("shared")}); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"free/a", "protected/crown", "free/b"} {
		mustPutIn(t, c, "shared", k, k)
	}
	ts := httptest.NewServer(s3server.Authorize(srv, func(_ *http.Request, action, resource string) error {
		if action == "s3:DeleteObject" && strings.HasPrefix(resource, "arn:aws:s3:::shared/protected/") {
			return errors.New("denied")
		}
		return nil
	}))
	defer ts.Close()
	out, err := client(ts.URL).DeleteObjects(ctx, &sdk.DeleteObjectsInput{Bucket: aws.String("shared"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("free/a")}, {Key: aws.String("protected/crown")}}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Deleted) != 1 || aws.ToString(out.Deleted[0].Key) != "free/a" || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "protected/crown" || aws.ToString(out.Errors[0].Code) != "AccessDenied" {
		t.Errorf("DeleteObjects of an allowed and a denied key: %+v deleted, %+v errors", out.Deleted, out.Errors)
	}
	for k, want := range map[string]bool{"free/a": false, "protected/crown": true, "free/b": true} {
		if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("shared"), Key: aws.String(k)}); (err == nil) != want {
			t.Errorf("after the delete, %s there: %v, want %v", k, err == nil, want)
		}
	}
	// The denied keys travel in the request's context, which only
	// Authorize sets: a request straight to the store has none.
	req, _ := http.NewRequest(http.MethodPost, direct.URL+"/shared?delete", strings.NewReader("<Delete><Object><Key>free/b</Key></Object></Delete>"))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("DeleteObjects straight to the store: %v %v", resp, err)
	}
	if _, err := c.HeadObject(ctx, &sdk.HeadObjectInput{Bucket: aws.String("shared"), Key: aws.String("free/b")}); err == nil {
		t.Error("free/b is still there")
	}
}

// keysIn lists bucket's keys (one page: the tests' buckets hold few).
func keysIn(t *testing.T, c *sdk.Client, bucket string) []string {
	t.Helper()
	l, err := c.ListObjectsV2(context.Background(), &sdk.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range l.Contents {
		keys = append(keys, aws.ToString(o.Key))
	}
	return keys
}
