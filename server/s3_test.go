package server

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
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
