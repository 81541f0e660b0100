package auth

import (
	"encoding/binary"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// dialPair opens a real loopback TCP connection on network ("tcp4" or
// "tcp6") and returns the accepted (server) end.
func dialPair(t *testing.T, network, addr string) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen(network, addr)
	if err != nil {
		t.Skipf("no %s loopback here: %v", network, err)
	}
	defer ln.Close()
	client, err = net.Dial(network, ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close(); server.Close() })
	return server, client
}

// lookups are the two ways connUID can learn a socket's user.
var lookups = map[string]func(local, remote netip.AddrPort) (int, error){"sock_diag": diagUID, "/proc/net": socketUID}

// clientUID asks lookup for the user of the client's end of server, as
// connUID does.
func clientUID(lookup func(local, remote netip.AddrPort) (int, error), server net.Conn) (int, error) {
	return lookup(server.RemoteAddr().(*net.TCPAddr).AddrPort(), server.LocalAddr().(*net.TCPAddr).AddrPort())
}

// TestConnUIDOwnConnection learns the user of real loopback connections,
// IPv4 and IPv6, from the kernel, both ways: it is this process's.
func TestConnUIDOwnConnection(t *testing.T) {
	for _, c := range []struct{ network, addr string }{{"tcp4", "127.0.0.1:0"}, {"tcp6", "[::1]:0"}} {
		server, _ := dialPair(t, c.network, c.addr)
		uid, err := connUID(server)
		if err != nil || uid != os.Geteuid() {
			t.Fatalf("%s: connUID = %d, %v; want this process's %d", c.network, uid, err, os.Geteuid())
		}
		for name, lookup := range lookups {
			uid, err := clientUID(lookup, server)
			if err != nil || uid != os.Geteuid() {
				t.Errorf("%s, %s: uid %d, %v; want this process's %d", c.network, name, uid, err, os.Geteuid())
			}
		}
	}
}

// TestConnUIDIsTheClients shows the socket read is the client's, not the
// server's own accepted one: after the client has closed its end, the
// lookup fails (the kernel reports a socket no process holds with inode 0,
// and a TIME_WAIT one with uid 0) rather than answering the server's uid
// or root.
func TestConnUIDIsTheClients(t *testing.T) {
	server, client := dialPair(t, "tcp4", "127.0.0.1:0")
	client.Close()
	if uid, err := connUID(server); err == nil {
		t.Fatalf("a closed client's connection was attributed to uid %d", uid)
	}
	for name, lookup := range lookups {
		if uid, err := clientUID(lookup, server); err == nil {
			t.Errorf("%s: a closed client's connection was attributed to uid %d", name, uid)
		}
	}
	// A socket that never existed.
	for name, lookup := range lookups {
		if uid, err := lookup(netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2")); err == nil {
			t.Errorf("%s: no socket, but uid %d", name, uid)
		}
	}
}

// TestProcAddr checks the address form against the kernel's own listing of
// a real socket, and the IPv4-mapped form of tcp6.
func TestProcAddr(t *testing.T) {
	if binary.NativeEndian.Uint16([]byte{1, 0}) != 1 {
		t.Skip("the literal forms below are those of a little-endian machine")
	}
	ap := netip.MustParseAddrPort("127.0.0.1:8080")
	if got := string(procAddr(ap)); got != "0100007F:1F90" {
		t.Errorf("procAddr(%v) = %s", ap, got)
	}
	m := netip.AddrPortFrom(netip.AddrFrom16(netip.MustParseAddr("127.0.0.1").As16()), 8080)
	if got := string(procAddr(m)); got != "0000000000000000FFFF00000100007F:1F90" {
		t.Errorf("procAddr(%v) = %s", m, got)
	}
	if got := string(procAddr(netip.MustParseAddrPort("[::1]:443"))); got != "00000000000000000000000001000000:01BB" {
		t.Errorf("procAddr([::1]:443) = %s", got)
	}
}

// TestFindUID reads rows as the kernel writes them: a live socket, a
// TIME_WAIT mini-socket (uid 0, inode 0) that must not pass for root, and
// a listing without the row.
func TestFindUID(t *testing.T) {
	listing := []byte(`  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 2001 1 0000000000000000 100 0 0 10 0
   1: 0100007F:D431 0100007F:1F90 01 00000000:00000000 00:00000000 00000000  1000        0 2002 1 0000000000000000 20 4 30 10 -1
   2: 0100007F:D432 0100007F:1F90 06 00000000:00000000 03:00001770 00000000     0        0 0 3 0000000000000000
`)
	l := func(s string) []byte { return []byte(s) }
	if uid, found, err := findUID(listing, l("0100007F:D431"), l("0100007F:1F90")); !found || err != nil || uid != 1000 {
		t.Errorf("live socket: uid %d found %v err %v, want 1000", uid, found, err)
	}
	if _, found, err := findUID(listing, l("0100007F:D432"), l("0100007F:1F90")); !found || err == nil {
		t.Errorf("TIME_WAIT row: found %v err %v, want an error", found, err)
	}
	if _, found, _ := findUID(listing, l("0100007F:D433"), l("0100007F:1F90")); found {
		t.Error("a missing row was found")
	}
	// The server's own row (local and remote swapped) is not the client's.
	if _, found, _ := findUID(listing, l("0100007F:1F90"), l("0100007F:D431")); found {
		t.Error("the reversed row was taken for the client's")
	}
}

// TestSocketUIDUnreadable: without the kernel's listing (no /proc), the
// user cannot be learned and the error says so without naming a path.
func TestSocketUIDUnreadable(t *testing.T) {
	saved := procNet
	t.Cleanup(func() { procNet = saved })
	dir := t.TempDir()
	procNet = [2]string{filepath.Join(dir, "tcp"), filepath.Join(dir, "tcp6")}
	_, err := socketUID(netip.MustParseAddrPort("127.0.0.1:1"), netip.MustParseAddrPort("127.0.0.1:2"))
	if err == nil {
		t.Fatal("no error")
	}
	if filepath.IsAbs(err.Error()) || strings.Contains(err.Error(), dir) {
		t.Fatalf("the error names a path: %v", err)
	}
}

// BenchmarkConnUID measures the lookup a connection costs once, on its
// first request, with the sockets this machine has open: through
// sock_diag, and through /proc/net (the fallback), whose cost grows with
// the number of sockets.
func BenchmarkConnUID(b *testing.B) {
	for _, name := range []string{"sock_diag", "/proc/net"} {
		b.Run(name, func(b *testing.B) { benchLookup(b, lookups[name]) })
	}
}

func benchLookup(b *testing.B, lookup func(local, remote netip.AddrPort) (int, error)) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	client, err := net.Dial("tcp4", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer client.Close()
	server, err := ln.Accept()
	if err != nil {
		b.Fatal(err)
	}
	defer server.Close()
	for b.Loop() {
		if _, err := clientUID(lookup, server); err != nil {
			b.Fatal(err)
		}
	}
}
