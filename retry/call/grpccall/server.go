package grpccall

import (
	"context"

	"google.golang.org/grpc"

	"github.com/readretry/readretry/retry/call"
)

// UnaryServerInterceptor reads the retry flags of each incoming unary call
// from its metadata into the context the handler runs with (SPEC B5), where
// the policies of the handler's own calls find them.
//
// Trust boundary: the flags are believed as sent; a caller can switch the
// handler's retries on or off with them (see call.Extract). Pass call.Edge()
// on a server that outsiders can call: their flags are then ignored and
// every call is the entrance of its chain.
func UnaryServerInterceptor(opts ...call.ServerOption) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
		return handler(incoming(ctx, opts), req)
	}
}

// StreamServerInterceptor is UnaryServerInterceptor for streaming calls: the
// handler's stream returns the context with the flags. The same trust
// boundary applies.
func StreamServerInterceptor(opts ...call.ServerOption) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
		return handler(srv, &serverStream{ServerStream: ss, ctx: incoming(ss.Context(), opts)})
	}
}

type serverStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *serverStream) Context() context.Context { return s.ctx }
