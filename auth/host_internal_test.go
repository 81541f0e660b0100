package auth

import (
	"net/http"
	"testing"
)

// A Host without a port names the scheme's default port: 443 over TLS.
func TestHostDefaultPort(t *testing.T) {
	for _, c := range []struct {
		tls  bool
		addr string
		host string
		want bool
	}{
		{false, "10.0.0.1:443", "10.0.0.1", false},
		{true, "10.0.0.1:443", "10.0.0.1", true},
		{false, "10.0.0.1:80", "10.0.0.1", true},
		{true, "10.0.0.1:80", "10.0.0.1", false},
	} {
		g, err := New(Config{Addr: c.addr, TLS: c.tls, WriteError: func(http.ResponseWriter, error) {}})
		if err != nil {
			t.Fatal(err)
		}
		if got := g.hostAllowed(c.host); got != c.want {
			t.Errorf("TLS %v, listening on %s: Host %s allowed = %v", c.tls, c.addr, c.host, got)
		}
	}
}
