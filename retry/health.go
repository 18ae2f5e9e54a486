package retry

import "sync/atomic"

// Proxy health (SPEC §7 R13 round 3). First sends are blind without it:
// every read sent to a dark proxy pays the first segment x before its
// re-send. With it, a proxy whose latest attempt timed out or could not be
// sent is suspect, and first sends go to healthy proxies while there is
// one. A suspect proxy is probed at most once per probe interval: the read
// chosen for the probe goes to a healthy proxy as usual and a copy of it,
// sent at once as the read's first re-send (attempt 1), goes to the
// suspect one. The read never waits for the probe — whichever answer comes
// first wins and the other is dropped as a duplicate (SPEC R7, R12) — and
// the copy uses one of the read's MaxRetries, so a read still sends at
// most 1 + MaxRetries attempts (the probe is counted as an extra attempt,
// Stats.Probes). A suspect proxy is trusted again as soon as any frame from
// it parses: the probe's answer, or a late answer to an older attempt.
//
// The state is per client and proxy, in the proxy's proxyLoad (a fresh one
// each time an ID is given out, so a reused ID starts healthy, SPEC R22):
// two atomics next to the in-flight count. Senders read it on each first
// send (loads only while nothing changes); the poller writes it on a
// timeout and on the first frame after one; a probe slot is claimed with a
// compare-and-swap, so two senders never probe the same proxy in one
// interval. Nothing is allocated and no lock is taken.

// proxyHealth is one proxy's health: suspect is 1 while the proxy is
// suspect, 0 while healthy; nextProbe is the earliest time (ns since the
// client's epoch) a read may probe it.
type proxyHealth struct {
	suspect   atomic.Int32
	nextProbe atomic.Int64
}

// healthOf returns the health of a proxy the client knows, or nil for an
// ID it never gave out (a frame from a confused transport).
func (c *Client) healthOf(id ProxyID) *proxyHealth {
	infos := *c.proxies.Load()
	if int(id) >= len(infos) || infos[id].load == nil {
		return nil
	}
	return &infos[id].load.health
}

// suspect marks a proxy suspect after an attempt to it timed out or its
// Send failed (SPEC §7 R13 round 3); its first probe may go out one probe
// interval after now.
func (c *Client) suspect(id ProxyID, now int64) {
	if c.probeEvery == 0 {
		return // health off
	}
	h := c.healthOf(id)
	if h == nil || h.suspect.Load() != 0 || !h.suspect.CompareAndSwap(0, 1) {
		return
	}
	h.nextProbe.Store(now + c.probeEvery)
	c.suspectNow.Add(1)
	c.suspectMarks.Add(1)
}

// trust marks a proxy healthy again: a frame from it parsed. A healthy
// proxy costs one atomic load here.
func (c *Client) trust(id ProxyID) {
	if c.probeEvery == 0 {
		return
	}
	if h := c.healthOf(id); h != nil && h.suspect.Load() != 0 && h.suspect.CompareAndSwap(1, 0) {
		c.suspectNow.Add(-1)
	}
}

// forget clears the health of a proxy being released (SPEC R22), so that
// the count of suspect proxies covers only proxies the client knows.
func (c *Client) forget(h *proxyHealth) {
	if h.suspect.Swap(0) != 0 {
		c.suspectNow.Add(-1)
	}
}

// isSuspect reports whether a proxy is suspect now (false with health off).
func (c *Client) isSuspect(info *proxyInfo) bool {
	return c.probeEvery != 0 && info.load.health.suspect.Load() != 0
}

// claimProbe takes the proxy's probe slot for this interval if it is due,
// and reports whether it did.
func (c *Client) claimProbe(h *proxyHealth, now int64) bool {
	next := h.nextProbe.Load()
	return now >= next && h.nextProbe.CompareAndSwap(next, now+c.probeEvery)
}

// suspectSilent marks suspect the proxies of the request's attempts that
// have not answered when one of its segments (or waits) ended without the
// answer it waited for. When a re-send found no proxy, attempt numbers and
// the proxies recorded no longer line up: then only the last proxy is
// marked.
func (f *flight) suspectSilent() {
	c, m := f.c, f.m
	if c.probeEvery == 0 || m.ntried == 0 {
		return
	}
	s := f.scratch()
	if int(m.ntried) != int(m.retries)+1 {
		if m.answered&(1<<m.retries) == 0 {
			c.suspect(s.tried(int(m.ntried)-1), f.now)
		}
		return
	}
	for i := range int(m.ntried) {
		if m.answered&(1<<i) == 0 {
			c.suspect(s.tried(i), f.now)
		}
	}
}
