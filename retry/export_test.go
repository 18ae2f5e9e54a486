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
