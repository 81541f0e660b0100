package storetest

import (
	"context"
	"testing"
	"time"
)

// TestGate: a released gate lets Pass through at once; a held one makes it
// wait, after calling entered, until Release or the end of its context.
func TestGate(t *testing.T) {
	var g Gate
	if err := g.Pass(context.Background(), func() { t.Error("entered called at an open gate") }); err != nil {
		t.Fatal(err)
	}
	g.Hold()
	entered := make(chan struct{}, 1)
	passed := make(chan error, 1)
	go func() { passed <- g.Pass(context.Background(), func() { entered <- struct{}{} }) }()
	<-entered
	select {
	case err := <-passed:
		t.Fatalf("Pass returned %v through a held gate", err)
	case <-time.After(20 * time.Millisecond):
	}
	g.Release()
	if err := <-passed; err != nil {
		t.Fatal(err)
	}
	g.Hold()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := g.Pass(ctx, nil); err != context.Canceled {
		t.Fatalf("Pass with an ended context = %v, want context.Canceled", err)
	}
}
