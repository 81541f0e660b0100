package daemon

import (
	"qshare/executor/process"
	"qshare/executor/simulated"
)

// The daemon finds these optional interfaces by type assertion, so an
// executor whose method drifted from the interface would silently lose
// them: a second parse of every payload (requestValidator) or ended
// attempts kept in memory for ever (forgetter). These assertions make such
// a drift a compile error of the daemon's tests.
var (
	_ requestValidator = (*process.Executor)(nil)
	_ requestValidator = (*simulated.Executor)(nil)
	_ forgetter        = (*process.Executor)(nil)
	_ forgetter        = (*simulated.Executor)(nil)
)
