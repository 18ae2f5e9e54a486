package main

import (
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/transport/tcp"
)

// ioCounts are a client's frames and the write and read calls that moved
// them, on the client's side of its connections (issue 28: system calls
// per request beside CPU per request).
type ioCounts struct {
	framesSent, writes uint64
	framesRecv, reads  uint64
}

func (a ioCounts) sub(b ioCounts) ioCounts {
	return ioCounts{a.framesSent - b.framesSent, a.writes - b.writes, a.framesRecv - b.framesRecv, a.reads - b.reads}
}

// ioCounter is a client that counts its write and read calls; the gRPC
// clients do not (grpc-go's transport is not ours to count).
type ioCounter interface {
	ioCounts() ioCounts
}

// transportCounts reads an engine transport's counters: transport/tcp's
// Stats (transport/resp is not used by the clients that count).
func transportCounts(tr sim.EngineTransport) ioCounts {
	t, ok := tr.(*tcp.Transport)
	if !ok {
		return ioCounts{}
	}
	st := t.Stats()
	return ioCounts{framesSent: st.FramesSent, writes: st.Writes, framesRecv: st.FramesRecv, reads: st.Reads}
}

func (ec *engineClient) ioCounts() ioCounts { return transportCounts(ec.tr) }
func (d *doClient) ioCounts() ioCounts      { return transportCounts(d.tr) }

// ioCounts of a blocking client are its caller's, if the caller counts.
func (b *blocking) ioCounts() ioCounts {
	if c, ok := b.c.(ioCounter); ok {
		return c.ioCounts()
	}
	return ioCounts{}
}

func (b *blocking) counts() bool {
	_, ok := b.c.(ioCounter)
	return ok
}

func (g *goroutinesCaller) ioCounts() ioCounts { return g.d.ioCounts() }
func (f *failsafeCaller) ioCounts() ioCounts   { return f.d.ioCounts() }

// ioCounts of the demux: one Write per frame, and its readers' Read calls.
func (d *demux) ioCounts() ioCounts {
	w := d.writes.Load()
	return ioCounts{framesSent: w, writes: w, framesRecv: d.framesRecv.Load(), reads: d.reads.Load()}
}

// countsIO reports whether c counts its calls.
func countsIO(c client) bool {
	switch c := c.(type) {
	case *blocking:
		return c.counts()
	case ioCounter:
		return true
	}
	return false
}

// clientCounts returns c's counters, zero if it keeps none.
func clientCounts(c client) ioCounts {
	if ic, ok := c.(ioCounter); ok {
		return ic.ioCounts()
	}
	return ioCounts{}
}
