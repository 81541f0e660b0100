package auth

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"qshare"
)

const (
	aliceID     = "AKIAQSHAREALICE00001"
	aliceSecret = "alicealicealicealicealicealicealice12345"
)

// verifyServer is a real HTTP server whose handler verifies each request
// with v and answers the principal's name, or the error's code and message;
// it also checks that the body reaches the handler whole.
func verifyServer(t *testing.T, v *Verifier) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, err := v.Verify(r)
		if err != nil {
			w.WriteHeader(403)
			io.WriteString(w, string(qshare.ErrorCodeOf(err))+": "+qshare.ErrorMessageOf(err))
			return
		}
		body, _ := io.ReadAll(r.Body)
		io.WriteString(w, "ok "+p.Name+" "+string(body))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func testVerifier(t *testing.T) *Verifier {
	k, err := Parse([]byte(exampleFile), "000000000000")
	if err != nil {
		t.Fatal(err)
	}
	return NewVerifier("us-east-1", func() *Keyring { return k })
}

// signed is a request as the AWS SDK signs it: v4.Signer over the body's
// hash, at time at, with the SDK's usual headers.
func signed(t *testing.T, method, url, body, id, secret, region, service string, at time.Time) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if body == "" {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Amz-Sdk-Invocation-Id", "b0c0e8b5-7e4f-4a55-9b0a-4a7c0d6f7a01")
	req.Header.Set("User-Agent", "test") // not signed, as the SDK does
	sum := sha256.Sum256([]byte(body))
	if err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: id, SecretAccessKey: secret}, req, hex.EncodeToString(sum[:]), service, region, at); err != nil {
		t.Fatal(err)
	}
	return req
}

func send(t *testing.T, req *http.Request) string {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func TestVerify(t *testing.T) {
	v := testVerifier(t)
	srv := verifyServer(t, v)
	now := time.Now()
	body := `{"jobQueue":"training"}`
	tags := srv.URL + "/v1/tags/" + strings.ReplaceAll("arn:aws:batch:us-east-1:000000000000:job-queue/training", ":", "%3A")
	// post is a POST of body to /v1/x signed with these credentials, this
	// scope and this clock.
	post := func(keyID, secret, region, service string, at time.Time) func() *http.Request {
		return func() *http.Request {
			return signed(t, "POST", srv.URL+"/v1/x", body, keyID, secret, region, service, at)
		}
	}
	// changed is alice's POST of body to /v1/x, changed by edit after
	// signing; header sets one header after signing.
	changed := func(edit func(r *http.Request)) func() *http.Request {
		return func() *http.Request {
			r := post(aliceID, aliceSecret, "us-east-1", "batch", now)()
			edit(r)
			return r
		}
	}
	header := func(k, v string) func() *http.Request {
		return changed(func(r *http.Request) { r.Header.Set(k, v) })
	}
	for _, c := range []struct {
		name string
		req  func() *http.Request
		want string
	}{
		{"a signed POST", func() *http.Request {
			return signed(t, "POST", srv.URL+"/v1/submitservicejob", body, aliceID, aliceSecret, "us-east-1", "batch", now)
		}, "ok alice " + body},
		{"a GET with a query and an escaped path", func() *http.Request {
			return signed(t, "GET", tags+"?x=1&a=b%20c", "", aliceID, aliceSecret, "us-east-1", "batch", now)
		}, "ok alice "},
		{"a clock 4 minutes off is within the skew", post(aliceID, aliceSecret, "us-east-1", "batch", now.Add(-4*time.Minute)), "ok alice"},
		{"no signature", func() *http.Request {
			r, _ := http.NewRequest("POST", srv.URL+"/v1/x", strings.NewReader(body))
			return r
		}, "no_signature: Missing Authentication Token"},
		{"a presigned URL", func() *http.Request {
			r, _ := http.NewRequest("GET", srv.URL+"/v1/x?X-Amz-Signature=00", nil)
			return r
		}, "no_signature: Missing Authentication Token: this server accepts the signature in the Authorization header only"},
		{"an unknown key", post("AKIAQSHAREMALLORY001", aliceSecret, "us-east-1", "batch", now), "unknown_key: The security token included in the request is invalid"},
		{"a wrong secret", post(aliceID, strings.Repeat("x", 40), "us-east-1", "batch", now), "bad_signature: The request signature we calculated does not match"},
		{"a body changed after signing", changed(func(r *http.Request) {
			r.Body = io.NopCloser(strings.NewReader(strings.ToUpper(body)))
		}), "bad_signature: The request signature we calculated does not match"},
		{"a path changed after signing", changed(func(r *http.Request) {
			r.URL.Path = "/v1/y"
		}), "bad_signature: The request signature we calculated does not match"},
		{"a signed header changed after signing", header("Amz-Sdk-Invocation-Id", "other"), "bad_signature: The request signature we calculated does not match"},
		{"a wrong payload hash header", header("X-Amz-Content-Sha256", "UNSIGNED-PAYLOAD"), "bad_signature: X-Amz-Content-Sha256 is not the SHA-256"},
		{"another region", post(aliceID, aliceSecret, "eu-west-1", "batch", now), "bad_signature: Credential should be scoped to a valid region"},
		{"another service", post(aliceID, aliceSecret, "us-east-1", "s3", now), "bad_signature: Credential should be scoped to correct service"},
		{"6 minutes slow", post(aliceID, aliceSecret, "us-east-1", "batch", now.Add(-6*time.Minute)), "bad_signature: Signature expired"},
		{"6 minutes fast", post(aliceID, aliceSecret, "us-east-1", "batch", now.Add(6*time.Minute)), "bad_signature: Signature not yet current"},
		{"a session token", header("X-Amz-Security-Token", "tok"), "unknown_key: The security token included in the request is invalid: this server issues no session tokens"},
		{"a malformed header", header("Authorization", "AWS4-HMAC-SHA256 Credential="+aliceID+"/x"), "bad_signature: the Authorization header must give Credential, SignedHeaders and Signature"},
		{"host not signed", changed(func(r *http.Request) {
			a := r.Header.Get("Authorization")
			r.Header.Set("Authorization", strings.Replace(a, "SignedHeaders=amz-sdk-invocation-id;content-length;content-type;host;x-amz-date", "SignedHeaders=amz-sdk-invocation-id;content-length;content-type;x-amz-date", 1))
		}), "bad_signature: SignedHeaders must include host and x-amz-date"},
	} {
		if got := send(t, c.req()); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: got %q, want %q…", c.name, got, c.want)
		}
	}
}

// A body over the route's limit is refused before its signature is checked.
func TestVerifyBodyLimit(t *testing.T) {
	v := testVerifier(t)
	v.BodyLimit = func(*http.Request) int64 { return 10 }
	srv := verifyServer(t, v)
	got := send(t, signed(t, "POST", srv.URL+"/v1/x", strings.Repeat("x", 11), aliceID, aliceSecret, "us-east-1", "batch", time.Now()))
	if want := "invalid: the request body is larger than 10 bytes"; !strings.HasPrefix(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := send(t, signed(t, "POST", srv.URL+"/v1/x", strings.Repeat("x", 10), aliceID, aliceSecret, "us-east-1", "batch", time.Now())); !strings.HasPrefix(got, "ok alice xxxxxxxxxx") {
		t.Fatalf("a body at the limit: %q", got)
	}
}

func TestParseAuthorization(t *testing.T) {
	good := "AWS4-HMAC-SHA256 Credential=AKIAQSHAREALICE00001/20260101/us-east-1/batch/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("ab", 32)
	a, err := parseAuthorization(good)
	if err != nil {
		t.Fatal(err)
	}
	if a.keyID != "AKIAQSHAREALICE00001" || a.date != "20260101" || a.region != "us-east-1" || a.service != "batch" || a.terminal != "aws4_request" ||
		strings.Join(a.signedHeaders, ";") != "host;x-amz-date" || a.signature != strings.Repeat("ab", 32) {
		t.Fatalf("parsed %+v", a)
	}
	for _, bad := range []string{
		"", "AWS4-HMAC-SHA256", "AWS4-HMAC-SHA1 " + good[17:], "Bearer x",
		strings.Replace(good, "host;x-amz-date", "x-amz-date;host", 1),
		strings.Replace(good, "host;x-amz-date", "host;host", 1),
		strings.Replace(good, "host;x-amz-date", "Host", 1),
		strings.Replace(good, "host;x-amz-date", "host;;x", 1),
		strings.Replace(good, "/aws4_request", "", 1),
		strings.Replace(good, "Signature=ab", "Signature=AB", 1),
		strings.Replace(good, "Signature=abab", "Signature=ab", 1),
		good + ", Signature=" + strings.Repeat("ab", 32),
		good + ", Extra=1",
		good + ", junk",
		"AWS4-HMAC-SHA256 " + strings.Repeat("x", 9000),
	} {
		if _, err := parseAuthorization(bad); err == nil {
			t.Errorf("parseAuthorization(%q) accepted it", bad)
		}
	}
}

func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAQSHAREALICE00001/20260101/us-east-1/batch/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("0f", 32))
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/e,SignedHeaders=a;b;c,Signature=" + strings.Repeat("a", 64))
	f.Add("AWS4-HMAC-SHA256 Credential=,SignedHeaders=,Signature=")
	f.Add("AWS4-HMAC-SHA256 ,,,===")
	f.Add("AWS4-HMAC-SHA256 Credential=x/y/z, Credential=x")
	f.Add("")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := parseAuthorization(h)
		if err != nil {
			return
		}
		// What it accepts is well formed: a key, a sorted list of
		// distinct lower-case names, 64 hex digits.
		if a.keyID == "" || len(a.signature) != 64 || strings.Trim(a.signature, "0123456789abcdef") != "" || len(a.signedHeaders) == 0 {
			t.Fatalf("accepted %q as %+v", h, a)
		}
		for i, n := range a.signedHeaders {
			if n == "" || n != strings.ToLower(n) || (i > 0 && a.signedHeaders[i-1] >= n) {
				t.Fatalf("accepted %q with signed headers %v", h, a.signedHeaders)
			}
		}
		if !strings.HasPrefix(h, algorithm+" ") || !bytes.Contains([]byte(h), []byte(a.signature)) {
			t.Fatalf("accepted %q", h)
		}
	})
}

// A secret replaced under the same access key id (a reload) is refused at
// once: the SDK signer's cache of derived keys, keyed by key id and day but
// not by secret, must not carry it over.
func TestVerifySecretRotation(t *testing.T) {
	file := func(secret string) *Keyring {
		k, err := Parse([]byte("principals: [{name: alice, accessKeys: [{id: "+aliceID+", secret: "+secret+"}]}]"), "000000000000")
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	old, rotated := strings.Repeat("o", 40), strings.Repeat("n", 40)
	var current atomic.Pointer[Keyring]
	current.Store(file(old))
	v := NewVerifier("us-east-1", current.Load)
	srv := verifyServer(t, v)
	if got := send(t, signed(t, "GET", srv.URL+"/x", "", aliceID, old, "us-east-1", "batch", time.Now())); !strings.HasPrefix(got, "ok alice") {
		t.Fatalf("the old secret before the rotation: %s", got)
	}
	current.Store(file(rotated))
	if got := send(t, signed(t, "GET", srv.URL+"/x", "", aliceID, old, "us-east-1", "batch", time.Now())); !strings.HasPrefix(got, "bad_signature") {
		t.Fatalf("the old secret after the rotation: %s", got)
	}
	if got := send(t, signed(t, "GET", srv.URL+"/x", "", aliceID, rotated, "us-east-1", "batch", time.Now())); !strings.HasPrefix(got, "ok alice") {
		t.Fatalf("the new secret: %s", got)
	}
}
