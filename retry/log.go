package retry

import (
	"sync/atomic"
	"time"
)

// The stable log messages of SPEC R16 (and seed 000's FAQ): operators grep
// for them, so they never change; the numbers travel as attributes.
const (
	// MsgSetOption is logged by SetReadRetryTimeout with simple_ms and
	// complex_ms.
	MsgSetOption = "set read retry option"
	// MsgReachMaxContext is logged, at most once per second per zone, when
	// reads are sent without a context because the cap is reached (SPEC R2);
	// attributes: app_id, zone_id, max_context_count, hits (since the last
	// line).
	MsgReachMaxContext = "reach max context count"
	// MsgSetMaxContext is logged by SetReadRetryMaxContextCountPerZone
	// with max_context_count (SPEC R2).
	MsgSetMaxContext = "set read retry max context count"
	// MsgOpenProxyFailed is logged at warn level when the Transport fails
	// to open a proxy a route names; attributes: proxy, error. The proxy
	// counts as unavailable until the Transport says otherwise.
	MsgOpenProxyFailed = "open proxy failed"
	// MsgNoProxy is logged at warn level, at most once per second per
	// zone, when Send or Do finds no proxy of the zone to take a request
	// (SPEC R13, R16, issue 29); attributes: app_id, zone_id, error (the
	// *NoProxyError's text: each proxy with its cause, e.g. the dial
	// error), suppressed (lines skipped by the rate limit since the last).
	MsgNoProxy = "no proxy available"
	// MsgRecvConf is logged for each applied conf:// configuration (SPEC
	// R5); attributes: app_id, zone_id, cmds, error_codes, max_retries.
	MsgRecvConf = "recv read retry conf"
	// MsgExhausted is logged at error level when a read gives up (SPEC R9,
	// R8), once per request: with -19219, with a held listed error code, or
	// with ResultOK after records it delivered failed (SPEC R8b, §7);
	// attributes: app_id, zone_id, retries, cost_ms, seq, async_id, result,
	// suppressed (lines skipped by the rate limit since the last one).
	// Rate-limited to exhaustedLogsPerSecond per zone.
	MsgExhausted = "read retry exhausted"
	// MsgBadConf is logged at error level when a conf:// element is
	// malformed and the zone keeps its configuration; attributes: app_id,
	// zone_id, error.
	MsgBadConf = "bad read retry conf"
	// MsgConfClamped is logged at warn level when ReadRetryMaxCnt exceeds 8.
	MsgConfClamped = "read retry max count clamped"
	// MsgUnknownSeq is logged at warn level, at most once per second per
	// client, for a packet whose sequence number names no zone of the client
	// or a number its zone never sent (SPEC R17, §6); attributes: proxy, seq,
	// zone_known, count, suppressed.
	MsgUnknownSeq = "unknown sequence number"
	// MsgMalformedPacket is logged, at most once per second, when a
	// response frame fails to parse; attributes: proxy, error, count.
	MsgMalformedPacket = "malformed response packet"
)

const exhaustedLogsPerSecond = 10

// rateLimit lets through at most one event per interval, lock-free, and
// counts the events it held back.
type rateLimit struct {
	next       atomic.Int64 // nanoseconds since the client's epoch
	suppressed atomic.Uint64
}

// allow reports whether an event at now may be logged, and how many were
// held back before it.
func (r *rateLimit) allow(now int64, interval time.Duration) (bool, uint64) {
	n := r.next.Load()
	if now < n || !r.next.CompareAndSwap(n, now+int64(interval)) {
		r.suppressed.Add(1)
		return false, 0
	}
	return true, r.suppressed.Swap(0)
}
