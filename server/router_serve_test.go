package server

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"qshare/auth"
)

// TestRouterServes runs qshare serve --auth and checks the one router's
// decisions as a client sees them: the dashboard's files and the probes
// unsigned; a path that cleans to the Batch API, spelt with encoded
// slashes under /ui/, refused as not canonical, signed or not (issue 30,
// point 7: it once skipped the signature check); a request signed for a service the server does not serve answered
// in the JSON error shape with 400, not 500 or HTML; and a request signed
// for batch served.
func TestRouterServes(t *testing.T) {
	s := simServeSettings(t)
	s.Guard.Auth = filepath.Join(t.TempDir(), "auth.yaml")
	k, err := auth.NewKey()
	serveMust(t, err)
	serveMust(t, os.WriteFile(s.Guard.Auth, []byte("principals: [{name: ops, accessKeys: [{id: "+k.ID+", secret: \""+k.Secret+"\"}], policies: [all]}]\n"+
		"policies: {all: {Version: \"2012-10-17\", Statement: [{Effect: Allow, Action: \"batch:*\", Resource: \"*\"}]}}\n"), 0o600))
	base := "http://" + serveAt(t, s)
	waitReady(t, base)

	do := func(method, path, service string) (int, string, string) {
		t.Helper()
		req, err := http.NewRequest(method, base+path, nil)
		serveMust(t, err)
		if service != "" {
			sum := sha256.Sum256(nil)
			serveMust(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: k.ID, SecretAccessKey: k.Secret},
				req, hex.EncodeToString(sum[:]), service, s.Region, time.Now()))
		}
		resp, err := http.DefaultClient.Do(req)
		serveMust(t, err)
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Content-Type"), string(b)
	}
	if code, _, body := do("GET", "/ui/", ""); code != http.StatusOK || !strings.Contains(body, "<html") {
		t.Errorf("GET /ui/ unsigned: %d %.100q, want the dashboard's page", code, body)
	}
	if code, _, _ := do("GET", "/healthz", ""); code != http.StatusOK {
		t.Errorf("GET /healthz unsigned: %d", code)
	}
	if code, _, body := do("POST", "/v1/listservicejobs", ""); code != http.StatusForbidden || !strings.Contains(body, "MissingAuthenticationToken") {
		t.Errorf("POST /v1/listservicejobs unsigned: %d %.200q, want 403 MissingAuthenticationToken", code, body)
	}
	for _, p := range []string{"/ui%2F..%2Fv1/listservicejobs", "/ui/../v1/listservicejobs", "/ui/..//v1/listservicejobs"} {
		if code, _, body := do("POST", p, ""); code != http.StatusBadRequest || !strings.Contains(body, "not in canonical form") {
			t.Errorf("POST %s unsigned: %d %.200q, want 400: not in canonical form", p, code, body)
		}
	}
	if code, _, body := do("POST", "/ui%2F..%2Fv1/listservicejobs", "batch"); code != http.StatusBadRequest || !strings.Contains(body, "not in canonical form") {
		t.Errorf("POST /ui%%2F..%%2Fv1/listservicejobs signed: %d %.200q, want 400: not in canonical form", code, body)
	}
	code, ct, body := do("POST", "/", "ec2")
	if code != http.StatusBadRequest || ct != "application/json" || !strings.Contains(body, `does not serve the service \"ec2\"`) {
		t.Errorf("a request signed for ec2: %d %s %.200q, want 400 in JSON saying the service is not served", code, ct, body)
	}
	if code, _, body := do("GET", "/qshare/v1/whoami", "batch"); code != http.StatusOK || !strings.Contains(body, "ops") {
		t.Errorf("GET whoami signed for batch: %d %.200q", code, body)
	}
}

// waitReady waits until base's /readyz says the store is loaded.
func waitReady(t *testing.T, base string) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Get(base + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("not ready within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
