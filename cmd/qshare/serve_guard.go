package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"

	"qshare/api"
	"qshare/auth"
	"qshare/executor/process"
	"qshare/metrics"
	"qshare/web"
)

// guardSettings are the settings of the request guard (package auth) that
// stands in front of every route of qshare serve.
type guardSettings struct {
	AllowOrigins nameList `yaml:"allowOrigins"`
	AllowHosts   nameList `yaml:"allowHosts"`
	// Auth is the auth file (--auth): with it, every request must be
	// signed by one of its principals and allowed by their policies.
	Auth string `yaml:"auth"`
	// TLSCert and TLSKey are the server's certificate and key (--tls-cert,
	// --tls-key; serve_tls.go): with them it serves HTTPS.
	TLSCert string `yaml:"tlsCert"`
	TLSKey  string `yaml:"tlsKey"`
	// Audit is the audit log (--audit): a JSON line per mutating or
	// refused request.
	Audit string `yaml:"audit"`
}

// guardConfigKeys are guardSettings' YAML keys, for serveConfigKeys.
const guardConfigKeys = "allowOrigins, allowHosts, auth, tlsCert, tlsKey, audit"

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
	auth, audit              string
}

func init() {
	f := serveCmd.Flags()
	f.StringArrayVar(&guardFlags.allowOrigins, "allow-origin", nil, "also serve browsers the pages of `ORIGIN` (scheme://host[:port]); repeatable. By default only the server's own pages may call it (docs/security.md)")
	f.StringVar(&guardFlags.auth, "auth", "", "turn authentication on: every request must carry an AWS Signature Version 4 of an access key in `FILE` (YAML or JSON, mode 600), and its principal's policies must allow it; reloaded on SIGHUP (docs/security.md)")
	f.StringVar(&guardFlags.audit, "audit", "", "append one JSON line per mutating request and per refused request (time, principal, source, action, resource, outcome, request ID) to `FILE`, made durable before the response (docs/security.md)")
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
	if v, ok := os.LookupEnv("QSHARE_AUTH"); ok {
		g.Auth = v
	}
	if cmd.Flags().Changed("auth") {
		g.Auth = guardFlags.auth
	}
	if v, ok := os.LookupEnv("QSHARE_AUDIT"); ok {
		g.Audit = v
	}
	if cmd.Flags().Changed("audit") {
		g.Audit = guardFlags.audit
	}
	resolveTLSSettings(cmd.Flags(), g)
}

// newGuard returns the request guard for a server listening on ln. Without
// an auth file, the guard also serves only the server's own Unix user (and
// root), and logs what it cannot enforce on this system; with one
// (--auth), it authenticates every request instead, and reloads the file on
// SIGHUP until ctx ends. The caller installs it on its http.Server
// (Guard.Install), and calls the returned function when it has stopped
// serving (it closes the audit log).
func newGuard(ctx context.Context, ln net.Listener, s serveSettings, log *slog.Logger) (*auth.Guard, func(), error) {
	g := s.Guard
	cfg := auth.Config{Addr: ln.Addr().String(), AllowOrigins: g.AllowOrigins.list(),
		AllowHosts: g.AllowHosts.list(), SameUserOnly: g.Auth == "", TLS: g.TLSCert != "", WriteError: api.WriteError, Log: log}
	done := func() {}
	if g.Audit != "" {
		a, err := auth.OpenAudit(g.Audit)
		if err != nil {
			return nil, nil, err
		}
		cfg.Audit, done = a, func() { a.Close() }
	}
	guard, err := newGuardWith(ctx, cfg, s, log)
	if err != nil {
		done()
		return nil, nil, err
	}
	return guard, done, nil
}

// newGuardWith is newGuard's body over cfg.
func newGuardWith(ctx context.Context, cfg auth.Config, s serveSettings, log *slog.Logger) (*auth.Guard, error) {
	g := s.Guard
	if g.Auth != "" {
		a, err := auth.NewAuthenticator(auth.AuthConfig{File: g.Auth, Region: s.Region, AccountID: s.AccountID,
			BodyLimit: api.BodyLimit, WriteError: api.WriteError, Log: log, CheckPrincipal: unixUserCheck(s),
			PublicPaths: []string{metrics.HealthzPath, metrics.ReadyzPath}, PublicPrefixes: []string{web.Path}})
		if err != nil {
			return nil, fmt.Errorf("--auth: %w", err)
		}
		cfg.Authenticator = a
		reloadOnHangup(ctx, a)
		log.Info("authentication on", "file", g.Auth, "principals", len(a.Keys().Principals()))
	}
	guard, err := auth.New(cfg)
	if err != nil {
		return nil, err
	}
	for _, w := range guard.Warnings() {
		log.Warn(w)
	}
	return guard, nil
}

// runsAsPrincipals reports whether the jobs of a server with settings s run
// as their submitter's unixUser: with authentication on and the process
// executor. Such a server refuses a submit by a principal without one.
func runsAsPrincipals(s serveSettings) bool { return s.Guard.Auth != "" && s.Executor == "process" }

// unixUserCheck returns the check of each principal's unixUser for a
// server with settings s: with the process executor, each must be a user
// this server can run jobs as (process.CheckUser); otherwise none.
func unixUserCheck(s serveSettings) func(*auth.Principal) error {
	if !runsAsPrincipals(s) {
		return nil
	}
	return func(p *auth.Principal) error {
		if p.UnixUser == "" {
			return nil
		}
		return process.CheckUser("principal "+p.Name+"'s unixUser", p.UnixUser)
	}
}

// reloadOnHangup reloads the auth file on each SIGHUP until ctx ends; a
// file that is not valid leaves the one in force, and the log says why.
func reloadOnHangup(ctx context.Context, a *auth.Authenticator) {
	onHangup(ctx, func() { _ = a.Reload() }) // it logs the outcome
}

// onHangup calls fn, in a goroutine of its own, on each SIGHUP until ctx
// ends. Each caller gets every signal: the auth file and the TLS
// certificate are both reloaded on one.
func onHangup(ctx context.Context, fn func()) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				fn()
			}
		}
	}()
}
