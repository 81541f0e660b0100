package postgrestest

import (
	"context"
	"errors"
	"sync"
	"testing"
)

// Lazy is a server started by the first test of a test binary that needs
// one, for binaries whose other tests do not: the zero value is ready to
// use, and the binary's TestMain calls Stop after m.Run.
type Lazy struct {
	once sync.Once
	srv  *Server
	err  error
}

// Database returns the URL of a new, empty database on the server,
// starting it first if need be. Without PostgreSQL it skips t, saying so;
// if the server cannot start it fails t.
func (l *Lazy) Database(t testing.TB) string {
	t.Helper()
	l.once.Do(func() { l.srv, l.err = Start() })
	if errors.Is(l.err, ErrNotInstalled) {
		t.Skip(l.err)
	}
	if l.err != nil {
		t.Fatal(l.err)
	}
	u, err := l.srv.NewDatabase(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// Server returns the server, or nil before Database started it.
func (l *Lazy) Server() *Server { return l.srv }

// Stop stops the server, if one was started.
func (l *Lazy) Stop() {
	if l.srv != nil {
		l.srv.Stop()
	}
}
