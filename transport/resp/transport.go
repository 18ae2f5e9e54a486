package resp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/transport/tcp"
	"github.com/readretry/readretry/wire"
)

// Result codes this transport puts in the response frames it makes, besides
// retry.ResultOK and Config.RetryCode.
const (
	// ResultNotFound is the code of an answer for a missing key: GET's nil
	// bulk (the response's code, no record) and an MGET element's nil bulk
	// (the record's code, nil value). It is an answer, not a failure: the
	// engine delivers it and does not retry. The value is sim's, so the
	// simulator's checker reads both backends alike.
	ResultNotFound int32 = -1
	// ResultReplicaError is the code of an error reply that is not one of
	// the transient replica states (WRONGTYPE, ERR, NOAUTH, …): the
	// request ends with it, as any non-listed error code ends a read.
	ResultReplicaError int32 = -20001
)

// Defaults of Config.
const (
	// DefaultBatchChunk is how many keys one MGET asks for.
	DefaultBatchChunk = 64
	// DefaultRangeChunk is how many list positions one LRANGE asks for.
	DefaultRangeChunk = 128
	// DefaultMaxReply is the largest reply accepted from a replica, in
	// bytes; a larger bulk length or reply drops the connection.
	DefaultMaxReply = 4 << 20
	// MaxMaxReply is the largest Config.MaxReply: a reply's frame must fit
	// in a wire frame.
	MaxMaxReply = wire.MaxFrameSize / 2
	// maxPosition bounds an index read's position: LRANGE takes signed
	// 64-bit indexes, and the chunk's end must not overflow.
	maxPosition = 1 << 62
)

// Errors returned by Send for frames this transport does not carry. They
// wrap retry.ErrRequestRefused, not retry.ErrUnavailable: no other replica
// would take them either, so the engine tries none and Send and Do return
// them as they are (SPEC R13, issue 29).
var (
	// ErrWriteRefused: a write command (1, 3, 5, 9). Replicas are
	// read-only, and read retry never re-sends writes (SPEC R3): an SDK
	// sends writes to the master with its ordinary client, made idempotent
	// with package idem where they may be repeated.
	ErrWriteRefused = fmt.Errorf("resp: writes are not sent to replicas: %w", retry.ErrRequestRefused)
	// ErrUnsupported: a read command with no mapping to a Redis command
	// (see the package documentation's table), or an index read whose
	// position is beyond what LRANGE can address.
	ErrUnsupported = fmt.Errorf("resp: command has no redis mapping: %w", retry.ErrRequestRefused)
	// ErrInvalidConfig wraps what is wrong with a Config.
	ErrInvalidConfig = errors.New("resp: invalid config")
)

// Config sets up a Transport. The zero Config is usable: replicas are
// dialled at retry.Proxy.String() with tcp's defaults, listed errors
// become retry.ResultProxySwiftTimeout.
type Config struct {
	// Resolve maps a logical replica to "host:port"; nil means p.String().
	Resolve func(p retry.Proxy) (addr string, err error)
	// DialTimeout bounds one connection attempt; 0 means tcp's default.
	DialTimeout time.Duration
	// Backoff gives the wait before each reconnection; nil means
	// tcp.DefaultBackoff.
	Backoff backoff.Strategy
	// RetryCode is the result code a transient replica error (LOADING,
	// BUSY, MASTERDOWN, TRYAGAIN) becomes. Use a code the zones list in
	// ReadRetryErrorCode, so the engine re-sends at once (SPEC R8); 0 means
	// retry.ResultProxySwiftTimeout (-7953), the default listed code.
	RetryCode int32
	// BatchChunk is the number of keys per MGET (one packet each); 0
	// means DefaultBatchChunk, at most wire.MaxBatchKeys.
	BatchChunk int
	// RangeChunk is the number of positions per LRANGE (one packet
	// each); 0 means DefaultRangeChunk, at most 1<<20.
	RangeChunk int
	// MaxReply is the largest reply accepted in bytes; 0 means
	// DefaultMaxReply, at most MaxMaxReply.
	MaxReply int
	// AnswerLost makes a connection that ends (reset, closed, dropped for
	// a protocol error) answer each request attempt still pending on it
	// with RetryCode and no record, so that the engine re-sends it at once
	// — only the keys or positions still missing — instead of at its next
	// deadline (SPEC R8, R11). Off, as in transport/tcp, lost requests
	// wait for their timers. On, a stream cut costs a read a round trip
	// instead of a segment (rrsim's Redis stream-cut: p99.9 from about
	// 100 ms to a few ms), but a replica's death sends its whole backlog
	// to the others at once, and under a loaded machine that burst has
	// been seen to outrun the storm guard (reads ending with the held
	// code); measure before turning it on.
	AnswerLost bool
	// RecvBuffer, MaxPending and WriteTimeout are tcp.Config's: each
	// replica's receive ring, write-buffer limit, and write bound.
	RecvBuffer, MaxPending int
	WriteTimeout           time.Duration
	// Logger receives connection events; nil means slog.Default().
	Logger *slog.Logger
}

// Stats are a Transport's counters since New, each read atomically.
type Stats struct {
	// Conn is the connection layer's counters (tcp.Stats): its frames are
	// the engine's request and response frames.
	Conn tcp.Stats
	// Commands is the number of RESP commands written: one per GET, per
	// MGET chunk, per LRANGE chunk.
	Commands uint64
	// Refused counts Send calls refused with ErrWriteRefused,
	// ErrUnsupported or a frame that does not parse (retry.ErrRequestRefused).
	Refused uint64
	// ReplicaTransient counts error replies that became Config.RetryCode
	// (LOADING, BUSY, MASTERDOWN, TRYAGAIN).
	ReplicaTransient uint64
	// ReplicaErrors counts other error replies (ResultReplicaError).
	ReplicaErrors uint64
	// ProtocolErrors counts connections dropped because the replica sent
	// bytes that are not RESP2, a length over MaxReply, or a reply that
	// does not fit its command.
	ProtocolErrors uint64
	// LostAnswers counts request attempts answered with Config.RetryCode
	// because their connection ended (reset, closed, dropped for a
	// protocol error) before their reply came.
	LostAnswers uint64
}

type counters struct {
	commands, refused, transient, replicaErrors, protocolErrors, lost atomic.Uint64
}

// Transport is a retry.Transport (and retry.Waiter) that speaks RESP2 to
// Redis replicas; see the package documentation. Make it with New and end
// it with Close. Open, Send and Available may be called from any
// goroutine; Recv and Wait from the engine's poller.
type Transport struct {
	tcp   *tcp.Transport
	cfg   Config
	stats counters
}

// New returns a Transport with no replicas. Errors wrap ErrInvalidConfig
// (negative sizes, chunks or a MaxReply above their maximum) or
// tcp.ErrInvalidConfig.
func New(cfg Config) (*Transport, error) {
	switch {
	case cfg.BatchChunk < 0 || cfg.BatchChunk > wire.MaxBatchKeys:
		return nil, fmt.Errorf("%w: BatchChunk %d", ErrInvalidConfig, cfg.BatchChunk)
	case cfg.RangeChunk < 0 || cfg.RangeChunk > 1<<20:
		return nil, fmt.Errorf("%w: RangeChunk %d", ErrInvalidConfig, cfg.RangeChunk)
	case cfg.MaxReply < 0 || cfg.MaxReply > MaxMaxReply:
		return nil, fmt.Errorf("%w: MaxReply %d", ErrInvalidConfig, cfg.MaxReply)
	}
	if cfg.RetryCode == 0 {
		cfg.RetryCode = retry.ResultProxySwiftTimeout
	}
	if cfg.BatchChunk == 0 {
		cfg.BatchChunk = DefaultBatchChunk
	}
	if cfg.RangeChunk == 0 {
		cfg.RangeChunk = DefaultRangeChunk
	}
	if cfg.MaxReply == 0 {
		cfg.MaxReply = DefaultMaxReply
	}
	if cfg.WriteTimeout == 0 {
		cfg.WriteTimeout = tcp.DefaultWriteTimeout
	}
	t := &Transport{cfg: cfg}
	dialer := &net.Dialer{}
	tc, err := tcp.New(tcp.Config{
		Resolve:     cfg.Resolve,
		DialTimeout: cfg.DialTimeout,
		Backoff:     cfg.Backoff,
		RecvBuffer:  cfg.RecvBuffer,
		MaxPending:  cfg.MaxPending,
		// A reply becomes one frame: at most the reply plus the keys and
		// record headers it answers, which the request frame bounded.
		MaxFrameSize: wire.MaxFrameSize,
		WriteTimeout: cfg.WriteTimeout,
		Logger:       cfg.Logger,
		Dial: func(ctx context.Context, network, addr string) (net.Conn, error) {
			nc, err := dialer.DialContext(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newConn(t, nc), nil
		},
	})
	if err != nil {
		return nil, err
	}
	t.tcp = tc
	return t, nil
}

// Open registers a replica (retry.Transport) and returns at once; its
// first connection attempt runs on tcp's goroutines (WaitDialed waits for
// it); see tcp.Transport.Open.
func (t *Transport) Open(id retry.ProxyID, p retry.Proxy) error { return t.tcp.Open(id, p) }

// WaitDialed blocks until the first connection attempt of every replica
// opened so far has ended, or ctx ends (then ctx.Err()); see
// tcp.Transport.WaitDialed. Open never waits on a dial (SPEC R22), so a
// caller that sends right after its first ApplyRoute waits here first.
func (t *Transport) WaitDialed(ctx context.Context) error { return t.tcp.WaitDialed(ctx) }

// Send queues one request frame for the replica (retry.Transport); frame
// is checked and copied, not retained. A GET, BATCH_GET or LIST_GETALL
// frame becomes RESP commands on the replica's connection (see the
// package documentation). Errors: the frame's wire.ParseRequest error,
// ErrWriteRefused and ErrUnsupported for frames this transport does not
// carry, all three wrapping retry.ErrRequestRefused (the engine tries no
// other replica); tcp.Transport.Send's errors (wrapping
// retry.ErrUnavailable) when the replica's connection is down.
func (t *Transport) Send(id retry.ProxyID, frame []byte) error {
	req, err := wire.ParseRequest(frame)
	if err != nil {
		t.stats.refused.Add(1)
		return fmt.Errorf("%w: %w", retry.ErrRequestRefused, err)
	}
	switch req.Command() {
	case wire.CmdGet, wire.CmdBatchGet:
	case wire.CmdListGetAll:
		if req.Position() >= maxPosition {
			t.stats.refused.Add(1)
			return fmt.Errorf("%w: position %d", ErrUnsupported, req.Position())
		}
	default:
		t.stats.refused.Add(1)
		if req.Body() == wire.BodyKeyValue {
			return ErrWriteRefused
		}
		return fmt.Errorf("%w: %v", ErrUnsupported, req.Command())
	}
	return t.tcp.Send(id, frame)
}

// Release closes the replica's connection and forgets the replica
// (retry.Transport): once it returns, no reply read on that connection
// reaches Recv, so the engine may give id to another replica; the
// commands still pending on the connection go with it. It does not wait
// on the network; see tcp.Transport.Release (SPEC R22).
func (t *Transport) Release(id retry.ProxyID) { t.tcp.Release(id) }

// Recv returns one response frame made from a replica's reply
// (retry.Transport), valid until the next Recv; see tcp.Transport.Recv.
func (t *Transport) Recv() (frame []byte, from retry.ProxyID, ok bool) { return t.tcp.Recv() }

// ProxyError says why the replica cannot take a frame now, nil if it can
// (retry.ProxyErrorer; SPEC R13, issue 29): its last failed dial or the
// error that broke its connection; see tcp.Transport.ProxyError.
func (t *Transport) ProxyError(id retry.ProxyID) error { return t.tcp.ProxyError(id) }

// Available reports whether the replica is connected with room in its
// write buffer (retry.Transport).
func (t *Transport) Available(id retry.ProxyID) bool { return t.tcp.Available(id) }

// Wait blocks until a frame waits for Recv or timeout passes
// (retry.Waiter); see tcp.Transport.Wait.
func (t *Transport) Wait(timeout time.Duration) bool { return t.tcp.Wait(timeout) }

// Close closes every connection and stops every goroutine the Transport
// started; safe to call more than once.
func (t *Transport) Close() error { return t.tcp.Close() }

// Stats returns the transport's counters.
func (t *Transport) Stats() Stats {
	s := &t.stats
	return Stats{
		Conn: t.tcp.Stats(), Commands: s.commands.Load(), Refused: s.refused.Load(),
		ReplicaTransient: s.transient.Load(), ReplicaErrors: s.replicaErrors.Load(),
		ProtocolErrors: s.protocolErrors.Load(), LostAnswers: s.lost.Load(),
	}
}

// errorCode maps an error reply's text to a result code: the transient
// states a replica leaves by itself become Config.RetryCode (SPEC R8, R23);
// anything else is ResultReplicaError.
func (t *Transport) errorCode(msg []byte) int32 {
	word := msg
	for i, b := range msg {
		if b == ' ' {
			word = msg[:i]
			break
		}
	}
	switch string(word) {
	case "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN":
		t.stats.transient.Add(1)
		return t.cfg.RetryCode
	}
	t.stats.replicaErrors.Add(1)
	return ResultReplicaError
}
