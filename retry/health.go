package retry

import (
	"sync/atomic"
	"time"
)

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

// Stall detection (SPEC §7 R13 round 3, issue 24 item 1). A timeout marks
// a dark proxy suspect only when the first segment x of a read sent to it
// ends, so every read first-sent to it during that x waited x. A proxy that
// has attempts outstanding and has sent no frame for longer than a stall
// threshold is *stalled*, and first sends pass it over like a suspect one
// (no probe is claimed for it: its outstanding attempts are probes
// enough). Nothing about any request's schedule changes: only where first
// sends go. The test is lock-free, at choose time, from the proxy's
// in-flight count (proxyLoad.attempts: counted when an attempt is
// recorded, given back when its request's context is deleted — after its
// answer, its budget's end, its zone's removal — so it cannot leak) and
// since: the time the count last rose from 0 or a frame from the proxy
// last parsed. A stalled proxy that answers is healthy at that frame; one
// whose requests all end without a frame is not stalled any more (and by
// then their timeouts have marked it suspect).
//
// The threshold is the read's own first segment (its x, or Hedge's d, or
// WaitTimeout for a request without read retry) divided by stallDivisor,
// at least Client.stallFloor (stallAfter). A false positive is cheap — a
// healthy proxy slower than the threshold with nothing else answering
// loses first sends only until its next frame, and no read waits — while
// each read first-sent to a dark proxy before detection costs a full x. An
// eighth of x (62.5 ms of x = 500 ms; 12.5 ms of rrcompare's 100 ms) is
// many times a healthy answer's latency (its p99 is a few ms), and the
// floor keeps a poller late by a few ticks (it times the frames) from
// making every busy proxy look stalled.

// stallDivisor: a proxy silent for x/stallDivisor with attempts
// outstanding is stalled.
const stallDivisor = 8

// minStallFloor is the least stall threshold, whatever the tick and poll
// interval (Client.stallFloor adds twice their sum).
const minStallFloor = 2 * time.Millisecond

// proxyHealth is one proxy's health: suspect is 1 while the proxy is
// suspect, 0 while healthy; nextProbe is the earliest time (ns since the
// client's epoch) a read may probe it; since is when its in-flight count
// last rose from 0 or a frame from it last parsed (ns since the epoch).
type proxyHealth struct {
	suspect   atomic.Int32
	nextProbe atomic.Int64
	since     atomic.Int64
}

// stallAfter returns the stall threshold of a request whose first segment
// (or wait) is first ns long.
func (c *Client) stallAfter(first int64) int64 {
	return max(first/stallDivisor, c.stallFloor)
}

// avoid reports whether first sends pass the proxy over (false with health
// off): it is suspect, or stalled at now — attempts outstanding and no
// frame for longer than stall ns.
func (c *Client) avoid(l *proxyLoad, now, stall int64) bool {
	if c.probeEvery == 0 {
		return false
	}
	return l.health.suspect.Load() != 0 || (l.attempts.Load() > 0 && now-l.health.since.Load() > stall)
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

// trust marks a proxy healthy again: a frame from it parsed at now. It
// also restarts the proxy's stall clock. A healthy proxy costs a load and,
// once per poll, a store here.
func (c *Client) trust(id ProxyID, now int64) {
	if c.probeEvery == 0 {
		return
	}
	h := c.healthOf(id)
	if h == nil {
		return
	}
	if h.since.Load() != now {
		h.since.Store(now)
	}
	if h.suspect.Load() != 0 && h.suspect.CompareAndSwap(1, 0) {
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
