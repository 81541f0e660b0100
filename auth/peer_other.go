//go:build !linux

package auth

import (
	"errors"
	"net"
)

// peerUIDSupported: outside Linux there is no portable way to learn which
// user opened the other end of a TCP connection (macOS and the BSDs give a
// peer's credentials only for Unix sockets), so the same-user rule cannot be
// enforced, and Guard.Warnings says so at start.
const peerUIDSupported = false

// errPeerUnsupported is what connUID returns on this system; the Guard lets
// the request through (it warned at start).
var errPeerUnsupported = errors.New("the peer's user cannot be learned on this system")

func connUID(net.Conn) (int, error) { return 0, errPeerUnsupported }
