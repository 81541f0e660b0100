package auth

import (
	"errors"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// TestListenerLimit: the Listener lets Max connections through and resets
// the next at accept, before it reaches the server; a closed connection
// gives its slot back.
func TestListenerLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	g, err := New(Config{Addr: ln.Addr().String(), WriteError: func(http.ResponseWriter, error) {}})
	if err != nil {
		t.Fatal(err)
	}
	gl := g.Listener(ln, ConnLimits{Max: 2, PerPeer: 1})
	defer gl.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := gl.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	got := func() net.Conn {
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no connection accepted")
		}
		return nil
	}
	// The test's own user is held to Max only, not to PerPeer.
	c1, c2 := dial(), dial()
	s1, s2 := got(), got()
	// The refusal is a reset sent as soon as the listener accepts, so it
	// can reach the client before its own connect has finished: then the
	// dial itself reports it.
	if c3, err := net.Dial("tcp", ln.Addr().String()); err == nil {
		c3.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c3.Read(make([]byte, 1)); err == nil {
			t.Fatal("a third connection, beyond Max 2, was not closed")
		}
		c3.Close()
	} else if !errors.Is(err, syscall.ECONNRESET) {
		t.Fatal(err)
	}
	select {
	case <-accepted:
		t.Fatal("a connection beyond Max reached the server")
	case <-time.After(100 * time.Millisecond):
	}
	s1.Close()
	c4 := dial()
	got().Close()
	for _, c := range []net.Conn{c1, c2, c4, s2} {
		c.Close()
	}
}

// TestRefusalBudget: a peer spends its burst of refusals, is then over
// budget until the refill gives it one, and its refusals are reported as a
// count at most once per refusalReport.
func TestRefusalBudget(t *testing.T) {
	var b refusalBudget
	now := time.Unix(1000, 0)
	for i := range int(refusalBurst) {
		if !b.take("uid 7", now) {
			t.Fatalf("refusal %d refused within the burst", i+1)
		}
	}
	if b.take("uid 7", now) || !b.exhausted("uid 7", now) {
		t.Fatal("the burst is spent, yet the peer is not over budget")
	}
	if b.exhausted("uid 8", now) {
		t.Fatal("another peer shares the first one's budget")
	}
	if b.exhausted("uid 7", now.Add(time.Second/refusalRate+time.Millisecond)) {
		t.Fatal("the refill did not give the peer a refusal back")
	}
	if n, ok := b.report("uid 7", now.Add(refusalReport)); !ok || n != int(refusalBurst)+1 {
		t.Fatalf("report: %d %v, want %d refusals", n, ok, int(refusalBurst)+1)
	}
	if _, ok := b.report("uid 7", now.Add(refusalReport+time.Second)); ok {
		t.Fatal("a second report within refusalReport")
	}
}
