package call

import "context"

// Endpoint is one RPC as RPC frameworks (go-kit, Kitex, a gRPC interceptor
// adapter) model it: a function from a request to a response (SPEC M1).
type Endpoint[Req, Resp any] func(ctx context.Context, req Req) (Resp, error)

// Middleware decorates an Endpoint; seed 001's RpcRetryMW and CtxFlagMW are
// middlewares of this shape.
type Middleware[Req, Resp any] func(next Endpoint[Req, Resp]) Endpoint[Req, Resp]

// Chain composes middlewares: Chain(a, b, c)(e) is a(b(c(e))), so a runs
// first on the way in.
func Chain[Req, Resp any](mws ...Middleware[Req, Resp]) Middleware[Req, Resp] {
	return func(next Endpoint[Req, Resp]) Endpoint[Req, Resp] {
		for i := len(mws) - 1; i >= 0; i-- {
			next = mws[i](next)
		}
		return next
	}
}

// Retry is the client-side retry middleware: it wraps the endpoint with
// [Wrap] under policy p (nil: the defaults) and opts ([RetryIf]). Put
// [Propagate] inside it, so that each attempt carries its own attempt
// number.
func Retry[Req, Resp any](p *Policy, opts ...ValueOption[Resp]) Middleware[Req, Resp] {
	return func(next Endpoint[Req, Resp]) Endpoint[Req, Resp] {
		return Wrap(p, next, opts...)
	}
}

// Propagate is the client-side flag middleware (SPEC B5): before each call
// it writes the flags of ctx — the attempt number and the retry flag, not
// the entrance mark — to the request's metadata, found by carrier.
func Propagate[Req, Resp any](carrier func(ctx context.Context, req Req) Carrier) Middleware[Req, Resp] {
	return func(next Endpoint[Req, Resp]) Endpoint[Req, Resp] {
		return func(ctx context.Context, req Req) (Resp, error) {
			if c := carrier(ctx, req); c != nil {
				Inject(ctx, c)
			}
			return next(ctx, req)
		}
	}
}

// Receive is the server-side flag middleware (SPEC B5, seed 001's
// CtxFlagMW): it reads the flags of the incoming request from its metadata,
// found by carrier, into the context the handler runs with ([Extract]). A
// request whose carrier is nil is treated as having no flags (entrance).
//
// Trust: the flags are believed as sent, as Extract explains. Use it
// without [Edge] only where every caller is a service of the same system;
// at a service that outsiders can call, pass Edge.
func Receive[Req, Resp any](carrier func(ctx context.Context, req Req) Carrier, opts ...ServerOption) Middleware[Req, Resp] {
	cfg := serverConfigOf(opts)
	return func(next Endpoint[Req, Resp]) Endpoint[Req, Resp] {
		return func(ctx context.Context, req Req) (Resp, error) {
			var c Carrier = noCarrier{}
			if !cfg.edge {
				if from := carrier(ctx, req); from != nil {
					c = from
				}
			}
			return next(extract(ctx, c, cfg), req)
		}
	}
}

type noCarrier struct{}

func (noCarrier) Get(string) string  { return "" }
func (noCarrier) Set(string, string) {}
