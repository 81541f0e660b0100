//go:build !amd64 && !arm64

package engine

func prefetchJobLines(j *job) {}

func prefetchWholeJob(j *job) {}

func prefetchWord(x *uint64) {}

func prefetchEntryLine(e *entry) {}
