// Package tcp is a retry.Transport over TCP: one connection per proxy,
// length-prefixed wire frames, reconnection with backoff, and a receive path
// that the engine's poller drains without blocking and without a lock
// (SPEC R14, R18, §6). An SDK built on package retry can use it as it is;
// cmd/rrsim runs every scenario over it.
//
// # Shape
//
// Open starts two goroutines for a proxy, which live until Release (the
// engine is done with the proxy: no route names it and no attempt to it is
// in flight) or Close, whatever happens to the connection meanwhile, and
// returns: it never waits on the network, so a route update never waits on
// a dial (SPEC R22). Release stops them, closes the connection and frees
// the proxy's ring, and drops what it received that Recv has not returned,
// so the engine can give the proxy's id to a new endpoint (SPEC R22).
//
//   - The reader dials (Config.Dial, after Config.Resolve has mapped the
//     logical retry.Proxy to an address), at once for the first attempt;
//     reads length-prefixed frames with a wire.Reader and copies each into
//     the proxy's receive ring; on any error — a frame that takes longer
//     than Config.FrameTimeout once begun included — it marks the proxy
//     unavailable, closes the connection and dials again after a backoff
//     delay (Config.Backoff, package retry/backoff). WaitDialed lets a
//     caller wait for the first attempts.
//   - The writer waits for frames that Send queued in the proxy's write
//     buffer and writes everything queued in one system call.
//
// No goroutine is started per request and none per frame.
//
// # Receive path: one ring per proxy, no lock
//
// Each proxy's frames go into a single-producer, single-consumer byte ring
// (the reader goroutine produces, the goroutine inside Recv consumes). Recv
// takes the oldest frame of the next proxy with frames, round robin, and
// returns it in place: the frame stays valid until the next Recv, which
// frees its space. Recv does not scan the rings: a reader whose ring goes
// from empty to holding a frame puts its proxy on a ready list (a flag and
// a short mutex, once per burst, not per frame), and Recv serves the
// listed proxies and drops one when it finds its ring empty, so a frame
// costs the same with 4 proxies as with 512 (BenchmarkRecv). A
// transport-wide counter of waiting frames lets Recv return at once when
// nothing is waiting, and lets Wait sleep until a frame arrives instead of
// polling. When a ring is full the reader stops reading
// the socket, so a client that stops polling pushes back on its proxies
// through TCP instead of buffering without bound. Frames of one proxy stay
// in the order they arrived, which index reads rely on.
//
// Measured against a mutex-guarded queue of copied frames in the same run
// (BenchmarkRecvPath), the ring moves a frame from a producer goroutine to
// the consumer without any allocation and without contention between
// proxies; BENCHMARKS.md gives the figures.
//
// # Send path: a buffer per connection and a writer goroutine
//
// Send appends the length prefix and the frame to the proxy's write buffer
// under a short mutex and wakes the writer if the buffer was empty; it never
// waits for the network. The writer swaps the buffer for its spare and
// writes the whole batch at once, so under load many frames share one
// system call (BenchmarkSend compares this with a mutex-guarded
// conn.Write per frame, measured in the same run). A proxy whose
// buffer holds Config.MaxPending bytes — it has stopped reading — fails
// Send with ErrWriteQueueFull and reports itself unavailable until the
// writer catches up, so the engine moves its reads elsewhere.
//
// # Availability
//
// Available reports a proxy as usable while it has a connection and room
// in its write buffer (so not before its first connection succeeds); Send to any other proxy returns an error wrapping
// retry.ErrUnavailable, which makes the engine choose the next proxy at
// once (SPEC R13). Frames queued but not yet written when a connection
// breaks are dropped (counted in Stats.FramesLost): the engine's timers
// re-send what read retry covers. ProxyError says why a proxy is not
// available — the last failed dial or the error that broke its
// connection, as the network returned it — and the engine puts it in the
// error Send and Do return when no proxy of a zone is available, so that
// a wrong address shows in the caller's log (SPEC R13, issue 29).
package tcp
