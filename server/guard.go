package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"

	"qshare/api"
	"qshare/auth"
	"qshare/executor/process"
)

// GuardSettings are the settings of the request guard (package auth) that
// stands in front of every route of qshare serve.
type GuardSettings struct {
	AllowOrigins NameList `yaml:"allowOrigins"`
	AllowHosts   NameList `yaml:"allowHosts"`
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
	// AuditMaxMB rotates the audit log when it reaches this many MiB
	// (--audit-max-mb; 0: never): the full file is kept under a new name,
	// and no line is ever dropped (auth.OpenAuditRotating).
	AuditMaxMB int `yaml:"auditMaxMB"`
}

// guardConfigKeys are GuardSettings' YAML keys, for ConfigKeys.
const guardConfigKeys = "allowOrigins, allowHosts, auth, tlsCert, tlsKey, audit, auditMaxMB"

// NameList is a list of names kept as one comma-separated string, so that
// Settings stays comparable. In the config file it is a YAML list or
// a comma-separated string; in the environment a comma-separated string.
type NameList string

// UnmarshalYAML accepts a sequence of strings or one comma-separated string.
func (l *NameList) UnmarshalYAML(n *yaml.Node) error {
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
	*l = JoinNames(xs)
	return nil
}

// JoinNames returns the names of xs, trimmed and without empty ones, as a
// NameList.
func JoinNames(xs []string) NameList {
	var out []string
	for _, x := range xs {
		if x = strings.TrimSpace(x); x != "" {
			out = append(out, x)
		}
	}
	return NameList(strings.Join(out, ","))
}

// List returns the names of l; nil for an empty list.
func (l NameList) List() []string {
	if l == "" {
		return nil
	}
	return strings.Split(string(l), ",")
}

// newGuard returns the request guard for a server listening on ln, and
// the authenticator of --auth (nil without). Without an auth file, the
// guard also serves only the server's own Unix user (and root), and logs
// what it cannot enforce on this system; with one, the router
// authenticates every request that is not to a public route instead, and
// the file is reloaded on SIGHUP until ctx ends. The guard asks the
// router which body types each request's route takes. The caller calls
// the returned function when it has stopped serving (it closes the audit
// log).
func newGuard(ctx context.Context, ln net.Listener, s Settings, log *slog.Logger) (*auth.Guard, *auth.Authenticator, func(), error) {
	g := s.Guard
	cfg := auth.Config{Addr: ln.Addr().String(), AllowOrigins: g.AllowOrigins.List(),
		AllowHosts: g.AllowHosts.List(), SameUserOnly: g.Auth == "", TLS: g.TLSCert != "", WriteError: api.WriteError, Log: log,
		BodyTypes: routeBodyTypes, JobKeys: s.jobKeys}
	done := func() {}
	if g.Audit != "" {
		a, err := auth.OpenAuditRotating(g.Audit, int64(g.AuditMaxMB)<<20)
		if err != nil {
			return nil, nil, nil, err
		}
		cfg.Audit, done = a, func() { a.Close() }
	}
	fail := func(err error) (*auth.Guard, *auth.Authenticator, func(), error) {
		done()
		return nil, nil, nil, err
	}
	var authn *auth.Authenticator
	if g.Auth != "" {
		a, err := auth.NewAuthenticator(auth.AuthConfig{File: g.Auth, Region: s.Region, AccountID: s.AccountID,
			BodyLimit: api.BodyLimit, WriteError: api.WriteError, Log: log, CheckPrincipal: unixUserCheck(s)})
		if err != nil {
			return fail(fmt.Errorf("--auth: %w", err))
		}
		authn = a
	}
	guard, err := auth.New(cfg)
	if err != nil {
		return fail(err)
	}
	if authn != nil {
		reloadOnHangup(ctx, authn)
		log.Info("authentication on", "file", g.Auth, "principals", len(authn.Keys().Principals()))
	}
	for _, w := range guard.Warnings() {
		log.Warn(w)
	}
	return guard, authn, done, nil
}

// routeBodyTypes is the guard's BodyTypes: those of the request's route;
// any for a request that no route takes, which the router refuses, doing
// nothing, with a message that names the service it asked for.
func routeBodyTypes(r *http.Request) []string {
	c := ClassifiedFrom(r.Context())
	if c == nil {
		return nil
	}
	if c.Route == nil {
		return []string{"*"}
	}
	return c.Route.BodyTypes
}

// runsAsPrincipals reports whether the jobs of a server with settings s run
// as their submitter's unixUser: with authentication on and the process
// or the container executor. Such a server refuses a submit by a principal
// without one.
func runsAsPrincipals(s Settings) bool {
	return s.Guard.Auth != "" && (s.Executor == "process" || s.Executor == "container")
}

// unixUserCheck returns the check of each principal's unixUser for a
// server with settings s: with the process or container executor, each must be a user
// this server can run jobs as (process.CheckUser); otherwise none.
func unixUserCheck(s Settings) func(*auth.Principal) error {
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
