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
	"syscall"
)

// peerUIDSupported: on Linux the kernel tells the user of a local TCP
// connection's other end (sock_diag, or /proc/net/tcp and /proc/net/tcp6).
const peerUIDSupported = true

// errPeerUnsupported is never returned on Linux.
var errPeerUnsupported = errors.New("the peer's user cannot be learned on this system")

// procNet is where the kernel lists the TCP sockets of this network
// namespace (a variable so a test can point it at a file of its own).
var procNet = [2]string{"/proc/net/tcp", "/proc/net/tcp6"}

// connUID returns the uid of the process that opened the other end of c, a
// TCP connection accepted by this server from a socket on this machine.
//
// The client's socket is the one whose local address is c's remote address
// and whose remote address is c's local address; the kernel records the
// user who created it. qshare asks the kernel for that one socket through
// sock_diag (netlink), an exact lookup of a few microseconds; where netlink
// is not available it reads /proc/net/tcp and /proc/net/tcp6 instead, whose
// cost grows with every socket of the network namespace (TIME_WAIT ones
// included). A socket that no process holds any more (closed, or a
// TIME_WAIT mini-socket, which the kernel reports with uid 0) has inode 0:
// it proves nothing, so it is an error, not root.
func connUID(c net.Conn) (int, error) {
	la, lok := c.LocalAddr().(*net.TCPAddr)
	ra, rok := c.RemoteAddr().(*net.TCPAddr)
	if !lok || !rok {
		return 0, fmt.Errorf("not a TCP connection")
	}
	local, remote := la.AddrPort(), ra.AddrPort()
	uid, err := diagUID(remote, local)
	if errors.Is(err, errNoDiag) {
		return socketUID(remote, local)
	}
	return uid, err
}

// errNoDiag: this kernel (or sandbox) answers no sock_diag request.
var errNoDiag = errors.New("sock_diag is not available")

// errClosed: the client's socket is no longer held by any process.
var errClosed = errors.New("the client closed its end of the connection")

// diagUID asks the kernel, through a NETLINK_SOCK_DIAG request for one
// socket (SOCK_DIAG_BY_FAMILY without NLM_F_DUMP), for the uid of the TCP
// socket whose local address is local and whose remote address is remote.
func diagUID(local, remote netip.AddrPort) (int, error) {
	l4, r4 := local.Addr().Unmap(), remote.Addr().Unmap()
	if l4.Is4() && r4.Is4() {
		uid, err := diagLookup(syscall.AF_INET, netip.AddrPortFrom(l4, local.Port()), netip.AddrPortFrom(r4, remote.Port()))
		if !errors.Is(err, syscall.ENOENT) {
			return uid, err
		}
		// A client's IPv6 socket connected to ::ffff:a.b.c.d.
		local = netip.AddrPortFrom(netip.AddrFrom16(l4.As16()), local.Port())
		remote = netip.AddrPortFrom(netip.AddrFrom16(r4.As16()), remote.Port())
	}
	uid, err := diagLookup(syscall.AF_INET6, local, remote)
	if errors.Is(err, syscall.ENOENT) {
		return 0, errors.New("its socket is not among this machine's TCP sockets")
	}
	return uid, err
}

// Sizes and offsets of struct nlmsghdr, struct inet_diag_req_v2 and
// struct inet_diag_msg (linux/netlink.h, linux/inet_diag.h).
const (
	nlmsgHdrLen     = 16
	diagReqLen      = 56
	diagMsgUIDOff   = 64 // family, state, timer, retrans (4), id (48), expires, rqueue, wqueue (12)
	diagMsgInodeOff = 68
	diagMsgLen      = 72
	sockDiagByFam   = 20 // SOCK_DIAG_BY_FAMILY
	nlmsgError      = 2  // NLMSG_ERROR
)

func diagLookup(family int, local, remote netip.AddrPort) (int, error) {
	fd, err := syscall.Socket(syscall.AF_NETLINK, syscall.SOCK_DGRAM|syscall.SOCK_CLOEXEC, syscall.NETLINK_INET_DIAG)
	if err != nil {
		return 0, errNoDiag
	}
	defer syscall.Close(fd)
	_ = syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &syscall.Timeval{Sec: 2})
	req := make([]byte, nlmsgHdrLen+diagReqLen)
	ne := binary.NativeEndian
	ne.PutUint32(req[0:], uint32(len(req)))
	ne.PutUint16(req[4:], sockDiagByFam)
	ne.PutUint16(req[6:], syscall.NLM_F_REQUEST)
	ne.PutUint32(req[8:], 1) // sequence number
	r := req[nlmsgHdrLen:]
	r[0], r[1] = byte(family), syscall.IPPROTO_TCP
	ne.PutUint32(r[4:], ^uint32(0)) // every state
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], local.Port())
	binary.BigEndian.PutUint16(id[2:], remote.Port())
	putAddr(id[4:20], local.Addr())
	putAddr(id[20:36], remote.Addr())
	ne.PutUint32(id[40:], ^uint32(0)) // INET_DIAG_NOCOOKIE
	ne.PutUint32(id[44:], ^uint32(0))
	if err := syscall.Sendto(fd, req, 0, &syscall.SockaddrNetlink{Family: syscall.AF_NETLINK}); err != nil {
		return 0, errNoDiag
	}
	buf := make([]byte, 8192)
	n, _, err := syscall.Recvfrom(fd, buf, 0)
	if err != nil {
		return 0, errNoDiag
	}
	return parseDiag(buf[:n], id[:36])
}

// putAddr writes a as inet_diag_sockid holds it: 4 bytes for IPv4, 16 for
// IPv6, in network order.
func putAddr(dst []byte, a netip.Addr) {
	if a.Is4() {
		b := a.As4()
		copy(dst, b[:])
		return
	}
	b := a.As16()
	copy(dst, b[:])
}

// parseDiag reads the kernel's answer to one sock_diag request: the uid of
// the socket whose id (ports and addresses, the first 36 bytes of
// inet_diag_sockid) is want, or syscall.ENOENT.
func parseDiag(b, want []byte) (int, error) {
	ne := binary.NativeEndian
	if len(b) < nlmsgHdrLen+4 {
		return 0, errNoDiag
	}
	switch ne.Uint16(b[4:]) {
	case nlmsgError:
		if code := int32(ne.Uint32(b[nlmsgHdrLen:])); code < 0 {
			if syscall.Errno(-code) == syscall.ENOENT {
				return 0, syscall.ENOENT
			}
			return 0, errNoDiag
		}
		return 0, syscall.ENOENT
	case sockDiagByFam:
	default:
		return 0, errNoDiag
	}
	m := b[nlmsgHdrLen:]
	if len(m) < diagMsgLen {
		return 0, errNoDiag
	}
	// The lookup falls back to a listening socket on the address; only the
	// connection itself, with both ends as asked, is an answer.
	if !bytes.Equal(m[4:4+36], want) {
		return 0, syscall.ENOENT
	}
	if ne.Uint32(m[diagMsgInodeOff:]) == 0 {
		return 0, errClosed
	}
	return int(ne.Uint32(m[diagMsgUIDOff:])), nil
}

// socketUID returns the uid of the socket whose local address is local and
// whose remote address is remote, from /proc/net/tcp and /proc/net/tcp6.
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
		return 0, true, errClosed
	}
	n, err := strconv.Atoi(string(f[6]))
	if err != nil || n < 0 {
		return 0, true, errors.New("the kernel's list of TCP sockets has a row qshare cannot read")
	}
	return n, true, nil
}
