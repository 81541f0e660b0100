package batchclient

import (
	"context"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"qshare/auth"
)

const (
	keyID  = "AKIAQSHARETEST000001"
	secret = "test-secret-test-secret-test-secret-test"
)

// The signing transport's requests verify with the server's verifier
// (package auth), bodies and queries included, and the request given to
// it is left unsigned.
func TestSigningTransportVerifies(t *testing.T) {
	k, err := auth.Parse([]byte("principals: [{name: t, accessKeys: [{id: "+keyID+", secret: "+secret+"}]}]"), "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	v := auth.NewVerifier("us-east-1", func() *auth.Keyring { return k })
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := v.Verify(r)
		if err != nil {
			http.Error(w, err.Error(), 403)
			return
		}
		b, _ := io.ReadAll(r.Body)
		io.WriteString(w, p.Name+":"+string(b))
	}))
	defer srv.Close()
	c := SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(keyID, secret, ""), "us-east-1")
	for _, req := range []*http.Request{
		mustReq(t, "GET", srv.URL+"/qshare/v1/logs/arn%3Aaws%3Abatch%3Aus-east-1%3A000000000000%3Aservice-job%2Fx?attempt=2&follow=true", ""),
		mustReq(t, "POST", srv.URL+"/v1/listservicejobs", `{"jobQueue":"q"}`),
	} {
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.HasPrefix(string(b), "t:") {
			t.Errorf("%s %s: %d %s", req.Method, req.URL, resp.StatusCode, b)
		}
		if req.Header.Get("Authorization") != "" {
			t.Error("the caller's request was changed")
		}
	}
	wrong := SignedHTTPClient(nil, credentials.NewStaticCredentialsProvider(keyID, strings.Repeat("x", 40), ""), "us-east-1")
	resp, err := wrong.Do(mustReq(t, "GET", srv.URL+"/x", ""))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 403 {
		t.Errorf("a wrong secret: %d", resp.StatusCode)
	}
}

func mustReq(t *testing.T, method, url, body string) *http.Request {
	var r io.Reader
	if body != "" {
		r = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, r)
	if err != nil {
		t.Fatal(err)
	}
	return req
}

// Credentials come from the standard AWS chain; with none, the placeholder.
func TestCredentials(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(dir, "none"))
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	t.Setenv("AWS_PROFILE", "")
	ctx := context.Background()
	c, err := Credentials(ctx, "")
	if v, _ := c.Retrieve(ctx); err != nil || c != Placeholder || v.AccessKeyID != "qshare" {
		t.Fatalf("no credentials anywhere: %v %v, want the placeholder", c, err)
	}
	if _, err := Credentials(ctx, "nope"); err == nil {
		t.Fatal("a profile that does not exist was accepted")
	}
	t.Setenv("AWS_ACCESS_KEY_ID", keyID)
	t.Setenv("AWS_SECRET_ACCESS_KEY", secret)
	c, err = Credentials(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Retrieve(ctx); v.AccessKeyID != keyID || v.SecretAccessKey != secret {
		t.Fatalf("from the environment: %+v", v)
	}
	file := filepath.Join(dir, "credentials")
	if err := os.WriteFile(file, []byte("[team]\naws_access_key_id = AKIAQSHAREPROFILE001\naws_secret_access_key = "+secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", file)
	c, err = Credentials(ctx, "team")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := c.Retrieve(ctx); v.AccessKeyID != "AKIAQSHAREPROFILE001" {
		t.Fatalf("--profile team: %+v", v)
	}
}

// AWS_CA_BUNDLE makes the tools trust a server's private CA.
func TestHTTPClientCABundle(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") }))
	defer srv.Close()
	t.Setenv("AWS_CA_BUNDLE", "")
	plain, err := HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Get(srv.URL); err == nil {
		t.Fatal("a server of an unknown CA was trusted")
	}
	bundle := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_CA_BUNDLE", bundle)
	c, err := HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := c.Get(srv.URL)
	if err != nil {
		t.Fatalf("with AWS_CA_BUNDLE: %v", err)
	}
	resp.Body.Close()
	if err := os.WriteFile(bundle, []byte("not pem"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := HTTPClient(); err == nil || !strings.Contains(err.Error(), "AWS_CA_BUNDLE="+bundle) {
		t.Fatalf("a bundle with no certificate: %v", err)
	}
	// Load's client, the command line's, trusts it as HTTPClient's does.
	if err := os.WriteFile(bundle, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, hc, err := Load(context.Background(), ""); err != nil {
		t.Fatal(err)
	} else if resp, err := hc.Get(srv.URL); err != nil {
		t.Fatalf("Load's client with AWS_CA_BUNDLE: %v", err)
	} else {
		resp.Body.Close()
	}
	t.Setenv("AWS_CA_BUNDLE", "")
	if _, hc, err := Load(context.Background(), ""); err != nil {
		t.Fatal(err)
	} else if _, err := hc.Get(srv.URL); err == nil {
		t.Fatal("Load's client without AWS_CA_BUNDLE trusted a server of an unknown CA")
	}
}
