package server

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAuthFileRefused: a server with a malformed or world-readable auth
// file does not start, and the error names the file's fault.
func TestAuthFileRefused(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "auth.yaml")
	for _, c := range []struct {
		text string
		mode os.FileMode
		want string
	}{
		{"principals: [{name: a, Policies: []}]", 0o600, `--auth: auth file ` + file + `: line 1: member "Policies" is not known`},
		{"principals: [{name: a}]", 0o644, "chmod 600"},
	} {
		if err := os.WriteFile(file, []byte(c.text), c.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(file, c.mode); err != nil {
			t.Fatal(err)
		}
		st := DefaultSettings()
		st.Addr, st.DataDir, st.Executor, st.Guard.Auth = "127.0.0.1:0", filepath.Join(dir, "data"), "simulated", file
		err := Run(context.Background(), st, io.Discard)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("serve with %q (mode %04o): %v, want %q", c.text, c.mode, err, c.want)
		}
	}
}

// TestCheckListenAddr: loopback always; beyond it, authentication and TLS,
// each named when missing; never one TLS file without the other.
func TestCheckListenAddr(t *testing.T) {
	for _, c := range []struct {
		addr, auth, cert, key string
		want                  string // "" for allowed
	}{
		{"127.0.0.1:8750", "", "", "", ""},
		{"127.0.0.1:8750", "", "c.pem", "k.pem", ""},
		{"0.0.0.0:8750", "", "", "", "missing: --auth FILE (authentication) and --tls-cert FILE and --tls-key FILE (TLS)"},
		{"0.0.0.0:8750", "a.yaml", "", "", "missing: --tls-cert FILE and --tls-key FILE (TLS)."},
		{"10.0.0.1:8750", "", "c.pem", "k.pem", "missing: --auth FILE (authentication)."},
		{"[::]:8750", "a.yaml", "c.pem", "k.pem", ""},
		{"127.0.0.1:8750", "", "c.pem", "", "--tls-cert is given without --tls-key"},
		{"127.0.0.1:8750", "", "", "k.pem", "--tls-key is given without --tls-cert"},
		{"nonsense", "a.yaml", "c.pem", "k.pem", "is not HOST:PORT"},
	} {
		s := DefaultSettings()
		s.Addr, s.Guard.Auth, s.Guard.TLSCert, s.Guard.TLSKey = c.addr, c.auth, c.cert, c.key
		err := checkListenAddr(s)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("checkListenAddr(%s, auth %q, cert %q, key %q) = %v, want %q", c.addr, c.auth, c.cert, c.key, err, c.want)
		}
	}
}
