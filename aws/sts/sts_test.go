package sts_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsiam "github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	awssts "github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/aws/smithy-go"

	"qshare/auth"
	"qshare/aws/iam"
	"qshare/aws/sts"
	"qshare/internal/batchclient"
)

var ctx = context.Background()

// serve serves h on a loopback port with the caller *p (nil: none, as
// without --auth) put in each request's context, as authentication does.
func serve(t *testing.T, h http.Handler, p *atomic.Pointer[auth.Principal]) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if pr := p.Load(); pr != nil {
			r = r.WithContext(auth.WithPrincipal(r.Context(), pr))
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func config() aws.Config {
	return aws.Config{Region: "us-east-1", Credentials: batchclient.Placeholder, Retryer: func() aws.Retryer { return aws.NopRetryer{} }}
}

const authFile = `principals:
  - name: alice
    role: TeamARole
    accessKeys: [{id: AKIAQSHAREALICE00001, secret: alicealicealicealicealice1}]
    policies: [roles]
  - name: bob
    accessKeys: [{id: AKIAQSHAREBOB0000001, secret: bobbobbobbobbobbobbobbob12}]
policies:
  roles:
    Version: "2012-10-17"
    Statement: [{Effect: Allow, Action: iam:GetRole, Resource: "arn:aws:iam::*:role/*"}]
`

// TestCallerIdentity: without --auth the local user acts as the default
// role; with it, a principal with a role is that role's session and one
// without is its user.
func TestCallerIdentity(t *testing.T) {
	keys, err := auth.Parse([]byte(authFile), "123456789012")
	if err != nil {
		t.Fatal(err)
	}
	var p atomic.Pointer[auth.Principal]
	u := serve(t, sts.New(sts.Config{AccountID: "123456789012", Session: "ubuntu"}), &p)
	c := awssts.NewFromConfig(config(), func(o *awssts.Options) { o.BaseEndpoint = aws.String(u) })
	for _, tc := range []struct {
		key, arn string
	}{
		{"", "arn:aws:sts::123456789012:assumed-role/" + iam.DefaultRole + "/ubuntu"},
		{"AKIAQSHAREALICE00001", "arn:aws:sts::123456789012:assumed-role/TeamARole/alice"},
		{"AKIAQSHAREBOB0000001", "arn:aws:iam::123456789012:user/bob"},
	} {
		if tc.key != "" {
			pr, _, _ := keys.Principal(tc.key)
			p.Store(pr)
		}
		out, err := c.GetCallerIdentity(ctx, &awssts.GetCallerIdentityInput{})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.Arn) != tc.arn || aws.ToString(out.Account) != "123456789012" || aws.ToString(out.UserId) == "" {
			t.Errorf("caller %q: %s %s %s, want %s", tc.key, aws.ToString(out.Arn), aws.ToString(out.Account), aws.ToString(out.UserId), tc.arn)
		}
	}
}

// TestIAM: GetRole knows the auth file's roles (or the default), with a
// trust policy that lets SageMaker assume it; SimulatePrincipalPolicy is
// AccessDenied, which the SDK takes as "cannot verify".
func TestIAM(t *testing.T) {
	keys, err := auth.Parse([]byte(authFile), "123456789012")
	if err != nil {
		t.Fatal(err)
	}
	var p atomic.Pointer[auth.Principal]
	withAuth := awsiam.NewFromConfig(config(), func(o *awsiam.Options) {
		o.BaseEndpoint = aws.String(serve(t, iam.New(iam.Config{AccountID: "123456789012", Roles: keys.Roles, Started: time.Now()}), &p))
	})
	var none atomic.Pointer[auth.Principal]
	noAuth := awsiam.NewFromConfig(config(), func(o *awsiam.Options) {
		o.BaseEndpoint = aws.String(serve(t, iam.New(iam.Config{AccountID: "123456789012", Started: time.Now()}), &none))
	})
	out, err := noAuth.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String(iam.DefaultRole)})
	if err != nil {
		t.Fatal(err)
	}
	r := out.Role
	doc, _ := url.QueryUnescape(aws.ToString(r.AssumeRolePolicyDocument))
	if aws.ToString(r.Arn) != "arn:aws:iam::123456789012:role/"+iam.DefaultRole || !strings.HasPrefix(aws.ToString(r.RoleId), "AROA") ||
		r.CreateDate == nil || !strings.Contains(doc, `"sagemaker.amazonaws.com"`) {
		t.Errorf("GetRole: %+v (trust %s)", r, doc)
	}
	alice, _, _ := keys.Principal("AKIAQSHAREALICE00001")
	p.Store(alice)
	if _, err := withAuth.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String("TeamARole")}); err != nil {
		t.Errorf("alice's role: %v", err)
	}
	var nse *iamtypes.NoSuchEntityException
	if _, err := withAuth.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String(iam.DefaultRole)}); !errors.As(err, &nse) {
		t.Errorf("the default role with --auth: %v, want NoSuchEntity", err)
	}
	bob, _, _ := keys.Principal("AKIAQSHAREBOB0000001")
	p.Store(bob)
	wantCode(t, "bob's GetRole", err0(withAuth.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String("TeamARole")})), "AccessDenied")
	wantCode(t, "SimulatePrincipalPolicy", err0(noAuth.SimulatePrincipalPolicy(ctx, &awsiam.SimulatePrincipalPolicyInput{
		PolicySourceArn: aws.String("arn:aws:iam::123456789012:role/" + iam.DefaultRole), ActionNames: []string{"s3:PutObject"}})), "AccessDenied")
	wantCode(t, "GetRole of a bad name", err0(noAuth.GetRole(ctx, &awsiam.GetRoleInput{RoleName: aws.String("a b")})), "ValidationError")
	wantCode(t, "CreateRole", err0(noAuth.CreateRole(ctx, &awsiam.CreateRoleInput{RoleName: aws.String("r"), AssumeRolePolicyDocument: aws.String("{}")})), "InvalidAction")

	// Raw requests: XML errors in IAM's shape, never a 500.
	u := serve(t, iam.New(iam.Config{AccountID: "123456789012"}), &none)
	for _, c := range []struct{ method, ctype, body, code string }{
		{"POST", "application/x-www-form-urlencoded", "Version=2010-05-08", "MissingAction"},
		{"POST", "application/x-www-form-urlencoded", "Action=%zz", "MalformedInput"},
		{"POST", "application/json", `{"Action":"GetRole"}`, "MalformedInput"},
		{"GET", "", "", "InvalidAction"},
	} {
		req, _ := http.NewRequest(c.method, u, strings.NewReader(c.body))
		if c.ctype != "" {
			req.Header.Set("Content-Type", c.ctype)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "<Code>"+c.code+"</Code>") || !strings.Contains(string(b), "<ErrorResponse") {
			t.Errorf("%s %q: %d %s, want 400 %s", c.method, c.body, resp.StatusCode, b, c.code)
		}
	}
}

func err0[T any](_ T, err error) error { return err }

func wantCode(t *testing.T, what string, err error, code string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != code {
		t.Errorf("%s: %v, want %s", what, err, code)
	}
}
