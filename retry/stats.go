package retry

import (
	"sync/atomic"

	"github.com/readretry/readretry/wire"
)

// counter is an atomic counter alone on its cache line, so that senders on
// many cores bumping one counter do not slow the poller bumping another.
type counter struct {
	atomic.Uint64
	_ [56]byte
}

// zoneCounters are one zone's R17 counters. Senders touch the first group,
// the poller the rest.
type zoneCounters struct {
	readsSent          counter
	writesSent         counter
	otherSent          counter // reads sent without a context: retry off for them
	capHits            counter
	contexts           atomic.Int64 // read retry contexts held (SPEC R2's cap accounting)
	waiting            atomic.Int64 // requests without a context (Config.MaxWaitingPerZone)
	_                  [56]byte
	retriesTimeout     atomic.Uint64
	retriesCode        atomic.Uint64
	retriesNoProxy     atomic.Uint64
	retriesRefused     atomic.Uint64
	exhausted          atomic.Uint64
	recordsFailed      atomic.Uint64
	duplicates         atomic.Uint64
	unknownSeq         atomic.Uint64
	stray              atomic.Uint64
	malformed          atomic.Uint64
	recordsResent      atomic.Uint64
	waitTimeouts       atomic.Uint64
	delivered          atomic.Uint64
	finals             atomic.Uint64
	doAbandoned        atomic.Uint64
	abandonedResponses atomic.Uint64
	sendFailures       atomic.Uint64
	probes             atomic.Uint64
	peakContexts       atomic.Int64
}

// Stats is a snapshot of one zone's counters (SPEC R17). Every field is read
// with an atomic load, without a lock; fields are read one by one, so a
// snapshot taken under load is not one instant. Counts are since the zone
// was added.
type Stats struct {
	// ReadsSent counts reads (the eight read commands) accepted by Send.
	ReadsSent uint64
	// WritesSent counts writes accepted by Send (never retried, SPEC R3).
	WritesSent uint64
	// ReadsWithoutContext counts reads sent without a read retry context:
	// retry off for their class, command or zone, or the cap reached.
	ReadsWithoutContext uint64
	// Contexts is the number of read retry contexts held now; PeakContexts
	// the largest it has been.
	Contexts, PeakContexts int64
	// CapHits counts reads sent without a context because the zone held its
	// cap of contexts (SPEC R2).
	CapHits uint64
	// RetriesTimeout counts re-sends after a segment ended without an
	// answer (SPEC R6, R10); RetriesErrorCode re-sends after an answer with a
	// listed error code (SPEC R8). Both count a retry used even when no
	// proxy was available to take it: RetriesNoProxy counts those.
	RetriesTimeout, RetriesErrorCode, RetriesNoProxy uint64
	// RetriesRefused counts re-sends the zone's storm guard refused (SPEC
	// R19): not sent, and not counted in the two above; the read then
	// waits for its attempts already out until its budget ends.
	RetriesRefused uint64
	// Exhausted counts requests that gave up (SPEC R8, R9, §7 R8b/R17/R20):
	// those that ended with ResultReadRetryTimeout or a held listed error
	// code, and those whose final result is ResultOK but that delivered
	// failed records (RecordsFailed). Each such request counts once, and
	// writes MsgExhausted once (rate-limited).
	Exhausted uint64
	// RecordsFailed counts records delivered with a listed error code of
	// their own because no attempt answered their key or position well
	// (SPEC R8b, §7 R8b/R17/R20): the caller got them as they are.
	RecordsFailed uint64
	// DuplicatesDropped counts packets and records dropped because their
	// request already had them or had ended (SPEC R7, R12): hedged answers,
	// network duplicates, late answers.
	DuplicatesDropped uint64
	// UnknownSeq counts packets whose sequence number is in this zone's
	// range but was never sent by this client: a proxy's bug, told apart
	// from late answers (SPEC §6). Logged as MsgUnknownSeq, rate-limited.
	UnknownSeq uint64
	// StrayPackets counts packets dropped because they came from a proxy the
	// request was never sent to, or carried another async ID (SPEC §6).
	StrayPackets uint64
	// MalformedPackets counts frames that failed to parse.
	MalformedPackets uint64
	// RecordsResent counts keys re-sent by partial batch re-sends and whole
	// requests re-sent for simple reads and index resumes (SPEC R11).
	RecordsResent uint64
	// WaitTimeouts counts requests without a context that ended with
	// ResultWaitRspTimeout.
	WaitTimeouts uint64
	// Delivered counts responses handed to the caller (every packet of a
	// multi-packet answer counts); FinalResults the last one of each
	// request — exactly one per request sent (SPEC R12).
	Delivered, FinalResults uint64
	// DoAbandoned counts Do calls that returned because their context ended
	// before the final result; AbandonedResponses the responses of their
	// requests that arrived afterwards and were dropped (SPEC R20).
	DoAbandoned, AbandonedResponses uint64
	// SendFailures counts Transport.Send errors (each moved the request to
	// the next proxy); refusals of the request itself (ErrRequestRefused)
	// are not counted: they say nothing of the proxy.
	SendFailures uint64
	// Probes counts copies of reads sent to a suspect proxy as probes
	// (SPEC §7 R13 round 3): each is an extra attempt of a read that also
	// went to a healthy proxy, and uses one of its MaxRetries.
	Probes uint64
}

func (zc *zoneCounters) snapshot() Stats {
	return Stats{
		ReadsSent:           zc.readsSent.Load(),
		WritesSent:          zc.writesSent.Load(),
		ReadsWithoutContext: zc.otherSent.Load(),
		Contexts:            zc.contexts.Load(),
		PeakContexts:        zc.peakContexts.Load(),
		CapHits:             zc.capHits.Load(),
		RetriesTimeout:      zc.retriesTimeout.Load(),
		RetriesErrorCode:    zc.retriesCode.Load(),
		RetriesNoProxy:      zc.retriesNoProxy.Load(),
		RetriesRefused:      zc.retriesRefused.Load(),
		Exhausted:           zc.exhausted.Load(),
		RecordsFailed:       zc.recordsFailed.Load(),
		DuplicatesDropped:   zc.duplicates.Load(),
		UnknownSeq:          zc.unknownSeq.Load(),
		StrayPackets:        zc.stray.Load(),
		MalformedPackets:    zc.malformed.Load(),
		RecordsResent:       zc.recordsResent.Load(),
		WaitTimeouts:        zc.waitTimeouts.Load(),
		Delivered:           zc.delivered.Load(),
		FinalResults:        zc.finals.Load(),
		DoAbandoned:         zc.doAbandoned.Load(),
		AbandonedResponses:  zc.abandonedResponses.Load(),
		SendFailures:        zc.sendFailures.Load(),
		Probes:              zc.probes.Load(),
	}
}

// countSent counts a request that went out: reads (with or without a
// context) and writes apart (SPEC R17).
func (zc *zoneCounters) countSent(cmd wire.Command, kind uint8) {
	switch {
	case cmd.IsRead() && kind == kindPlain:
		zc.readsSent.Add(1)
		zc.otherSent.Add(1)
	case cmd.IsRead():
		zc.readsSent.Add(1)
	default:
		zc.writesSent.Add(1)
	}
}

// reserveWaiting takes one unit of the zone's bound on requests without a
// context; false means the bound is reached.
func (zc *zoneCounters) reserveWaiting(limit int64) bool {
	if zc.waiting.Add(1) > limit {
		zc.waiting.Add(-1)
		return false
	}
	return true
}

// release gives back the unit a request of kind held.
func (zc *zoneCounters) release(kind uint8) {
	if kind == kindPlain {
		zc.waiting.Add(-1)
	} else {
		zc.contexts.Add(-1)
	}
}

// reserveContext takes one unit of the zone's context cap, lock-free; false
// means the cap is reached (SPEC R2).
func (zc *zoneCounters) reserveContext(limit int64) bool {
	for {
		n := zc.contexts.Load()
		if n >= limit {
			return false
		}
		if zc.contexts.CompareAndSwap(n, n+1) {
			for {
				p := zc.peakContexts.Load()
				if n+1 <= p || zc.peakContexts.CompareAndSwap(p, n+1) {
					return true
				}
			}
		}
	}
}
