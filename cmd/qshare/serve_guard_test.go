package main

import (
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
