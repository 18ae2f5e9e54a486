package retry

import "unsafe"

// RetainedBufBytes reports the bytes of the buffers the client keeps
// between requests (the poller's rebuild, record-flag, held-answer and
// final-result buffers, and what Send's frame pools hand out now), so that
// a test can check that no buffer grown for one outsized request stays
// grown (SPEC R15). It takes the poller lock.
func RetainedBufBytes(c *Client) (largest int) {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	p := &c.poll
	largest = max(cap(p.sendBuf), cap(p.keep), cap(p.finals.buf)*int(unsafe.Sizeof(final{})))
	for _, h := range p.heldFree {
		largest = max(largest, cap(h.pkt), cap(h.recsBuf))
	}
	for i := range framePools {
		bb := framePools[i].Get()
		largest = max(largest, cap(bb.B))
		framePools[i].Put(bb)
	}
	return largest
}

// MaxRetainedBuf exports maxRetainedBuf for tests.
const MaxRetainedBuf = maxRetainedBuf

// RetainedFinals reports the capacity of the made-results queue (entries).
func RetainedFinals(c *Client) int {
	c.pollMu.Lock()
	defer c.pollMu.Unlock()
	return len(c.poll.finals.buf)
}

// MaxRetainedFinals exports maxRetainedFinals for tests.
const MaxRetainedFinals = maxRetainedFinals

// WaiterBufBytes reports the largest buffer a free Do waiter keeps for the
// next call (its Result's record bytes and record table).
func WaiterBufBytes(c *Client) (largest int) {
	ws := &c.waiters
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for _, id := range ws.free {
		r := &ws.slots[id-1].res
		largest = max(largest, cap(r.buf), cap(r.recs)*int(unsafe.Sizeof(recordPos{})))
	}
	return largest
}

// ProxyOutstanding reports the attempts in flight the client counts for
// proxy p (SPEC R22; the stall test of SPEC §7 R13 round 3), -1 for an
// endpoint it does not know.
func ProxyOutstanding(c *Client, p Proxy) int64 {
	c.reg.mu.Lock()
	id, ok := c.reg.byAddr[p]
	c.reg.mu.Unlock()
	if !ok {
		return -1
	}
	return c.loadOf(id).attempts.Load()
}

// SetAfterFirstSchedule sets the hook a sender calls between scheduling a
// read's first timer and publishing its handle (nil: none). Set it before
// the client sends, and reset it after.
func SetAfterFirstSchedule(fn func()) { afterFirstSchedule = fn }
