package security_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/batch"

	"qshare/internal/batchclient"
	"qshare/internal/serveproc"
)

// makeCA writes a new CA and a server certificate it signed for 127.0.0.1
// and localhost into dir (made if need be), and returns the paths of the
// CA's certificate, the server's certificate and the server's key. The
// server's certificate has serial number 2, or serial[0] when given.
func makeCA(t *testing.T, dir string, serial ...int64) (caFile, certFile, keyFile string) {
	t.Helper()
	must(t, os.MkdirAll(dir, 0o700))
	sn := int64(2)
	if len(serial) > 0 {
		sn = serial[0]
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "qshare test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	must(t, err)
	ca, err := x509.ParseCertificate(caDER)
	must(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	must(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(sn), Subject: pkix.Name{CommonName: "qshare"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	must(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	must(t, err)
	caFile, certFile, keyFile = filepath.Join(dir, "ca.pem"), filepath.Join(dir, "server.pem"), filepath.Join(dir, "server.key")
	must(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o644))
	must(t, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644))
	must(t, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600))
	return caFile, certFile, keyFile
}

// A real qshare serve --auth --tls-cert --tls-key on a loopback address,
// reached through a certificate the test made: the AWS SDK, HTTP/2 and
// HTTP/1.1, and the command line with AWS_CA_BUNDLE; and the refusals of a
// non-loopback address without authentication or TLS.
func TestServeTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := makeCA(t, dir)
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(authFileText(true)), 0o600))

	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "missing: --auth FILE (authentication) and --tls-cert FILE and --tls-key FILE (TLS)"},
		{[]string{"--auth", file}, "missing: --tls-cert FILE and --tls-key FILE (TLS)"},
		{[]string{"--tls-cert", certFile, "--tls-key", keyFile}, "missing: --auth FILE (authentication)"},
		{[]string{"--tls-cert", certFile}, "--tls-cert is given without --tls-key"},
	} {
		args := append([]string{"serve", "--addr", "0.0.0.0:0", "--data-dir", filepath.Join(dir, "refused"), "--executor", "simulated"}, c.args...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		if err == nil || !strings.Contains(string(out), c.want) {
			t.Errorf("qshare %s: %v\n%s\nwant %q", strings.Join(args, " "), err, out, c.want)
		}
	}

	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "warn", "--auth", file, "--tls-cert", certFile, "--tls-key", keyFile}, StopWait: 20 * time.Second})
	if !strings.HasPrefix(srv.Endpoint, "https://127.0.0.1:") {
		t.Fatalf("endpoint %s, want https://127.0.0.1:PORT", srv.Endpoint)
	}
	pem, err := os.ReadFile(caFile)
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)

	// HTTP/2 and HTTP/1.1, each signed.
	creds := credentials.NewStaticCredentialsProvider(adminKey[0], adminKey[1], "")
	for _, c := range []struct {
		name  string
		tr    *http.Transport
		major int
	}{
		{"HTTP/2", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}, 2},
		{"HTTP/1.1", &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, TLSNextProto: map[string]func(string, *tls.Conn) http.RoundTripper{}}, 1},
	} {
		hc := batchclient.SignedHTTPClient(&http.Client{Transport: c.tr}, creds, "us-east-1")
		resp, err := hc.Get(srv.Endpoint + "/qshare/v1/lending")
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.ProtoMajor != c.major {
			t.Errorf("%s: %s %d %s", c.name, resp.Proto, resp.StatusCode, b)
		}
	}
	// The AWS SDK through AWS_CA_BUNDLE, as the command line makes its client.
	t.Setenv("AWS_CA_BUNDLE", caFile)
	hc, err := batchclient.HTTPClient()
	must(t, err)
	if _, err := batchclient.NewSigned(srv.Endpoint, "us-east-1", creds, hc, batchclient.NoRetry).ListSchedulingPolicies(context.Background(), &batch.ListSchedulingPoliciesInput{}); err != nil {
		t.Fatalf("the SDK over TLS: %v", err)
	}
	// Unsigned over TLS is still refused by name.
	if _, err := batchclient.NewSigned(srv.Endpoint, "us-east-1", batchclient.Placeholder, hc, batchclient.NoRetry).ListSchedulingPolicies(context.Background(), &batch.ListSchedulingPoliciesInput{}); awsCode(err) != "UnrecognizedClientException" {
		t.Fatalf("placeholder credentials over TLS: %v", err)
	}
	// The command line: with AWS_CA_BUNDLE it works; without, it does not
	// trust the server.
	env := []string{"QSHARE_ENDPOINT=" + srv.Endpoint, "AWS_ACCESS_KEY_ID=" + aliceKey[0], "AWS_SECRET_ACCESS_KEY=" + aliceKey[1]}
	if out, err := cli(t, append(env, "AWS_CA_BUNDLE="+caFile), "jobs"); err != nil {
		t.Fatalf("qshare jobs over TLS with AWS_CA_BUNDLE: %v\n%s", err, out)
	}
	if out, err := cli(t, env, "jobs"); err == nil || !strings.Contains(out, "certificate") {
		t.Fatalf("qshare jobs over TLS without AWS_CA_BUNDLE: %v\n%s", err, out)
	}
}

// A renewed certificate is served without a restart: the files replaced
// and SIGHUP, the next handshake gets the new certificate (from another
// CA here, so that the old pool no longer trusts it); a broken pair on a
// later SIGHUP changes nothing, and the log says so.
func TestServeTLSReload(t *testing.T) {
	t.Parallel() // a server and files of its own (TestMain)
	dir := t.TempDir()
	ca1, certFile, keyFile := makeCA(t, filepath.Join(dir, "first"))
	file := filepath.Join(dir, "auth.yaml")
	must(t, os.WriteFile(file, []byte(authFileText(true)), 0o600))
	srv := serveproc.StartTest(t, serveproc.Options{Binary: bin, DataDir: filepath.Join(dir, "data"),
		Args: []string{"--executor", "simulated", "--log-level", "info", "--auth", file, "--tls-cert", certFile, "--tls-key", keyFile}, StopWait: 20 * time.Second})
	addr := strings.TrimPrefix(srv.Endpoint, "https://")
	// handshake dials the server anew and returns the serial number of the
	// certificate it was given, or the error of a pool that does not trust it.
	handshake := func(caFile string) (int64, error) {
		b, err := os.ReadFile(caFile)
		must(t, err)
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(b)
		c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
		if err != nil {
			return 0, err
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0].SerialNumber.Int64(), nil
	}
	if serial, err := handshake(ca1); err != nil || serial != 2 {
		t.Fatalf("the first certificate: serial %d, %v", serial, err)
	}
	// The renewal: a certificate of another CA, serial 3, written over the files.
	ca2, cert2, key2 := makeCA(t, filepath.Join(dir, "second"), 3)
	for from, to := range map[string]string{cert2: certFile, key2: keyFile} {
		b, err := os.ReadFile(from)
		must(t, err)
		must(t, os.WriteFile(to, b, 0o600))
	}
	if serial, err := handshake(ca1); err != nil || serial != 2 {
		t.Fatalf("before SIGHUP the server must still serve the first certificate: serial %d, %v", serial, err)
	}
	must(t, syscall.Kill(srv.Pid(), syscall.SIGHUP))
	deadline := time.Now().Add(10 * time.Second)
	for {
		serial, err := handshake(ca2)
		if err == nil && serial == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after SIGHUP the server does not serve the renewed certificate: serial %d, %v\n%s", serial, err, srv.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := handshake(ca1); err == nil {
		t.Fatal("the first CA still verifies the server after the renewal")
	}
	if !strings.Contains(srv.Log(), "TLS certificate reloaded") {
		t.Errorf("the log does not say the certificate was reloaded:\n%s", srv.Log())
	}
	// A broken pair: the renewed certificate stays.
	must(t, os.WriteFile(keyFile, []byte("not a key\n"), 0o600))
	must(t, syscall.Kill(srv.Pid(), syscall.SIGHUP))
	for !strings.Contains(srv.Log(), "the TLS certificate was not reloaded; the one loaded before stays in force") {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("no word of the broken pair in the log:\n%s", srv.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if serial, err := handshake(ca2); err != nil || serial != 3 {
		t.Fatalf("after a broken pair and SIGHUP: serial %d, %v", serial, err)
	}
	// The API still answers over the new certificate.
	b, err := os.ReadFile(ca2)
	must(t, err)
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(b)
	hc := batchclient.SignedHTTPClient(&http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}},
		credentials.NewStaticCredentialsProvider(adminKey[0], adminKey[1], ""), "us-east-1")
	resp, err := hc.Get(srv.Endpoint + "/qshare/v1/lending")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("the API over the renewed certificate: %d", resp.StatusCode)
	}
}
