package sim

import (
	"runtime"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// R15OverheadBytes is the fixed bytes a read retry context costs beyond
// its packed frame and user buffer, as the R15 formula of BENCHMARKS.md states it
// (measured at 500,000 contexts by the engine's BenchmarkInFlight500k): a
// capacity run compares the heap it measures with
// frame + user buffer + R15OverheadBytes per context.
const R15OverheadBytes = 130

// packFrame appends the frame the engine packs for req (the header's
// numbers are fixed-width, so their values do not change the length).
func packFrame(dst []byte, req *retry.Request) []byte { return AppendRequestFrame(dst, req, 1) }

// AppendRequestFrame appends req packed as a first attempt with sequence
// number seq, for Zone, to dst — the frame the engine would send — so that
// a client under comparison speaks the same wire protocol to the proxies
// (package wire). A request the codec refuses leaves dst as it was.
func AppendRequestFrame(dst []byte, req *retry.Request, seq uint64) []byte {
	h := wire.RequestHeader{Command: req.Command, Seq: seq, AsyncID: req.AsyncID, AppID: simZone.AppID, ZoneID: simZone.ZoneID, Table: req.Table}
	var out []byte
	var err error
	switch req.Command.Body() {
	case wire.BodyKey:
		out, err = wire.AppendKeyRequest(dst, h, req.Key)
	case wire.BodyBatch:
		out, err = wire.AppendBatchRequest(dst, h, req.Keys)
	case wire.BodyIndex:
		out, err = wire.AppendIndexRequest(dst, h, req.Key, req.Position, req.Limit)
	default:
		out, err = wire.AppendWriteRequest(dst, h, req.Key, req.Value)
	}
	if err != nil {
		return dst
	}
	return out
}

// capacityPeak is the capacity run's sample at the plateau.
type capacityPeak struct {
	contexts int64  // contexts held, averaged over the sample
	live     uint64 // live heap right after a full collection
	taken    bool
}

// samplePeak collects the garbage and reads the live heap with the
// contexts held around it.
func samplePeak(c *retry.Client) capacityPeak {
	before, err := c.Stats(simZone)
	if err != nil {
		return capacityPeak{}
	}
	runtime.GC()
	u := ReadUsage()

	after, _ := c.Stats(simZone)
	return capacityPeak{contexts: (before.Contexts + after.Contexts) / 2, live: u.LiveHeap, taken: true}
}

// fillCapacity adds a capacity run's figures to its report.
func fillCapacity(rep *Report, l *Load, r *clientRun, base Usage, peak capacityPeak, cpu time.Duration, remote bool) {
	end := ReadUsage()
	rep.Offered = l.Rate
	rep.ContextsGoal = l.Contexts
	if rep.ContextsGoal == 0 {
		rep.ContextsGoal = int64(float64(l.Rate) * l.Latency.Seconds())
	}
	if sent := r.sendEnd.Sub(r.start); sent > 0 {
		rep.RateReached = float64(r.ck.Issued()) / sent.Seconds()
	}
	if peak.taken && peak.contexts > 0 && peak.live > base.LiveHeap {
		rep.HeapBytesPerContext = float64(peak.live-base.LiveHeap) / float64(peak.contexts)
		rep.HeapContexts = peak.contexts
	}
	if r.reads > 0 {
		rep.R15BytesPerContext = float64(r.r15Bytes) / float64(r.reads)
	}
	n, p99 := end.GCPausesSince(base)
	rep.GCPauses, rep.GCPauseP99Ms = n, ms(p99)
	if rep.Reads > 0 && cpu > 0 {
		rep.CPUNsPerRead = float64(cpu.Nanoseconds()) / float64(rep.Reads)
	}
	rep.ProxiesRemote = remote
}
