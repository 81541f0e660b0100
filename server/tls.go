package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// TLS of qshare serve (--tls-cert, --tls-key): with it the server speaks
// HTTPS, HTTP/1.1 and HTTP/2, and may listen beyond loopback when
// authentication is on too. The pair is read again on SIGHUP.

// checkListenAddr refuses an --addr the settings do not make safe: a
// loopback address is always allowed; any other needs authentication
// (--auth) and TLS (--tls-cert and --tls-key), and the error names what is
// missing. One of --tls-cert and --tls-key without the other is refused
// too.
func checkListenAddr(s Settings) error {
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

// certReloader holds the server's certificate, read from --tls-cert and
// --tls-key at start and again on each SIGHUP, so that a renewed
// certificate is served without a restart. Each TLS handshake takes the
// one in force (GetCertificate); connections already open keep theirs. It
// is safe for concurrent use.
type certReloader struct {
	certFile, keyFile string
	cert              atomic.Pointer[tls.Certificate]
}

// load reads the pair and, when it is valid, puts it in force; otherwise
// the one in force stays and the error names the flags.
func (c *certReloader) load() error {
	cert, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		return fmt.Errorf("--tls-cert %s, --tls-key %s: %w", c.certFile, c.keyFile, err)
	}
	c.cert.Store(&cert)
	return nil
}

func (c *certReloader) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return c.cert.Load(), nil
}

// reloadOnHangup reads the pair again on each SIGHUP until ctx ends (the
// auth file is reloaded on the same signal), and logs the outcome: the new
// certificate's subject and expiry, or why the one in force stays.
func (c *certReloader) reloadOnHangup(ctx context.Context, log *slog.Logger) {
	onHangup(ctx, func() {
		if err := c.load(); err != nil {
			log.Error("the TLS certificate was not reloaded; the one loaded before stays in force", "err", err)
			return
		}
		if leaf, err := x509.ParseCertificate(c.cert.Load().Certificate[0]); err == nil {
			log.Info("TLS certificate reloaded", "file", c.certFile, "subject", leaf.Subject.String(), "notAfter", leaf.NotAfter.UTC().Format(time.RFC3339))
		}
	})
}

// serverTLS returns the TLS configuration of the settings and the
// reloader of its certificate, or nils for plain HTTP; an unreadable or
// mismatched pair is an error naming the flags.
func serverTLS(s Settings) (*tls.Config, *certReloader, error) {
	if s.Guard.TLSCert == "" {
		return nil, nil, nil
	}
	c := &certReloader{certFile: s.Guard.TLSCert, keyFile: s.Guard.TLSKey}
	if err := c.load(); err != nil {
		return nil, nil, err
	}
	return &tls.Config{GetCertificate: c.getCertificate, MinVersion: tls.VersionTLS12}, c, nil
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
