package server

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"qshare/auth"
)

// s3WithAuth is qshare serve --auth with two principals, alice (who may
// touch bucket team-a, which exists) and bob (team-b).
type s3WithAuth struct {
	s          Settings
	base       string
	alice, bob auth.AccessKey
}

func startS3WithAuth(t *testing.T) *s3WithAuth {
	t.Helper()
	e := &s3WithAuth{s: simServeSettings(t)}
	e.s.Guard.Auth = filepath.Join(t.TempDir(), "auth.yaml")
	var err error
	e.alice, err = auth.NewKey()
	serveMust(t, err)
	e.bob, err = auth.NewKey()
	serveMust(t, err)
	serveMust(t, os.WriteFile(e.s.Guard.Auth, []byte(`principals:
- {name: alice, accessKeys: [{id: `+e.alice.ID+`, secret: "`+e.alice.Secret+`"}], policies: [team-a]}
- {name: bob, accessKeys: [{id: `+e.bob.ID+`, secret: "`+e.bob.Secret+`"}], policies: [team-b]}
policies:
  team-a: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "s3:*", Resource: ["arn:aws:s3:::team-a", "arn:aws:s3:::team-a/*"]}]}
  team-b: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "s3:*", Resource: ["arn:aws:s3:::team-b", "arn:aws:s3:::team-b/*"]}]}
`), 0o600))
	e.base = "http://" + serveAt(t, e.s)
	waitReady(t, e.base)
	if _, err := e.client(e.alice).CreateBucket(context.Background(), &s3.CreateBucketInput{Bucket: aws.String("team-a")}); err != nil {
		t.Fatal(err)
	}
	return e
}

// client is the SDK's S3 client with k, on its defaults.
func (e *s3WithAuth) client(k auth.AccessKey) *s3.Client {
	return s3.New(s3.Options{Region: e.s.Region, BaseEndpoint: aws.String(e.base), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(k.ID, k.Secret, "")})
}

// TestEmbeddedS3WithAuth runs qshare serve --auth and uses its embedded
// S3 store with the AWS SDK's S3 client on the API's own address: each
// request is verified, and each principal may touch only what its policy
// names (alice her team's bucket, bob not).
func TestEmbeddedS3WithAuth(t *testing.T) {
	e := startS3WithAuth(t)
	ctx := context.Background()
	a, b := e.client(e.alice), e.client(e.bob)
	if _, err := a.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String("train/x.csv"), Body: strings.NewReader("1,2")}); err != nil {
		t.Fatal(err)
	}
	out, err := a.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("team-a"), Key: aws.String("train/x.csv")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	if string(got) != "1,2" {
		t.Fatalf("alice read %q", got)
	}
	denied := func(what string, err error) {
		t.Helper()
		var api smithy.APIError
		if !errors.As(err, &api) || api.ErrorCode() != "AccessDenied" {
			t.Errorf("%s: %v, want AccessDenied", what, err)
		}
	}
	_, err = b.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("team-a"), Key: aws.String("train/x.csv")})
	denied("bob reads alice's object", err)
	_, err = b.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("team-a"), Key: aws.String("planted"), Body: strings.NewReader("x")})
	denied("bob writes into alice's bucket", err)
	_, err = b.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("team-a")})
	denied("bob lists alice's bucket", err)
	// A key the auth file does not hold is refused before S3 sees it.
	k, _ := auth.NewKey()
	_, err = e.client(k).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("team-a"), Key: aws.String("train/x.csv")})
	if err == nil {
		t.Fatal("an unknown key read an object")
	}
}

// TestDeleteObjectsAuthorizedPerKey: DeleteObjects is authorized as
// s3:DeleteObject on each key it names, as S3 does, not once on the
// bucket: a Deny on a prefix holds against it (bob), and an Allow on a
// prefix alone lets it delete there (carol, as aws s3 rm --recursive
// does). A refused key is that key's AccessDenied in the answer's list,
// and the others are deleted, as on S3.
func TestDeleteObjectsAuthorizedPerKey(t *testing.T) {
	s := simServeSettings(t)
	s.Guard.Auth = filepath.Join(t.TempDir(), "auth.yaml")
	var ks [3]auth.AccessKey
	for i := range ks {
		var err error
		ks[i], err = auth.NewKey()
		serveMust(t, err)
	}
	serveMust(t, os.WriteFile(s.Guard.Auth, []byte(`principals:
- {name: ops, accessKeys: [{id: `+ks[0].ID+`, secret: "`+ks[0].Secret+`"}], policies: [all]}
- {name: bob, accessKeys: [{id: `+ks[1].ID+`, secret: "`+ks[1].Secret+`"}], policies: [shared-but-protected]}
- {name: carol, accessKeys: [{id: `+ks[2].ID+`, secret: "`+ks[2].Secret+`"}], policies: [her-prefix]}
policies:
  all: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "s3:*", Resource: "*"}]}
  shared-but-protected: {Version: "2012-10-17", Statement: [
    {Effect: Allow, Action: "s3:*", Resource: ["arn:aws:s3:::shared", "arn:aws:s3:::shared/*"]},
    {Effect: Deny, Action: "s3:DeleteObject", Resource: "arn:aws:s3:::shared/protected/*"}]}
  her-prefix: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "s3:DeleteObject", Resource: "arn:aws:s3:::shared/carol/*"}]}
`), 0o600))
	e := &s3WithAuth{s: s}
	e.base = "http://" + serveAt(t, s)
	waitReady(t, e.base)
	ctx := context.Background()
	ops, bob, carol := e.client(ks[0]), e.client(ks[1]), e.client(ks[2])
	_, err := ops.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("shared")})
	serveMust(t, err)
	for _, k := range []string{"protected/crown", "free/a", "carol/g"} {
		_, err := ops.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("shared"), Key: aws.String(k), Body: strings.NewReader(k)})
		serveMust(t, err)
	}
	del := func(c *s3.Client, keys ...string) error {
		var objs []types.ObjectIdentifier
		for _, k := range keys {
			objs = append(objs, types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("shared"), Delete: &types.Delete{Objects: objs}})
		if err == nil && len(out.Errors) > 0 {
			return fmt.Errorf("per-key errors: %+v", out.Errors)
		}
		return err
	}
	exists := func(k string) bool {
		_, err := ops.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String("shared"), Key: aws.String(k)})
		return err == nil
	}
	out, err := bob.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("shared"), Delete: &types.Delete{Objects: []types.ObjectIdentifier{
		{Key: aws.String("free/a")}, {Key: aws.String("protected/crown")}}}})
	if err != nil || len(out.Errors) != 1 || aws.ToString(out.Errors[0].Key) != "protected/crown" || aws.ToString(out.Errors[0].Code) != "AccessDenied" || len(out.Deleted) != 1 {
		t.Errorf("bob deletes a denied key among others: %v, deleted %+v, errors %+v; want free/a deleted and protected/crown's AccessDenied", err, out.Deleted, out.Errors)
	}
	if !exists("protected/crown") || exists("free/a") {
		t.Errorf("after bob's DeleteObjects: protected/crown there %v (want true), free/a there %v (want false)", exists("protected/crown"), exists("free/a"))
	}
	if err := del(bob, "protected/crown"); err == nil || !exists("protected/crown") {
		t.Errorf("bob deletes the denied key alone: %v (still there: %v), want its AccessDenied", err, exists("protected/crown"))
	}
	if err := del(carol, "carol/g"); err != nil || exists("carol/g") {
		t.Errorf("carol deletes under her prefix: %v (still there: %v)", err, exists("carol/g"))
	}
}

// TestPresignedV2GoesToS3: a URL presigned with Signature Version 2 (aws
// s3 presign's, boto3's generate_presigned_url's by default) is an S3
// request: served by the embedded store without --auth, as a SigV4 one
// is, and refused in S3's shape with it; it was the Batch API's
// "unknown operation" in JSON.
func TestPresignedV2GoesToS3(t *testing.T) {
	get := func(url string) (int, string) {
		resp, err := http.Get(url)
		serveMust(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	const q = "?AWSAccessKeyId=qshare&Signature=JmxcC%2BnRM%2FAwoNNk%3D&Expires=1796665077"
	s := simServeSettings(t)
	base := "http://" + serveAt(t, s)
	waitReady(t, base)
	c := s3.New(s3.Options{Region: s.Region, BaseEndpoint: aws.String(base), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(EmbeddedS3Credentials, EmbeddedS3Credentials, "")})
	ctx := context.Background()
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("pres")})
	serveMust(t, err)
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("pres"), Key: aws.String("h.txt"), Body: strings.NewReader("hello")})
	serveMust(t, err)
	if status, body := get(base + "/pres/h.txt" + q); status != http.StatusOK || body != "hello" {
		t.Errorf("a SigV2 presigned GET without --auth: %d %q, want the object", status, body)
	}
	e := startS3WithAuth(t)
	if status, body := get(e.base + "/team-a/x" + q); status < 400 || !strings.Contains(body, "<Error>") {
		t.Errorf("a SigV2 presigned GET with --auth: %d %q, want a refusal in S3's XML", status, body)
	}
}
