package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"qshare/server"
)

// TestServeSettings checks the precedence: flag over environment over config
// file over default.
func TestServeSettings(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "qshare.yaml")
	if err := os.WriteFile(cfg, []byte("addr: 127.0.0.1:1111\ndataDir: /from/file\nregion: eu-west-1\nlogLevel: debug\nmaxQuotaSharesPerQueue: 30\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("QSHARE_CONFIG", cfg)
	t.Setenv("QSHARE_DATA_DIR", "/from/env")
	t.Setenv("QSHARE_REGION", "ap-south-1")
	t.Setenv("QSHARE_MAX_QUOTA_SHARES_PER_QUEUE", "40")
	t.Setenv("QSHARE_JOB_RETENTION", "36h")
	t.Setenv("QSHARE_STORE", "sqlite:/from/env.db")
	cmd := *serveCmd // a copy, so the real command's flags stay untouched
	cmd.ResetFlags()
	saved := serveFlags
	t.Cleanup(func() { serveFlags = saved })
	f := cmd.Flags()
	addServeFlags(f)
	if err := f.Parse([]string{"--region", "us-west-2"}); err != nil {
		t.Fatal(err)
	}
	s, err := resolveServeSettings(&cmd)
	if err != nil {
		t.Fatal(err)
	}
	want := server.DefaultSettings()
	want.Addr, want.LogLevel = "127.0.0.1:1111", "debug"   // file
	want.DataDir, want.MaxSharesPerQueue = "/from/env", 40 // environment over file
	want.Region = "us-west-2"                              // flag over environment
	want.JobRetention = "36h"                              // environment over default
	want.Store = "sqlite:/from/env.db"                     // environment over default
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("settings = %+v\nwant       %+v", s, want)
	}
	if err := os.WriteFile(cfg, []byte("adress: x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := resolveServeSettings(&cmd); err == nil || !strings.Contains(err.Error(), "adress") {
		t.Fatalf("unknown config key: %v", err)
	}
}

// TestGuardSettings layers the guard's allow lists: a YAML list or a
// comma-separated string in the config file, QSHARE_ALLOW_* over it, and
// repeated flags over both.
func TestGuardSettings(t *testing.T) {
	var s server.Settings
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
	if got := s.Guard.AllowOrigins.List(); strings.Join(got, " ") != "https://x.example https://y.example" {
		t.Errorf("flags over environment: origins %q", got)
	}
	if got := s.Guard.AllowHosts.List(); strings.Join(got, " ") != "env.example" {
		t.Errorf("environment over file: hosts %q", got)
	}
	if got := server.NameList("").List(); got != nil {
		t.Errorf("empty list: %q", got)
	}
}

// TestAuthSetting layers --auth over QSHARE_AUTH over the config file's
// auth key.
func TestAuthSetting(t *testing.T) {
	var s server.Settings
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

}
