package auth

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strconv"
)

// peerUIDSupported: on Linux the user of a local TCP connection's other end
// is in /proc/net/tcp and /proc/net/tcp6.
const peerUIDSupported = true

// errPeerUnsupported is never returned on Linux.
var errPeerUnsupported = errors.New("the peer's user cannot be learned on this system")

// procNet is where the kernel lists the TCP sockets of this network
// namespace (a variable so a test can point it at a file of its own).
var procNet = [2]string{"/proc/net/tcp", "/proc/net/tcp6"}

// connUID returns the uid of the process that opened the other end of c, a
// TCP connection accepted by this server from a socket on this machine.
//
// The client's socket is the row of /proc/net/tcp (or tcp6) whose local
// address is c's remote address and whose remote address is c's local
// address; its uid column is the user who created it. A row whose inode is
// 0 is a socket no process holds any more (closed, or a TIME_WAIT
// mini-socket, which the kernel lists with uid 0): it proves nothing, so it
// is an error, not root.
func connUID(c net.Conn) (int, error) {
	la, lok := c.LocalAddr().(*net.TCPAddr)
	ra, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("not a TCP connection")
	}
	local, remote := la.AddrPort(), ra.AddrPort()
	return socketUID(remote, local)
}

// socketUID returns the uid of the socket whose local address is local and
// whose remote address is remote.
func socketUID(local, remote netip.AddrPort) (int, error) {
	l4, r4 := local.Addr().Unmap(), remote.Addr().Unmap()
	type try struct {
		file          string
		local, remote []byte
	}
	var tries []try
	if l4.Is4() && r4.Is4() {
		// An IPv4 client's socket is in tcp, or in tcp6 as ::ffff:a.b.c.d
		// when the client used an IPv6 socket.
		l6, r6 := netip.AddrFrom16(l4.As16()), netip.AddrFrom16(r4.As16())
		tries = []try{
			{procNet[0], procAddr(netip.AddrPortFrom(l4, local.Port())), procAddr(netip.AddrPortFrom(r4, remote.Port()))},
			{procNet[1], procAddr(netip.AddrPortFrom(l6, local.Port())), procAddr(netip.AddrPortFrom(r6, remote.Port()))},
		}
	} else {
		tries = []try{{procNet[1], procAddr(local), procAddr(remote)}}
	}
	var readErr error
	for _, t := range tries {
		b, err := os.ReadFile(t.file)
		if err != nil {
			readErr = err
			continue
		}
		uid, found, err := findUID(b, t.local, t.remote)
		if found {
			return uid, err
		}
	}
	if readErr != nil {
		return 0, fmt.Errorf("the kernel's list of TCP sockets cannot be read: %v", errors.Unwrap(readErr))
	}
	return 0, errors.New("its socket is not among this machine's TCP sockets")
}

// procAddr writes ap as /proc/net/tcp* does: the address as 32-bit words,
// each printed in hex as the machine holds it in memory, then ':' and the
// port in hex, upper case.
func procAddr(ap netip.AddrPort) []byte {
	var out []byte
	a := ap.Addr()
	var raw []byte
	if a.Is4() {
		b := a.As4()
		raw = b[:]
	} else {
		b := a.As16()
		raw = b[:]
	}
	for i := 0; i < len(raw); i += 4 {
		out = fmt.Appendf(out, "%08X", binary.NativeEndian.Uint32(raw[i:i+4]))
	}
	return fmt.Appendf(out, ":%04X", ap.Port())
}

// findUID finds the row of a /proc/net/tcp* listing with the given local and
// remote addresses (in procAddr's form) and returns its uid; found is false
// when there is no such row.
func findUID(listing, local, remote []byte) (uid int, found bool, err error) {
	needle := append(append(append([]byte(" "), local...), ' '), remote...)
	needle = append(needle, ' ')
	i := bytes.Index(listing, needle)
	if i < 0 {
		return 0, false, nil
	}
	line := listing[i:]
	if j := bytes.IndexByte(line, '\n'); j >= 0 {
		line = line[:j]
	}
	// " local remote st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode ..."
	f := bytes.Fields(line)
	if len(f) < 9 {
		return 0, true, errors.New("the kernel's list of TCP sockets has a row qshare cannot read")
	}
	if string(f[8]) == "0" {
		return 0, true, errors.New("the client closed its end of the connection")
	}
	n, err := strconv.Atoi(string(f[6]))
	if err != nil || n < 0 {
		return 0, true, errors.New("the kernel's list of TCP sockets has a row qshare cannot read")
	}
	return n, true, nil
}
