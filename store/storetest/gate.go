package storetest

import (
	"context"
	"sync"
)

// Gate holds back commits, for a store wrapper of a test that looks at the
// server between a change and its commit: while the gate is held, Pass
// waits until Release. Its zero value is released.
type Gate struct {
	mu   sync.Mutex
	held bool
	open chan struct{} // closed by Release; made by Hold
}

// Hold makes Pass wait until Release.
func (g *Gate) Hold() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.held {
		g.held, g.open = true, make(chan struct{})
	}
}

// Release lets every waiting and later Pass through, until the next Hold.
func (g *Gate) Release() {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.held {
		g.held = false
		close(g.open)
	}
}

// Pass returns at once while the gate is released. While it is held, Pass
// calls entered (when not nil) and waits for Release, or returns ctx's
// error if ctx ends first.
func (g *Gate) Pass(ctx context.Context, entered func()) error {
	g.mu.Lock()
	held, open := g.held, g.open
	g.mu.Unlock()
	if !held {
		return nil
	}
	if entered != nil {
		entered()
	}
	select {
	case <-open:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
