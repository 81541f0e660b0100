package sqlite_test

import (
	"testing"

	"qshare/internal/longtest"
)

// TestMain lets more of the package's parallel tests run at once than go
// test's default of one per core: they mostly wait (on timeouts, on
// clients' pacing, on fsync), each over a server or directory of its own.
func TestMain(m *testing.M) { longtest.Main(m, 6) }
