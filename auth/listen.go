package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"math"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Load from outside (issue 30, point 6): a peer that holds thousands of
// connections open, sends a flood of requests that are refused, or sends
// bodies it never signed must not take the server down for everyone else.
// The Guard bounds what such a peer costs at three places: at accept
// (Listener: the other-user rule, and the number of connections open, in
// all and per peer), at each refusal (a per-peer budget of refusals, beyond
// which a peer's requests are refused unread, unlogged one by one, and its
// connection closed), and while a body waits for its signature to be
// checked (the Authenticator's budget of unauthenticated bytes).

// ConnLimits bound the connections a server holds open. A zero field sets
// no bound.
type ConnLimits struct {
	// Max is the most connections open at once, from all peers.
	Max int
	// PerPeer is the most open at once from one peer: a local Unix user
	// (by uid) for a connection from this machine, else the client's IP.
	// The server's own user and root are held to Max only.
	PerPeer int
}

// Listener returns ln behind the Guard at accept. A connection the
// same-user rule refuses (SameUserOnly: another local user) spends one of
// the peer's refusal budget; beyond the budget it is reset at once, before
// a byte of it is read, so that the HTTP server never spends a
// descriptor, a goroutine or a header timeout on it (within it, its first
// request is answered with the reason). A connection beyond the limits is
// reset too. The log counts such resets at most once per peer per ten
// seconds. A
// connection let through carries its peer, so that the same-user rule
// does not look its user up again per request. Close the returned
// listener to close ln.
func (g *Guard) Listener(ln net.Listener, lim ConnLimits) net.Listener {
	return &listener{Listener: ln, g: g, lim: lim, perPeer: map[string]int{}}
}

type listener struct {
	net.Listener
	g   *Guard
	lim ConnLimits

	mu      sync.Mutex
	open    int
	perPeer map[string]int
}

// Accept returns the next connection the Guard lets through.
func (l *listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		p := l.g.peerOf(c)
		if err := l.admit(p); err != nil {
			l.g.refusedAtAccept(p, err)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset: no TIME_WAIT kept for a refused peer
			}
			_ = c.Close()
			continue
		}
		return &guardedConn{Conn: c, l: l, peer: p}, nil
	}
}

// admit takes a slot for p, or says why there is none.
func (l *listener) admit(p *peer) error {
	if l.g.cfg.SameUserOnly {
		// Another local user's connection spends a refusal of its budget
		// now. Within the budget it goes on, so that its first request is
		// answered with the reason (and how to turn authentication on),
		// and then closed; beyond it, it is reset here.
		// A connection that carries a job's S3 requests (JobKeys) gets
		// its refusal back at its first (refund).
		if uid, err := p.user(); err == nil && !l.g.sameUser(uid) && !l.g.spend(p) {
			return fmt.Errorf("connections from another local user (uid %d), which this server without authentication does not serve, beyond its refusal budget", uid)
		}
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lim.Max > 0 && l.open >= l.lim.Max {
		return fmt.Errorf("%d connections are open, the most this server holds (--max-connections)", l.open)
	}
	// The server's own user and root are not held to the per-peer limit:
	// it protects the others from one peer, and they can stop the server
	// anyway; they count towards Max.
	own := false
	if uid, err := p.user(); err == nil && p.local && l.g.sameUser(uid) {
		own = true
	}
	if l.lim.PerPeer > 0 && !own && l.perPeer[p.key()] >= l.lim.PerPeer {
		return fmt.Errorf("%d connections are open from %s, the most one peer may hold (--max-connections-per-peer)", l.perPeer[p.key()], p.key())
	}
	l.open++
	l.perPeer[p.key()]++
	return nil
}

// release gives back p's slot.
func (l *listener) release(p *peer) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.open--
	if n := l.perPeer[p.key()] - 1; n > 0 {
		l.perPeer[p.key()] = n
	} else {
		delete(l.perPeer, p.key())
	}
}

// guardedConn is a connection the Listener let through: it knows its peer,
// and gives back its slot when closed.
type guardedConn struct {
	net.Conn
	l      *listener
	peer   *peer
	closed atomic.Bool
}

func (c *guardedConn) Close() error {
	err := c.Conn.Close()
	if c.closed.CompareAndSwap(false, true) {
		c.l.release(c.peer)
	}
	return err
}

// peerOf returns what the Guard knows of c's other end: for a connection
// from this machine its user (learned now, from the kernel), else its IP.
func (g *Guard) peerOf(c net.Conn) *peer {
	if t, ok := c.(*tls.Conn); ok {
		c = t.NetConn()
	}
	if gc, ok := c.(*guardedConn); ok {
		return gc.peer
	}
	p := &peer{conn: c}
	ra, _ := c.RemoteAddr().(*net.TCPAddr)
	la, _ := c.LocalAddr().(*net.TCPAddr)
	switch {
	case ra == nil || la == nil:
		p.addr = c.RemoteAddr().String()
	case ra.IP.IsLoopback() || ra.IP.Equal(la.IP):
		p.local = true
	default:
		p.addr = ra.IP.String()
	}
	return p
}

// sameUser reports whether uid is the server's own user or root, whom the
// same-user rule serves.
func (g *Guard) sameUser(uid int) bool { return uid == g.uid || uid == 0 }

// spend spends a refusal of p's budget for its connection, and reports
// whether there was one.
func (g *Guard) spend(p *peer) bool {
	if !g.refusals.take(p.key(), time.Now()) {
		return false
	}
	p.spent.Store(true)
	return true
}

// refund gives back the refusal that p's connection spent at accept, once:
// its requests are a job's (JobKeys), which the Guard serves.
func (g *Guard) refund(p *peer) {
	if p != nil && p.spent.CompareAndSwap(true, false) {
		g.refusals.give(p.key(), time.Now())
	}
}

// refusedAtAccept logs a connection refused at accept, at most once per
// peer per ten seconds, with how many were refused since the last line.
func (g *Guard) refusedAtAccept(p *peer, why error) {
	g.refusals.count(p.key(), time.Now())
	if n, ok := g.refusals.report(p.key(), time.Now()); ok {
		g.log.Warn("connections refused at accept", "peer", p.key(), "count", n, "reason", why.Error())
	}
}

// peer is what the Guard knows of a connection's other end. A local
// peer's user is learned once: at accept when the Listener is in front,
// else on the connection's first request, in its own goroutine.
type peer struct {
	conn  net.Conn
	local bool   // from this machine: identified by its user
	addr  string // else by its IP
	once  sync.Once
	uid   int
	err   error
	// spent: the connection spent a refusal at accept (refund).
	spent atomic.Bool
}

func (p *peer) user() (int, error) {
	p.once.Do(func() {
		if !p.local && p.addr != "" {
			p.err = errors.New("the connection comes from another machine")
			return
		}
		p.uid, p.err = connUID(p.conn)
	})
	return p.uid, p.err
}

// key names the peer for its limits: "uid N" for a local user, "IP" for
// another machine, "local" for a local peer whose user is not known.
func (p *peer) key() string {
	if p.local {
		if uid, err := p.user(); err == nil {
			return "uid " + strconv.Itoa(uid)
		}
		return "local"
	}
	return p.addr
}

// peerFrom returns the peer of the connection the request ctx belongs to,
// or nil outside a server with the Guard installed.
func peerFrom(ctx context.Context) *peer {
	p, _ := ctx.Value(peerKey{}).(*peer)
	return p
}

// refusalBudget is each peer's budget of refusals: a token bucket of
// refusalBurst refusals, refilled at refusalRate a second. A peer that
// spends it has its further requests refused unread (tooManyRefusals) until
// it is refilled, and its refusals are logged as a count, once per
// refusalReport. It is safe for concurrent use.
type refusalBudget struct {
	mu    sync.Mutex
	peers map[string]*refusals
}

const (
	refusalRate   = 10.0
	refusalBurst  = 50.0
	refusalReport = 10 * time.Second
	// maxRefusalPeers bounds the map: beyond it, peers whose buckets are
	// full again are forgotten.
	maxRefusalPeers = 4096
)

type refusals struct {
	tokens     float64
	last       time.Time
	unreported int
	reported   time.Time
}

// get returns key's record, making one; with mu held.
func (b *refusalBudget) get(key string, now time.Time) *refusals {
	if b.peers == nil {
		b.peers = map[string]*refusals{}
	}
	r := b.peers[key]
	if r == nil {
		if len(b.peers) >= maxRefusalPeers {
			for k, o := range b.peers {
				if o.tokens+now.Sub(o.last).Seconds()*refusalRate >= refusalBurst && o.unreported == 0 {
					delete(b.peers, k)
				}
			}
		}
		r = &refusals{tokens: refusalBurst, last: now}
		b.peers[key] = r
	}
	r.tokens = math.Min(refusalBurst, r.tokens+now.Sub(r.last).Seconds()*refusalRate)
	r.last = now
	return r
}

// take spends one refusal of key's budget, and reports whether there was
// one to spend (false: the peer is over its budget).
func (b *refusalBudget) take(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.get(key, now)
	r.unreported++
	if r.tokens < 1 {
		return false
	}
	r.tokens--
	return true
}

// count counts a refusal of key for the log without spending its budget:
// a connection beyond the limits, which a client of the server's own user
// may open by mistake.
func (b *refusalBudget) count(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.get(key, now).unreported++
}

// give gives key back a refusal it spent.
func (b *refusalBudget) give(key string, now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.get(key, now)
	r.tokens = math.Min(refusalBurst, r.tokens+1)
	if r.unreported > 0 {
		r.unreported--
	}
}

// exhausted reports whether key has no refusal left to spend.
func (b *refusalBudget) exhausted(key string, now time.Time) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.get(key, now).tokens < 1
}

// report returns how many refusals of key have not been logged, and true
// when it is time to log them (once per refusalReport per peer).
func (b *refusalBudget) report(key string, now time.Time) (int, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	r := b.get(key, now)
	if r.unreported == 0 || now.Sub(r.reported) < refusalReport {
		return 0, false
	}
	n := r.unreported
	r.unreported, r.reported = 0, now
	return n, true
}
