package server

import (
	"log/slog"
	"os"
	"runtime/debug"
)

// serveGCPercent is the server's default GOGC. The server keeps every job in
// memory, so each collection marks all of them, while a submit or a job
// change leaves a few kilobytes of garbage behind: at the runtime's default
// of 100 the collector took about a seventh of the server's CPU under a
// submit load. At 400 it runs a quarter as often (docs/server.md has the
// measurements).
const serveGCPercent = 400

// setServeGC gives the server its garbage-collection defaults, unless the
// GOGC or GOMEMLIMIT environment variables choose otherwise: GOGC 400, and a
// soft memory limit of half the machine's memory, so that the collector
// runs more often instead of letting the heap grow five times the live data
// where that would not fit. It returns what it set (-1: left as it was).
func setServeGC(log *slog.Logger) (percent int, limit int64) {
	percent, limit = -1, -1
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(serveGCPercent)
		percent = serveGCPercent
	}
	if os.Getenv("GOMEMLIMIT") == "" {
		if total := physicalMemory(); total > 0 {
			limit = int64(total / 2)
			debug.SetMemoryLimit(limit)
		}
	}
	log.Debug("garbage collection", "gogc", percent, "memoryLimit", limit)
	return percent, limit
}
