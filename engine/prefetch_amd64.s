#include "textflag.h"

// func prefetchJobLines(j *job)
TEXT ·prefetchJobLines(SB), NOSPLIT, $0-8
	MOVQ j+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	RET

// func prefetchWholeJob(j *job)
TEXT ·prefetchWholeJob(SB), NOSPLIT, $0-8
	MOVQ j+0(FP), AX
	PREFETCHT0 (AX)
	PREFETCHT0 64(AX)
	PREFETCHT0 128(AX)
	PREFETCHT0 192(AX)
	RET

// func prefetchWord(x *uint64)
TEXT ·prefetchWord(SB), NOSPLIT, $0-8
	MOVQ x+0(FP), AX
	PREFETCHT0 (AX)
	RET


// func prefetchEntryLine(e *entry)
TEXT ·prefetchEntryLine(SB), NOSPLIT, $0-8
	MOVQ e+0(FP), AX
	PREFETCHT0 (AX)
	RET
