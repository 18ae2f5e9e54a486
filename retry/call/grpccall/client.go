package grpccall

import (
	"context"
	"io"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/readretry/readretry/retry/call"
)

// MaxReplay is the most request messages a stream keeps to send again on a
// retry: a client stream that sends more before its first response commits
// (it is not retried after that).
const MaxReplay = 64

// UnaryClientInterceptor retries unary RPCs under policy p (nil: the
// call package's defaults), as the package doc describes: pass it to
// grpc.WithUnaryInterceptor or grpc.WithChainUnaryInterceptor. Each attempt
// is an ordinary invocation with the caller's call options, its own outgoing
// metadata (the caller's, plus the attempt number and the retry flag), and,
// with per-attempt RPC timeouts in the policy, its own deadline. An attempt
// whose server sent response headers before it failed is not retried
// (SPEC M2 round 3, gRFC A6): only a trailers-only answer is.
func UnaryClientInterceptor(p *call.Policy) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var a call.Attempts
		actx, err := a.Begin(ctx, p)
		if err != nil {
			return contextStatus(err)
		}
		outer := call.Attempt(ctx) - 1 // attempts of a retry loop around this call
		md := new(attemptMD)
		opts = append(opts[:len(opts):len(opts)], grpc.Header(&md.header), grpc.Trailer(&md.trailer))
		for {
			md.header, md.trailer = nil, nil
			err := invoker(outgoing(actx, outer+a.Number()), method, req, reply, cc, opts...)
			if err == nil {
				a.End()
				return nil
			}
			if md.header != nil {
				// The server sent headers before it failed: the attempt
				// was committed (gRFC A6, SPEC M2 round 3), and only a
				// trailers-only answer may be retried. The server may
				// have done the work.
				a.End()
				return err
			}
			if actx, err = a.Retry(judge(err, md.trailer)); err != nil {
				return final(err)
			}
		}
	}
}

// attemptMD receives an attempt's response headers and trailer (one
// allocation per call for both). A gRPC attempt that got headers has a
// non-nil header (it holds at least the content-type); a trailers-only
// answer, or none, leaves it nil.
type attemptMD struct {
	header, trailer metadata.MD
}

// StreamClientInterceptor retries streaming RPCs under policy p (nil: the
// call package's defaults) until they are committed, as the package doc
// describes: pass it to grpc.WithStreamInterceptor or
// grpc.WithChainStreamInterceptor. An attempt is committed by its first
// response message, by the caller reading its headers, or, when it fails,
// by having received headers at all (only a trailers-only failure is
// retried, SPEC M2 round 3). The stream it returns may be used as gRPC
// allows (one goroutine sending while another receives). With per-attempt
// RPC timeouts in the policy, the committed attempt's deadline lasts until
// the stream ends; a caller that abandons a stream cancels its context, as
// gRPC requires anyway.
func StreamClientInterceptor(p *call.Policy) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s := &clientStream{
			desc: desc, cc: cc, method: method, streamer: streamer, opts: opts,
			outer: call.Attempt(ctx) - 1,
		}
		actx, err := s.a.Begin(ctx, p)
		if err != nil {
			return nil, contextStatus(err)
		}
		if err := s.open(actx); err != nil {
			return nil, err
		}
		return s, nil
	}
}

// clientStream is one streaming call and its attempts. mu guards the fields
// below it; the attempt loop (a) runs only in RecvMsg and the interceptor,
// which gRPC calls from one goroutine at a time.
type clientStream struct {
	desc     *grpc.StreamDesc
	cc       *grpc.ClientConn
	method   string
	streamer grpc.Streamer
	opts     []grpc.CallOption
	outer    int
	a        call.Attempts

	mu        sync.Mutex
	cur       grpc.ClientStream // the current attempt's stream
	sent      []any             // messages sent before the commit, for a retry
	closed    bool              // CloseSend was called
	committed bool
}

// open starts attempts under the context of the first one, actx, until a
// stream opens (retrying failures to open it as the policy says), sends it
// the messages sent so far, and makes it the current stream. It returns the
// error the call ends with if none opens.
func (s *clientStream) open(actx context.Context) error {
	for {
		cs, err := s.streamer(outgoing(actx, s.outer+s.a.Number()), s.desc, s.cc, s.method, s.opts...)
		if err == nil {
			s.mu.Lock()
			defer s.mu.Unlock()
			for _, m := range s.sent {
				if cs.SendMsg(m) != nil {
					// The new attempt failed already (io.EOF): RecvMsg
					// gets its status and judges it.
					break
				}
			}
			if s.closed {
				_ = cs.CloseSend()
			}
			s.cur = cs
			return nil
		}
		if actx, err = s.a.Retry(judge(err, nil)); err != nil {
			return final(err)
		}
	}
}

func (s *clientStream) current() (grpc.ClientStream, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur, s.committed
}

func (s *clientStream) commit() {
	s.mu.Lock()
	s.committed = true
	s.sent = nil
	s.mu.Unlock()
}

// RecvMsg receives the next response message. Before the commit, a failed
// attempt is judged by the policy and, if retried, replaced by a new one
// that gets the messages sent so far again.
func (s *clientStream) RecvMsg(m any) error {
	for {
		cs, committed := s.current()
		err := cs.RecvMsg(m)
		switch {
		case err == nil:
			if !committed {
				s.commit()
			}
			return nil
		case committed || err == io.EOF:
			// The end of the stream (io.EOF is its OK status).
			s.commit()
			s.a.End()
			return err
		}
		if h, _ := cs.Header(); h != nil {
			// The attempt got the server's headers before it failed: it
			// was committed then (gRFC A6, SPEC M2 round 3). Only a
			// trailers-only answer may be retried. The attempt is over,
			// so Header does not wait.
			s.commit()
			s.a.End()
			return err
		}
		actx, err := s.a.Retry(judge(err, cs.Trailer()))
		if err == nil {
			err = s.open(actx)
		}
		if err != nil {
			s.commit()
			return err
		}
	}
}

// SendMsg sends m on the current attempt and, before the commit, keeps it
// for a retry. Before the commit an attempt that has failed (io.EOF) is not
// reported here: RecvMsg finds out why and retries, sending m again.
func (s *clientStream) SendMsg(m any) error {
	s.mu.Lock()
	if !s.committed {
		if len(s.sent) < MaxReplay {
			s.sent = append(s.sent, m)
		} else {
			s.committed, s.sent = true, nil
		}
	}
	cs, committed := s.cur, s.committed
	s.mu.Unlock()
	err := cs.SendMsg(m)
	if err == io.EOF && !committed {
		return nil
	}
	return err
}

// CloseSend closes the sending side of the current attempt, and of any
// later one.
func (s *clientStream) CloseSend() error {
	s.mu.Lock()
	s.closed = true
	cs := s.cur
	s.mu.Unlock()
	return cs.CloseSend()
}

// Header returns the current attempt's response headers; once the caller
// has them, the stream is committed.
func (s *clientStream) Header() (metadata.MD, error) {
	cs, committed := s.current()
	h, err := cs.Header()
	if err == nil && h != nil && !committed {
		s.commit()
	}
	return h, err
}

// Trailer returns the current attempt's trailer metadata.
func (s *clientStream) Trailer() metadata.MD {
	cs, _ := s.current()
	return cs.Trailer()
}

// Context returns the current attempt's context.
func (s *clientStream) Context() context.Context {
	cs, _ := s.current()
	return cs.Context()
}
