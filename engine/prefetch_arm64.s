#include "textflag.h"

// func prefetchJobLines(j *job)
TEXT ·prefetchJobLines(SB), NOSPLIT, $0-8
	MOVD j+0(FP), R0
	PRFM (R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	RET

// func prefetchWholeJob(j *job)
TEXT ·prefetchWholeJob(SB), NOSPLIT, $0-8
	MOVD j+0(FP), R0
	PRFM (R0), PLDL1KEEP
	PRFM 64(R0), PLDL1KEEP
	PRFM 128(R0), PLDL1KEEP
	PRFM 192(R0), PLDL1KEEP
	RET

// func prefetchWord(x *uint64)
TEXT ·prefetchWord(SB), NOSPLIT, $0-8
	MOVD x+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET


// func prefetchEntryLine(e *entry)
TEXT ·prefetchEntryLine(SB), NOSPLIT, $0-8
	MOVD e+0(FP), R0
	PRFM (R0), PLDL1KEEP
	RET
