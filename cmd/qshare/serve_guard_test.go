package main

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

// TestGuardSettings layers the guard's allow lists: a YAML list or a
// comma-separated string in the config file, QSHARE_ALLOW_* over it, and
// repeated flags over both.
func TestGuardSettings(t *testing.T) {
	var s serveSettings
	dec := yaml.NewDecoder(strings.NewReader("allowOrigins: [https://a.example, ' https://b.example:8443 ']\nallowHosts: qshare.internal, tunnel:9000\n"))
	dec.KnownFields(true)
	if err := dec.Decode(&s); err != nil {
		t.Fatal(err)
	}
	if s.Guard.AllowOrigins != "https://a.example,https://b.example:8443" || s.Guard.AllowHosts != "qshare.internal,tunnel:9000" {
		t.Fatalf("from the file: %+v", s.Guard)
	}

	saved := guardFlags
	t.Cleanup(func() { guardFlags = saved })
	cmd := &cobra.Command{}
	cmd.Flags().StringArrayVar(&guardFlags.allowOrigins, "allow-origin", nil, "")
	cmd.Flags().StringArrayVar(&guardFlags.allowHosts, "allow-host", nil, "")
	t.Setenv("QSHARE_ALLOW_HOST", "env.example,,")
	t.Setenv("QSHARE_ALLOW_ORIGIN", "https://env.example")
	if err := cmd.Flags().Parse([]string{"--allow-origin", "https://x.example", "--allow-origin", "https://y.example"}); err != nil {
		t.Fatal(err)
	}
	resolveGuardSettings(cmd, &s.Guard)
	if got := s.Guard.AllowOrigins.list(); strings.Join(got, " ") != "https://x.example https://y.example" {
		t.Errorf("flags over environment: origins %q", got)
	}
	if got := s.Guard.AllowHosts.list(); strings.Join(got, " ") != "env.example" {
		t.Errorf("environment over file: hosts %q", got)
	}
	if got := nameList("").list(); got != nil {
		t.Errorf("empty list: %q", got)
	}
}

// TestAuthSetting layers --auth over QSHARE_AUTH over the config file's
// auth key, and a server with a malformed or world-readable auth file does
// not start, naming the file's fault.
func TestAuthSetting(t *testing.T) {
	var s serveSettings
	if err := yaml.Unmarshal([]byte("auth: /from/file.yaml\n"), &s); err != nil || s.Guard.Auth != "/from/file.yaml" {
		t.Fatalf("from the file: %q %v", s.Guard.Auth, err)
	}
	saved := guardFlags
	t.Cleanup(func() { guardFlags = saved })
	cmd := &cobra.Command{}
	cmd.Flags().StringVar(&guardFlags.auth, "auth", "", "")
	t.Setenv("QSHARE_AUTH", "/from/env.yaml")
	resolveGuardSettings(cmd, &s.Guard)
	if s.Guard.Auth != "/from/env.yaml" {
		t.Errorf("environment over file: %q", s.Guard.Auth)
	}
	if err := cmd.Flags().Parse([]string{"--auth", "/from/flag.yaml"}); err != nil {
		t.Fatal(err)
	}
	resolveGuardSettings(cmd, &s.Guard)
	if s.Guard.Auth != "/from/flag.yaml" {
		t.Errorf("flag over environment: %q", s.Guard.Auth)
	}

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
		st := defaultServeSettings()
		st.Addr, st.DataDir, st.Executor, st.Guard.Auth = "127.0.0.1:0", filepath.Join(dir, "data"), "simulated", file
		err := runServe(context.Background(), st, io.Discard)
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
		s := defaultServeSettings()
		s.Addr, s.Guard.Auth, s.Guard.TLSCert, s.Guard.TLSKey = c.addr, c.auth, c.cert, c.key
		err := checkListenAddr(s)
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("checkListenAddr(%s, auth %q, cert %q, key %q) = %v, want %q", c.addr, c.auth, c.cert, c.key, err, c.want)
		}
	}
}
