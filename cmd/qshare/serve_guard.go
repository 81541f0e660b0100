package main

import (
	"log/slog"
	"net"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"qshare/api"
	"qshare/auth"
)

// guardSettings are the settings of the request guard (package auth) that
// stands in front of every route of qshare serve.
type guardSettings struct {
	AllowOrigins nameList `yaml:"allowOrigins"`
	AllowHosts   nameList `yaml:"allowHosts"`
}

// guardConfigKeys are guardSettings' YAML keys, for serveConfigKeys.
const guardConfigKeys = "allowOrigins, allowHosts"

// nameList is a list of names kept as one comma-separated string, so that
// serveSettings stays comparable. In the config file it is a YAML list or
// a comma-separated string; in the environment a comma-separated string.
type nameList string

// UnmarshalYAML accepts a sequence of strings or one comma-separated string.
func (l *nameList) UnmarshalYAML(n *yaml.Node) error {
	var xs []string
	if n.Kind == yaml.SequenceNode {
		if err := n.Decode(&xs); err != nil {
			return err
		}
	} else {
		var s string
		if err := n.Decode(&s); err != nil {
			return err
		}
		xs = strings.Split(s, ",")
	}
	*l = joinNames(xs)
	return nil
}

func joinNames(xs []string) nameList {
	var out []string
	for _, x := range xs {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return nameList(strings.Join(out, ","))
}

func (l nameList) list() []string {
	if l == "" {
		return nil
	}
	return strings.Split(string(l), ",")
}

var guardFlags struct {
	allowOrigins, allowHosts []string
}

func init() {
	f := serveCmd.Flags()
	f.StringArrayVar(&guardFlags.allowOrigins, "allow-origin", nil, "also serve browsers the pages of `ORIGIN` (scheme://host[:port]); repeatable. By default only the server's own pages may call it (docs/security.md)")
	f.StringArrayVar(&guardFlags.allowHosts, "allow-host", nil, "also answer to `NAME` in the Host header (NAME: on any port, NAME:PORT: on that one), as behind a proxy; repeatable. By default only the listen address (loopback: localhost, 127.0.0.1, [::1]), against DNS rebinding")
}

// resolveGuardSettings layers QSHARE_ALLOW_ORIGIN and QSHARE_ALLOW_HOST
// (comma-separated) and then the flags over what the config file said.
func resolveGuardSettings(cmd *cobra.Command, g *guardSettings) {
	for _, e := range []struct {
		flag, env string
		dst       *nameList
		given     []string
	}{
		{"allow-origin", "QSHARE_ALLOW_ORIGIN", &g.AllowOrigins, guardFlags.allowOrigins},
		{"allow-host", "QSHARE_ALLOW_HOST", &g.AllowHosts, guardFlags.allowHosts},
	} {
		if v, ok := os.LookupEnv(e.env); ok {
			*e.dst = joinNames(strings.Split(v, ","))
		}
		if cmd.Flags().Changed(e.flag) {
			*e.dst = joinNames(e.given)
		}
	}
}

// newGuard returns the request guard for a server listening on ln. Until
// qshare has authentication, the guard also serves only the server's own
// Unix user (and root); it logs what it cannot enforce on this system. The
// caller installs it on its http.Server (Guard.Install).
func newGuard(ln net.Listener, g guardSettings, log *slog.Logger) (*auth.Guard, error) {
	guard, err := auth.New(auth.Config{Addr: ln.Addr().String(), AllowOrigins: g.AllowOrigins.list(),
		AllowHosts: g.AllowHosts.list(), SameUserOnly: true, WriteError: api.WriteError, Log: log})
	if err != nil {
		return nil, err
	}
	for _, w := range guard.Warnings() {
		log.Warn(w)
	}
	return guard, nil
}
