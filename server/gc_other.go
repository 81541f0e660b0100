//go:build !linux

package server

// physicalMemory returns 0: the machine's memory is not known here, so the
// server sets no memory limit of its own.
func physicalMemory() uint64 { return 0 }

// descriptorLimit returns 0: not known here, so the connection limit is
// the one asked for.
func descriptorLimit() uint64 { return 0 }
