#include "textflag.h"

// func prefetch(addr, n uintptr)
//
// PREFETCHT0 for each 64-byte line from addr up to addr+n (an empty range if
// that wraps). A prefetch never faults, whatever the address.
TEXT ·prefetch(SB), NOSPLIT|NOFRAME, $0-16
	MOVQ addr+0(FP), AX
	MOVQ n+8(FP), CX
	ADDQ AX, CX
	JCS  done
loop:
	CMPQ AX, CX
	JAE  done
	PREFETCHT0 (AX)
	ADDQ $64, AX
	JMP  loop
done:
	RET
