package retry

import (
	"math/bits"
	"time"
)

// triangle returns 1+2+...+k.
func triangle(k int) uint64 { return uint64(k) * uint64(k+1) / 2 }

// segmentEnd returns the end of segment k (1-based) of a budget cut into
// n+1 segments of lengths x, 2x, ..., (n+1)x: budget·tri(k)/tri(n+1),
// computed in 128 bits so that no budget overflows, and exactly budget
// for k = n+1 (SPEC R6).
func segmentEnd(budget time.Duration, n, k int) time.Duration {
	if budget <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(uint64(budget), triangle(k))
	q, _ := bits.Div64(hi, lo, triangle(n+1))
	return time.Duration(q)
}

// segmentUnit returns x = 2T/((n+1)(n+2)), the first segment's length
// (SPEC R6, R10), rounded down to the nanosecond.
func segmentUnit(budget time.Duration, n int) time.Duration { return segmentEnd(budget, n, 1) }

// SimpleDeadlines returns the schedule of a simple read with the given
// budget and number of retries (SPEC R6): the n+1 segment ends measured from
// the first send, segment k lasting k·x with x = 2T/((n+1)(n+2)). A re-send
// goes out at each end but the last; the last is exactly budget, where the
// request gives up. For T = 3000 ms and n = 2 it returns 500 ms, 1500 ms,
// 3000 ms. retries is clamped to 0..MaxMaxRetries; a budget <= 0 (retry off)
// returns nil. The slice is newly allocated and the caller's.
func SimpleDeadlines(budget time.Duration, retries int) []time.Duration {
	if budget <= 0 {
		return nil
	}
	n := min(max(retries, 0), MaxMaxRetries)
	out := make([]time.Duration, n+1)
	for k := 1; k <= n+1; k++ {
		out[k-1] = segmentEnd(budget, n, k)
	}
	return out
}

// ComplexWaits returns the longest wait between two packets of a complex
// read before each re-send and before giving up (SPEC R10): 1·x, 2·x, ...,
// (n+1)·x with x = 2T/((n+1)(n+2)). The retry count belongs to the whole
// request, so the waits are used up in order whatever packets arrive in
// between. For T = 6000 ms and n = 2 it returns 1000 ms, 2000 ms, 3000 ms.
// Same clamping and ownership as SimpleDeadlines.
func ComplexWaits(budget time.Duration, retries int) []time.Duration {
	if budget <= 0 {
		return nil
	}
	n := min(max(retries, 0), MaxMaxRetries)
	x := segmentUnit(budget, n)
	out := make([]time.Duration, n+1)
	for k := 1; k <= n+1; k++ {
		out[k-1] = time.Duration(k) * x
	}
	return out
}
