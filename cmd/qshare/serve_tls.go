package main

import (
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
)

// TLS of qshare serve (--tls-cert, --tls-key): with it the server speaks
// HTTPS, HTTP/1.1 and HTTP/2, and may listen beyond loopback when
// authentication is on too.

var tlsFlags struct{ cert, key string }

func init() {
	f := serveCmd.Flags()
	f.StringVar(&tlsFlags.cert, "tls-cert", "", "serve HTTPS with the certificate (chain) in PEM `FILE`; with --tls-key, and with --auth, --addr may be a non-loopback address (docs/security.md)")
	f.StringVar(&tlsFlags.key, "tls-key", "", "the private key of --tls-cert, a PEM `FILE`")
}

// resolveTLSSettings layers QSHARE_TLS_CERT and QSHARE_TLS_KEY, then the
// flags, over the config file's tlsCert and tlsKey.
func resolveTLSSettings(f interface{ Changed(string) bool }, g *guardSettings) {
	for _, e := range []struct {
		flag, env string
		dst       *string
		given     string
	}{{"tls-cert", "QSHARE_TLS_CERT", &g.TLSCert, tlsFlags.cert}, {"tls-key", "QSHARE_TLS_KEY", &g.TLSKey, tlsFlags.key}} {
		if v, ok := os.LookupEnv(e.env); ok {
			*e.dst = v
		}
		if f.Changed(e.flag) {
			*e.dst = e.given
		}
	}
}

// checkListenAddr refuses an --addr the settings do not make safe: a
// loopback address is always allowed; any other needs authentication
// (--auth) and TLS (--tls-cert and --tls-key), and the error names what is
// missing. One of --tls-cert and --tls-key without the other is refused
// too.
func checkListenAddr(s serveSettings) error {
	g := s.Guard
	if (g.TLSCert == "") != (g.TLSKey == "") {
		if g.TLSCert == "" {
			return fmt.Errorf("--tls-key is given without --tls-cert: give both, the certificate and its private key")
		}
		return fmt.Errorf("--tls-cert is given without --tls-key: give both, the certificate and its private key")
	}
	loopErr := checkLoopback(s.Addr)
	if loopErr == nil {
		return nil
	}
	if _, _, err := net.SplitHostPort(s.Addr); err != nil {
		return loopErr
	}
	var missing []string
	if g.Auth == "" {
		missing = append(missing, "--auth FILE (authentication)")
	}
	if g.TLSCert == "" {
		missing = append(missing, "--tls-cert FILE and --tls-key FILE (TLS)")
	}
	if len(missing) > 0 {
		return fmt.Errorf("refusing to listen on %q, which other machines can reach: its jobs run commands, so a server beyond loopback needs authentication and TLS; missing: %s. Or listen on a loopback address such as 127.0.0.1:8750 (see docs/security.md)", s.Addr, strings.Join(missing, " and "))
	}
	return nil
}

// serverTLS returns the TLS configuration of the settings, or nil for
// plain HTTP; an unreadable or mismatched pair is an error naming the
// flags.
func serverTLS(s serveSettings) (*tls.Config, error) {
	if s.Guard.TLSCert == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(s.Guard.TLSCert, s.Guard.TLSKey)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert %s, --tls-key %s: %w", s.Guard.TLSCert, s.Guard.TLSKey, err)
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, nil
}

// serveOn serves srv on ln: HTTPS (HTTP/2 and HTTP/1.1) with cfg, plain
// HTTP/1.1 without.
func serveOn(srv *http.Server, ln net.Listener, cfg *tls.Config) error {
	if cfg == nil {
		return srv.Serve(ln)
	}
	srv.TLSConfig = cfg
	return srv.ServeTLS(ln, "", "")
}

// scheme is the URL scheme of a server with TLS configuration cfg.
func scheme(cfg *tls.Config) string {
	if cfg == nil {
		return "http"
	}
	return "https"
}
