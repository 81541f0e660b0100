package server

import (
	"log/slog"
	"runtime/debug"
	"testing"
)

func TestServeGC(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	oldPercent, oldLimit := debug.SetGCPercent(100), debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetGCPercent(oldPercent); debug.SetMemoryLimit(oldLimit) })

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	p, l := setServeGC(log)
	if got := debug.SetGCPercent(100); p != serveGCPercent || got != serveGCPercent {
		t.Errorf("without GOGC: set %d, runtime has %d; want %d", p, got, serveGCPercent)
	}
	if mem := physicalMemory(); mem > 0 && (l != int64(mem/2) || debug.SetMemoryLimit(-1) != l) {
		t.Errorf("without GOMEMLIMIT: limit %d, want half of %d", l, mem)
	}

	// The runtime's own variables win: the server leaves what they chose.
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(1 << 30)
	if p, l := setServeGC(log); p != -1 || l != -1 || debug.SetGCPercent(150) != 150 || debug.SetMemoryLimit(-1) != 1<<30 {
		t.Errorf("with GOGC and GOMEMLIMIT set, setServeGC changed them (%d, %d)", p, l)
	}
}
