//go:build amd64 || arm64

package engine

// Implemented in prefetch_$GOARCH.s.

//go:noescape
func prefetchJobLines(j *job)

//go:noescape
func prefetchWholeJob(j *job)

//go:noescape
func prefetchWord(x *uint64)

//go:noescape
func prefetchEntryLine(e *entry)
