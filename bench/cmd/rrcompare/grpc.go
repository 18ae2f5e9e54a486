package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go/failsafegrpc"
	"github.com/failsafe-go/failsafe-go/hedgepolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/wire"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/resolver"
	"google.golang.org/grpc/resolver/manual"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
)

// The gRPC service the fronts serve: the request message is a packed
// request frame, the response message the answer's packets, each with its
// 4-byte length prefix (package wire's stream framing). Simple and complex
// reads are two methods so that each has its own hedging delay and
// timeout; writes are never hedged.
const (
	serviceName  = "rr.Proxy"
	methodSimple = "/" + serviceName + "/ReadSimple"
	methodCmplx  = "/" + serviceName + "/ReadComplex"
	methodWrite  = "/" + serviceName + "/Write"
)

// rawCodec carries []byte messages as they are: no code generation, no
// protobuf.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	p, ok := v.(*[]byte)
	if !ok {
		return nil, fmt.Errorf("rrcompare: raw codec cannot marshal %T", v)
	}
	return *p, nil
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	switch p := v.(type) {
	case *[]byte:
		*p = data // gRPC hands a Codec a copy of its own
	case *oneReply:
		p.set(data)
	default:
		return fmt.Errorf("rrcompare: raw codec cannot unmarshal into %T", v)
	}
	return nil
}

// oneReply is a call's reply when several attempts of the call may be in
// flight at once and share the reply the caller passed to Invoke: hedging
// interceptors (failsafe-go's hedge policy) hand every hedge the same
// reply, so a losing hedge would write it while the caller reads what the
// winner wrote. The first message kept is the reply; later ones are
// dropped. A unary answer's message precedes its OK status, so the first
// message is the winner's.
type oneReply struct {
	mu   sync.Mutex
	kept bool
	b    []byte
}

func (r *oneReply) set(b []byte) {
	r.mu.Lock()
	if !r.kept {
		r.b, r.kept = b, true
	}
	r.mu.Unlock()
}

func (r *oneReply) get() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.b
}

func (rawCodec) Name() string { return "rrraw" }

// attemptCounter counts a call's attempts: gRPC reports each attempt's
// start to the stats handler with the call's context.
type attemptCounter struct{}

type attemptsKey struct{}

func (attemptCounter) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (attemptCounter) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if b, ok := s.(*stats.Begin); ok && b.Client {
		if n, ok := ctx.Value(attemptsKey{}).(*atomic.Int32); ok {
			n.Add(1)
		}
	}
}
func (attemptCounter) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context { return ctx }
func (attemptCounter) HandleConn(context.Context, stats.ConnStats)                       {}

// grpcCaller is one ClientConn over every front, balanced round robin (how
// a gRPC service with several backends is called), with the hedging of
// its mode.
type grpcCaller struct {
	cc *grpc.ClientConn
}

// serviceConfig is the gRPC service config of the grpc-hedging client, per
// gRFC A6: a hedging policy per read method (maxAttempts n+1, hedgingDelay
// x, UNAVAILABLE non-fatal) with the budget as the call's timeout, writes
// with the wait timeout, and A6's retry throttling.
func serviceConfig(opt sim.Options, retries int, hedging bool) string {
	secs := func(d time.Duration) string { return fmt.Sprintf("%.6fs", d.Seconds()) }
	method := func(name string, budget, x time.Duration) string {
		m := fmt.Sprintf(`{"name":[{"service":%q,"method":%q}],"timeout":%q`, serviceName, name, secs(budget))
		if hedging {
			m += fmt.Sprintf(`,"hedgingPolicy":{"maxAttempts":%d,"hedgingDelay":%q,"nonFatalStatusCodes":["UNAVAILABLE"]}`, retries+1, secs(x))
		}
		return m + "}"
	}
	mc := []string{
		method("ReadSimple", opt.SimpleBudget, retry.SimpleDeadlines(opt.SimpleBudget, retries)[0]),
		method("ReadComplex", opt.ComplexBudget, retry.ComplexWaits(opt.ComplexBudget, retries)[0]),
		fmt.Sprintf(`{"name":[{"service":%q,"method":"Write"}],"timeout":%q}`, serviceName, secs(opt.WaitTimeout)),
	}
	sc := `{"loadBalancingConfig":[{"round_robin":{}}],"methodConfig":[` + strings.Join(mc, ",") + `]`
	if hedging {
		sc += `,"retryThrottling":{"maxTokens":10,"tokenRatio":0.1}`
	}
	return sc + "}"
}

func dialFronts(e *env, hedging bool, extra ...grpc.DialOption) (*grpc.ClientConn, error) {
	if len(e.fronts) != len(e.labels) {
		return nil, errors.New("rrcompare: the fleet child started no gRPC fronts")
	}
	r := manual.NewBuilderWithScheme("rrfronts")
	var addrs []resolver.Address
	for _, a := range e.fronts {
		addrs = append(addrs, resolver.Address{Addr: a})
	}
	r.InitialState(resolver.State{Addresses: addrs})
	opts := append([]grpc.DialOption{
		grpc.WithResolvers(r),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultServiceConfig(serviceConfig(e.opt, e.retries, hedging)),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithStatsHandler(attemptCounter{}),
	}, extra...)
	cc, err := grpc.NewClient(r.Scheme()+":///fronts", opts...)
	if err != nil {
		return nil, err
	}
	cc.Connect()
	by := time.Now().Add(2 * time.Second)
	for time.Now().Before(by) && cc.GetState().String() != "READY" {
		time.Sleep(5 * time.Millisecond)
	}
	return cc, nil
}

func newGRPCHedgingClient(e *env) (client, error) {
	cc, err := dialFronts(e, true)
	if err != nil {
		return nil, err
	}
	return newBlocking(&grpcCaller{cc: cc}, e.sink), nil
}

// newGRPCFailsafeClient hedges with failsafe-go's gRPC client interceptor:
// per read method a timeout of the budget outside a hedge policy (delay x,
// n hedges, cancelled by the first success), writes under a timeout only.
func newGRPCFailsafeClient(e *env) (client, error) {
	hedge := func(budget, x time.Duration) grpc.UnaryClientInterceptor {
		return failsafegrpc.NewUnaryClientInterceptor[*oneReply](
			timeout.New[*oneReply](budget),
			hedgepolicy.NewBuilderWithDelay[*oneReply](x).WithMaxHedges(e.retries).
				CancelIf(func(_ *oneReply, err error) bool { return err == nil }).Build())
	}
	simple := hedge(e.opt.SimpleBudget, retry.SimpleDeadlines(e.opt.SimpleBudget, e.retries)[0])
	cmplx := hedge(e.opt.ComplexBudget, retry.ComplexWaits(e.opt.ComplexBudget, e.retries)[0])
	write := failsafegrpc.NewUnaryClientInterceptor[*oneReply](timeout.New[*oneReply](e.opt.WaitTimeout))
	byMethod := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		switch method {
		case methodSimple:
			return simple(ctx, method, req, reply, cc, invoker, opts...)
		case methodCmplx:
			return cmplx(ctx, method, req, reply, cc, invoker, opts...)
		}
		return write(ctx, method, req, reply, cc, invoker, opts...)
	}
	cc, err := dialFronts(e, false, grpc.WithUnaryInterceptor(byMethod))
	if err != nil {
		return nil, err
	}
	return newBlocking(&grpcCaller{cc: cc}, e.sink), nil
}

func (g *grpcCaller) close() { _ = g.cc.Close() }

func (g *grpcCaller) call(ctx context.Context, r *request, ans *sim.Answer) {
	method := methodWrite
	if r.read {
		method = methodSimple
		if r.complex {
			method = methodCmplx
		}
	}
	var n atomic.Int32
	ctx = context.WithValue(ctx, attemptsKey{}, &n)
	var one oneReply
	err := g.cc.Invoke(ctx, method, &r.frame, &one)
	r.answerBase(ans, max(int(n.Load()), 1))
	if err != nil {
		switch {
		case status.Code(err) == codes.Unavailable:
			ans.Result = retry.ResultProxySwiftTimeout
		case (status.Code(err) == codes.DeadlineExceeded || errors.Is(err, timeout.ErrExceeded)) && r.read:
			ans.Result = retry.ResultReadRetryTimeout
		case status.Code(err) == codes.DeadlineExceeded || errors.Is(err, timeout.ErrExceeded):
			ans.Result = retry.ResultWaitRspTimeout
		default:
			ans.Result = retry.ResultNoProxy
		}
		return
	}
	var st stream
	for b := one.get(); len(b) >= 4; {
		n := int(binary.LittleEndian.Uint32(b))
		if n > len(b)-4 {
			break
		}
		f := b[4 : 4+n]
		b = b[4+n:]
		if rsp, err := wire.ParseResponse(f); err == nil {
			st.add(f, rsp)
		}
	}
	st.fill(ans)
}

// fronts are the child process's gRPC servers, one beside each sim proxy:
// each call is forwarded to its proxy over the demultiplexing TCP client,
// so it meets the proxy's fault profile — its latency, drops, cut and
// stalled streams, duplicates — and an answer of -7953, or the loss of the
// connection to the proxy, becomes UNAVAILABLE. While its proxy refuses
// connections, a front stops listening and drops its connections too.
type fronts struct {
	fleet *sim.Fleet
	d     *demux
	mu    sync.Mutex
	srvs  []*frontServer
}

type frontServer struct {
	idx  int
	addr string
	srv  *grpc.Server // nil while refusing
}

func startFronts(f *sim.Fleet) (*fronts, []string, error) {
	var labels []retry.Proxy
	var addrs []string
	for h := 0; h < f.Hosts(); h++ {
		for j := 0; j < f.Ports(); j++ {
			p := f.Proxy(h, j)
			labels = append(labels, p.Label())
			addrs = append(addrs, p.Addr())
		}
	}
	fr := &fronts{fleet: f, d: newDemux(labels, addrs)}
	var out []string
	for i := range addrs {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			fr.stop()
			return nil, nil, err
		}
		s := &frontServer{idx: i, addr: ln.Addr().String()}
		fr.srvs = append(fr.srvs, s)
		fr.serve(s, ln)
		out = append(out, s.addr)
	}
	fr.d.waitUp(2 * time.Second)
	if err := fr.follow(f); err != nil {
		fr.stop()
		return nil, nil, err
	}
	return fr, out, nil
}

func (fr *fronts) serve(s *frontServer, ln net.Listener) {
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}))
	handler := func(_ any, ctx context.Context, dec func(any) error, _ grpc.UnaryServerInterceptor) (any, error) {
		var in []byte
		if err := dec(&in); err != nil {
			return nil, err
		}
		return fr.forward(ctx, s.idx, in)
	}
	srv.RegisterService(&grpc.ServiceDesc{
		ServiceName: serviceName,
		HandlerType: (*any)(nil),
		Methods: []grpc.MethodDesc{
			{MethodName: "ReadSimple", Handler: handler},
			{MethodName: "ReadComplex", Handler: handler},
			{MethodName: "Write", Handler: handler},
		},
	}, struct{}{})
	s.srv = srv
	go func() { _ = srv.Serve(ln) }()
}

// forward is one call: the frame to the proxy, its answer back.
func (fr *fronts) forward(ctx context.Context, i int, frame []byte) (any, error) {
	if len(frame) < 20 {
		return nil, status.Error(codes.InvalidArgument, "short frame")
	}
	st, err := fr.d.roundTrip(ctx, i, frame)
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return nil, status.FromContextError(ctx.Err()).Err()
	default:
		return nil, status.Error(codes.Unavailable, err.Error())
	}
	if st.result == retry.ResultProxySwiftTimeout {
		return nil, status.Error(codes.Unavailable, "proxy answered -7953")
	}
	var out []byte
	for _, f := range st.frames {
		out = binary.LittleEndian.AppendUint32(out, uint32(len(f)))
		out = append(out, f...)
	}
	return &out, nil
}

// follow stops the fronts whose proxy refuses connections and starts
// again, on the same address, those whose proxy listens again.
func (fr *fronts) follow(f *sim.Fleet) error {
	fr.mu.Lock()
	defer fr.mu.Unlock()
	for _, s := range fr.srvs {
		p := f.Proxy(s.idx/f.Ports(), s.idx%f.Ports())
		refuse := p.Profile().Refuse
		switch {
		case refuse && s.srv != nil:
			s.srv.Stop()
			s.srv = nil
		case !refuse && s.srv == nil:
			var ln net.Listener
			var err error
			for try := 0; try < 50; try++ {
				if ln, err = net.Listen("tcp", s.addr); err == nil {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err != nil {
				return err
			}
			fr.serve(s, ln)
		}
	}
	return nil
}

func (fr *fronts) stop() {
	fr.mu.Lock()
	for _, s := range fr.srvs {
		if s.srv != nil {
			s.srv.Stop()
			s.srv = nil
		}
	}
	fr.mu.Unlock()
	fr.d.close()
}
