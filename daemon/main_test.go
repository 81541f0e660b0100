package daemon_test

import (
	"testing"

	"qshare/internal/longtest"
)

// TestMain lets more of the package's parallel tests run at once than go
// test's default of one per core: they mostly wait on the daemon's timers
// (retry backoff, minimum run times, plan steps), each over a store and
// executor of its own.
func TestMain(m *testing.M) { longtest.Main(m, 8) }
