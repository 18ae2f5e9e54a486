package retry

import (
	"context"
	"log/slog"
	"time"

	"github.com/readretry/readretry/wire"
)

// finish ends a request with a result the engine made; it is delivered by
// a later RecvResponse (one response per call).
func (f *flight) finish(result int32) {
	f.m.flags |= flagDone
	f.cancelTimer()
	f.c.poll.finals.push(final{z: f.z, seq: f.seq, result: result})
}

// exhaust ends a read that has no retry left (SPEC R9), logging at error
// level, rate-limited per zone.
func (f *flight) exhaust(result int32) {
	f.z.stats.exhausted.Add(1)
	f.logExhausted(result)
	f.finish(result)
}

// logExhausted writes MsgExhausted (SPEC R9, R16), at most
// exhaustedLogsPerSecond lines per zone.
func (f *flight) logExhausted(result int32) {
	z, m := f.z, f.m
	if ok, held := z.exhaustLog.allow(f.now, time.Second/exhaustedLogsPerSecond); ok {
		f.c.log.LogAttrs(context.Background(), slog.LevelError, MsgExhausted, z.attrs(
			slog.Int("retries", int(m.retries)), slog.Int64("cost_ms", int64(uint32(f.now/int64(time.Millisecond))-m.firstMs)),
			slog.Uint64("seq", f.seq), slog.Uint64("async_id", f.asyncID()), slog.Int("result", int(result)),
			slog.Uint64("suppressed", held))...)
	}
}

// delivered counts a response handed out and, for a final one, arranges
// the context's release at the next RecvResponse, when the response stops
// being valid.
func (f *flight) delivered(final bool) {
	f.z.stats.delivered.Add(1)
	if final {
		f.z.stats.finals.Add(1)
		f.c.poll.release, f.c.poll.releaseZone = f.seq, f.z
	}
}

// final is a result the engine made, waiting to be delivered: result, or
// what the request holds (hold.go) when held is set.
type final struct {
	z      *zone
	seq    uint64
	result int32
	held   bool
}

// deliverFinal fills the response with the next made result, if any.
func (p *poller) deliverFinal() bool {
	for {
		fin, ok := p.finals.pop()
		if !ok {
			return false
		}
		f, ok := p.flight(fin.z, fin.seq)
		if !ok {
			continue // dropped by Close
		}
		if fin.held {
			if f.deliverHeld() {
				return true
			}
			continue // it queued its final result
		}
		p.rsp = Response{
			zone: f.z.key, seq: f.seq, asyncID: f.asyncID(), cmd: wire.Command(f.m.cmd), result: fin.result,
			attempts: int(f.m.ntried), userBuf: f.ref.UserBuf(), waiter: f.m.waiter,
		}
		f.delivered(true)
		return true
	}
}

// drop deletes a context, cancelling any timer it still has and giving back
// its cap unit.
func (p *poller) drop(z *zone, seq uint64) {
	f, ok := p.flight(z, seq)
	if !ok {
		return
	}
	f.cancelTimer()
	z.stats.release(f.m.kind)
	if f.m.flags&flagHeld != 0 {
		p.freeHeld(seq)
	}
	// A Do call waiting for a request Close drops is ended by Close itself
	// (closeWaiters), whatever stage its result was at.
	f.untry()
	z.table.Delete(seq)
}

// finalQueue is a FIFO of made results. It grows by doubling and never
// shrinks, so it allocates only while it grows past its largest size.
type finalQueue struct {
	buf        []final
	head, size int
}

func (q *finalQueue) push(f final) {
	if q.size == len(q.buf) {
		nb := make([]final, max(16, 2*len(q.buf)))
		for i := range q.size {
			nb[i] = q.buf[(q.head+i)%len(q.buf)]
		}
		q.buf, q.head = nb, 0
	}
	q.buf[(q.head+q.size)%len(q.buf)] = f
	q.size++
}

func (q *finalQueue) pop() (final, bool) {
	if q.size == 0 {
		return final{}, false
	}
	f := q.buf[q.head]
	q.buf[q.head] = final{}
	q.head = (q.head + 1) % len(q.buf)
	q.size--
	if q.size == 0 && len(q.buf) > maxRetainedFinals {
		q.buf, q.head = nil, 0
	}
	return f, true
}

func (q *finalQueue) reset() {
	q.buf, q.head, q.size = nil, 0, 0
}

// maxRetainedFinals is the most entries an empty finalQueue keeps: a burst
// of timeouts (every proxy down) grows it, and once drained it shrinks back
// (SPEC R15: memory follows load).
const maxRetainedFinals = 1024
