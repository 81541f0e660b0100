//go:build !linux

package process

// maybeRacer does nothing: TestPrepareOwnershipRace and its racer are
// Linux's.
func maybeRacer() {}
