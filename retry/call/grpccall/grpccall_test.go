package grpccall

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/call"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// rawCodec sends *[]byte messages as they are: the test service needs no
// generated code.
type rawCodec struct{}

func (rawCodec) Marshal(v any) ([]byte, error) {
	if p, ok := v.(*[]byte); ok {
		return *p, nil
	}
	return nil, fmt.Errorf("rawCodec: cannot marshal %T", v)
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	p, ok := v.(*[]byte)
	if !ok {
		return fmt.Errorf("rawCodec: cannot unmarshal into %T", v)
	}
	*p = append((*p)[:0], data...)
	return nil
}

func (rawCodec) Name() string { return "rrraw" }

const (
	serviceName  = "readretry.test.Echo"
	unaryMethod  = "/" + serviceName + "/Unary"
	streamMethod = "/" + serviceName + "/Stream"
)

// service is the test server's behaviour, one function per method.
type service struct {
	unary  func(ctx context.Context, in []byte) ([]byte, error)
	stream func(ss grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: serviceName,
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Unary",
		Handler: func(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
			in := new([]byte)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				out, err := srv.(*service).unary(ctx, *req.(*[]byte))
				if err != nil {
					return nil, err
				}
				return &out, nil
			}
			if interceptor == nil {
				return h(ctx, in)
			}
			return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: unaryMethod}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Stream",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			return srv.(*service).stream(ss)
		},
	}},
}

// serve starts a real grpc.Server for svc on 127.0.0.1, with the flag
// interceptors given server options, and returns its address.
func serve(t testing.TB, svc *service, opts ...call.ServerOption) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(
		grpc.ForceServerCodec(rawCodec{}),
		grpc.ChainUnaryInterceptor(UnaryServerInterceptor(opts...)),
		grpc.ChainStreamInterceptor(StreamServerInterceptor(opts...)),
	)
	srv.RegisterService(&serviceDesc, svc)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-done
	})
	return lis.Addr().String()
}

// dial connects to addr with the retry interceptors under p (nil p: a bare
// connection, no interceptor).
func dial(t testing.TB, addr string, p *call.Policy) *grpc.ClientConn {
	t.Helper()
	opts := []grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
	}
	if p != nil {
		opts = append(opts, grpc.WithUnaryInterceptor(UnaryClientInterceptor(p)), grpc.WithStreamInterceptor(StreamClientInterceptor(p)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

func unary(ctx context.Context, conn *grpc.ClientConn, in string) (string, error) {
	req, out := []byte(in), []byte(nil)
	err := conn.Invoke(ctx, unaryMethod, &req, &out)
	return string(out), err
}

// seen records the flags a server got, one entry per call or stream.
type seen struct {
	mu    sync.Mutex
	flags []call.Flags
	at    []time.Time
}

func (s *seen) add(ctx context.Context) int {
	f, _ := call.FlagsFrom(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flags = append(s.flags, f)
	s.at = append(s.at, time.Now())
	return len(s.flags)
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.flags)
}

func (s *seen) attempts() []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []int
	for _, f := range s.flags {
		out = append(out, f.Attempt)
	}
	return out
}

// failing returns a unary handler that fails its first n calls with code,
// setting trailer md on them, and then echoes its input.
func failing(s *seen, n int, code codes.Code, trailer ...string) func(context.Context, []byte) ([]byte, error) {
	return func(ctx context.Context, in []byte) ([]byte, error) {
		if s.add(ctx) <= n {
			if len(trailer) > 0 {
				grpc.SetTrailer(ctx, metadata.Pairs(trailer...))
			}
			return nil, status.Error(code, "test failure")
		}
		return in, nil
	}
}

func fastPolicy(t testing.TB, opts ...call.Option) *call.Policy {
	t.Helper()
	p, err := call.NewPolicy(append([]call.Option{call.WithBackoff(backoff.Constant{Wait: time.Millisecond})}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestUnaryRetriesUnavailable: Unavailable is a network error, retried; each
// attempt carries its number and the retry flag, and the server's
// interceptor reads them back (the server is not the entrance).
func TestUnaryRetriesUnavailable(t *testing.T) {
	var s seen
	conn := dial(t, serve(t, &service{unary: failing(&s, 2, codes.Unavailable)}), fastPolicy(t))
	ctx := call.WithRetryFlag(context.Background(), "checkout")
	out, err := unary(ctx, conn, "ping")
	if err != nil || out != "ping" {
		t.Fatalf("%q, %v", out, err)
	}
	want := []call.Flags{{Attempt: 1, Flag: "checkout"}, {Attempt: 2, Flag: "checkout"}, {Attempt: 3, Flag: "checkout"}}
	if !slices.Equal(s.flags, want) {
		t.Fatalf("server saw %+v, want %+v", s.flags, want)
	}
	// The caller's outgoing metadata is sent, and not changed.
	var got metadata.MD
	conn2 := dial(t, serve(t, &service{unary: func(ctx context.Context, in []byte) ([]byte, error) {
		got, _ = metadata.FromIncomingContext(ctx)
		return in, nil
	}}), fastPolicy(t))
	mine := metadata.Pairs("tenant", "t1", call.HeaderFlag, "stale", call.HeaderAttempt, "9")
	if _, err := unary(metadata.NewOutgoingContext(context.Background(), mine), conn2, "x"); err != nil {
		t.Fatal(err)
	}
	if got.Get("tenant")[0] != "t1" || got.Get(call.HeaderAttempt)[0] != "1" || len(got.Get(call.HeaderFlag)) != 0 {
		t.Fatalf("server got metadata %v", got)
	}
	if mine.Get(call.HeaderAttempt)[0] != "9" {
		t.Fatalf("caller's metadata changed: %v", mine)
	}
}

// TestUnaryNotRetried: business and service-quality codes are never retried
// (B2), unknown ones only when listed (G4); the caller gets the server's
// status unchanged.
func TestUnaryNotRetried(t *testing.T) {
	for _, c := range []struct {
		code codes.Code
		opts []call.Option
		want int
	}{
		{codes.InvalidArgument, nil, 1},
		{codes.NotFound, nil, 1},
		{codes.PermissionDenied, nil, 1},
		{codes.FailedPrecondition, nil, 1},
		{codes.Unauthenticated, nil, 1},
		{codes.ResourceExhausted, nil, 1},
		{codes.Aborted, nil, 1},
		{codes.ResourceExhausted, []call.Option{call.WithRetryableCodes(int(codes.ResourceExhausted))}, 1},
		{codes.Internal, nil, 1},
		{codes.Internal, []call.Option{call.WithRetryableCodes(int(codes.Internal))}, 3},
		{codes.Unavailable, []call.Option{call.WithRetryableCodes(int(codes.Internal))}, 1}, // not listed
		{codes.Unavailable, []call.Option{call.NonCritical()}, 1},                           // B6
		{codes.DeadlineExceeded, nil, 3},                                                    // the entrance retries timeouts
	} {
		var s seen
		conn := dial(t, serve(t, &service{unary: failing(&s, 100, c.code)}), fastPolicy(t, c.opts...))
		_, err := unary(context.Background(), conn, "x")
		if status.Code(err) != c.code || status.Convert(err).Message() != "test failure" || s.count() != c.want {
			t.Errorf("%v %d opts: err %v after %d attempts, want %d", c.code, len(c.opts), err, s.count(), c.want)
		}
	}
}

// TestPushback: the server's grpc-retry-pushback-ms is obeyed — the next
// attempt waits at least that long — and a negative or malformed value
// means no retry.
func TestPushback(t *testing.T) {
	var s seen
	conn := dial(t, serve(t, &service{unary: failing(&s, 1, codes.Unavailable, PushbackKey, "150")}), fastPolicy(t))
	if _, err := unary(context.Background(), conn, "x"); err != nil || s.count() != 2 {
		t.Fatalf("err %v after %d attempts", err, s.count())
	}
	if gap := s.at[1].Sub(s.at[0]); gap < 150*time.Millisecond {
		t.Fatalf("second attempt %v after the first, pushback 150 ms", gap)
	}
	for _, v := range [][]string{{"-1"}, {"abc"}, {"1.5"}, {" 5"}, {"-99999999999999999999"}, {"10", "-1"}, {"10", "10"}} {
		var s seen
		var kv []string
		for _, x := range v {
			kv = append(kv, PushbackKey, x)
		}
		conn := dial(t, serve(t, &service{unary: failing(&s, 100, codes.Unavailable, kv...)}), fastPolicy(t))
		if _, err := unary(context.Background(), conn, "x"); status.Code(err) != codes.Unavailable || s.count() != 1 {
			t.Errorf("pushback %q: err %v after %d attempts, want 1", v, err, s.count())
		}
	}
}

// TestJudgePushback: the trailer's values as the policy sees them.
func TestJudgePushback(t *testing.T) {
	unavailable := status.Error(codes.Unavailable, "x")
	for _, c := range []struct {
		v     string
		class call.Class
		wait  time.Duration
	}{
		{"0", call.Network, 0},
		{"250", call.Network, 250 * time.Millisecond},
		{"+7", call.Network, 7 * time.Millisecond},
		{"99999999999999999999", call.Network, maxPushback * time.Millisecond},
		{"2000000000000", call.Network, maxPushback * time.Millisecond},
		{"-1", call.ServiceQuality, 0},
		{"", call.ServiceQuality, 0},
		{"soon", call.ServiceQuality, 0},
	} {
		e, ok := judge(unavailable, metadata.Pairs(PushbackKey, c.v)).(*attemptError)
		if !ok || e.RetryClass() != c.class || e.RetryAfter() != c.wait || e.RetryCode() != int(codes.Unavailable) {
			t.Errorf("pushback %q: %+v", c.v, e)
		}
	}
	// Several values are malformed (SPEC M2 round 3): no retry, whatever
	// the values, as a single malformed one.
	for _, vs := range [][]string{{"10", "-1"}, {"10", "10"}, {"0", "250"}} {
		md := metadata.MD{}
		md.Append(PushbackKey, vs...)
		e, ok := judge(unavailable, md).(*attemptError)
		if !ok || e.RetryClass() != call.ServiceQuality || e.RetryAfter() != 0 {
			t.Errorf("pushback values %q: %+v", vs, e)
		}
	}
	if e := judge(unavailable, nil).(*attemptError); e.RetryClass() != call.Network || e.RetryAfter() != 0 {
		t.Errorf("no trailer: %+v", e)
	}
	plain := errors.New("not a status")
	if judge(plain, nil) != plain {
		t.Error("a plain error was wrapped")
	}
}

// TestBudgetExhausted (B4): ten calls to a server that is always
// unavailable, under a budget of 10% with no floor. Call k (k = 1…10) sees k
// requests in the window: a retry needs retries + 1 ≤ 0.1 × k, which first
// holds at k = 10, once (its second retry would need 2 ≤ 1). So the server
// gets 10 first attempts and 1 retry, and the budget refuses 10 retries.
func TestBudgetExhausted(t *testing.T) {
	now := time.Unix(1700000000, 0)
	b, err := budget.New(budget.Config{Ratio: 0.1, MinRetriesPerSecond: budget.NoFloor, Clock: func() time.Time { return now }})
	if err != nil {
		t.Fatal(err)
	}
	var s seen
	conn := dial(t, serve(t, &service{unary: failing(&s, 1000, codes.Unavailable)}), fastPolicy(t, call.WithBudget(b)))
	for range 10 {
		if _, err := unary(context.Background(), conn, "x"); status.Code(err) != codes.Unavailable {
			t.Fatal(err)
		}
	}
	if s.count() != 11 {
		t.Fatalf("server got %d attempts, want 11", s.count())
	}
	if st := b.Stats(); st.Requests != 10 || st.Retries != 1 || st.Denied != 10 {
		t.Fatalf("budget %+v", st)
	}
}

// TestDeadline (B7): the caller's deadline ends the call at once when the
// backoff would pass it; the error has the status DeadlineExceeded and wraps
// the context's error and the last attempt's.
func TestDeadline(t *testing.T) {
	var s seen
	conn := dial(t, serve(t, &service{unary: failing(&s, 1000, codes.Unavailable)}),
		fastPolicy(t, call.WithBackoff(backoff.Constant{Wait: time.Second})))
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := unary(ctx, conn, "x")
	var ce *call.ContextError
	if status.Code(err) != codes.DeadlineExceeded || !errors.Is(err, context.DeadlineExceeded) || !errors.As(err, &ce) ||
		status.Code(ce.Last) != codes.Unavailable || ce.Attempts != 1 || s.count() != 1 {
		t.Fatalf("err %v after %d attempts", err, s.count())
	}
	if took := time.Since(start); took >= time.Second {
		t.Fatalf("returned after %v: slept into the backoff", took)
	}
	// A context done before the first attempt: no attempt, gRPC's status.
	cctx, cancel2 := context.WithCancel(context.Background())
	cancel2()
	if _, err := unary(cctx, conn, "x"); status.Code(err) != codes.Canceled || s.count() != 1 {
		t.Fatalf("cancelled context: %v after %d attempts", err, s.count())
	}
	if _, err := conn.NewStream(cctx, &serviceDesc.Streams[0], streamMethod); status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled context, stream: %v", err)
	}
}

// streamServer is a bidirectional stream handler: attempt n reads the
// client's messages to the end, sends sends[n-1] messages, then ends with
// codes[n-1] (OK: nil). It records what each attempt received.
type streamServer struct {
	seen
	sends []int
	codes []codes.Code

	mu       sync.Mutex
	received [][]string
}

func (s *streamServer) handle(ss grpc.ServerStream) error {
	n := s.add(ss.Context())
	var got []string
	for {
		var m []byte
		if err := ss.RecvMsg(&m); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		got = append(got, string(m))
	}
	s.mu.Lock()
	s.received = append(s.received, got)
	s.mu.Unlock()
	i := min(n, len(s.codes)) - 1
	for j := range s.sends[i] {
		out := []byte("reply " + strconv.Itoa(n) + "." + strconv.Itoa(j))
		if err := ss.SendMsg(&out); err != nil {
			return err
		}
	}
	if s.codes[i] == codes.OK {
		return nil
	}
	return status.Error(s.codes[i], "stream failure")
}

// openStream sends msgs and closes the sending side, as a client-streaming
// stub does.
func openStream(t *testing.T, ctx context.Context, conn *grpc.ClientConn, msgs ...string) grpc.ClientStream {
	t.Helper()
	cs, err := conn.NewStream(ctx, &serviceDesc.Streams[0], streamMethod)
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		b := []byte(m)
		if err := cs.SendMsg(&b); err != nil {
			t.Fatal(err)
		}
	}
	if err := cs.CloseSend(); err != nil {
		t.Fatal(err)
	}
	return cs
}

func recvAll(cs grpc.ClientStream) ([]string, error) {
	var out []string
	for {
		var m []byte
		if err := cs.RecvMsg(&m); err != nil {
			return out, err
		}
		out = append(out, string(m))
	}
}

// TestStreamCommitRule: a stream is retried until its first response
// message arrives — with the messages sent so far sent again — and not after.
func TestStreamCommitRule(t *testing.T) {
	// Attempt 1 fails before any response: retried. Attempt 2 sends one
	// message, then fails: the error goes to the caller.
	s := &streamServer{sends: []int{0, 1}, codes: []codes.Code{codes.Unavailable, codes.Unavailable}}
	conn := dial(t, serve(t, &service{stream: s.handle}), fastPolicy(t, call.WithMaxAttempts(5)))
	got, err := recvAll(openStream(t, context.Background(), conn, "a", "b"))
	if status.Code(err) != codes.Unavailable || !slices.Equal(got, []string{"reply 2.0"}) {
		t.Fatalf("got %q, %v", got, err)
	}
	if !slices.Equal(s.attempts(), []int{1, 2}) {
		t.Fatalf("server saw attempts %v, want [1 2]", s.attempts())
	}
	if len(s.received) != 2 || !slices.Equal(s.received[1], []string{"a", "b"}) {
		t.Fatalf("server received %q: the retry must send a and b again", s.received)
	}

	// Success after two failures: the caller sees only the last attempt.
	s = &streamServer{sends: []int{0, 0, 3}, codes: []codes.Code{codes.Unavailable, codes.Unavailable, codes.OK}}
	conn = dial(t, serve(t, &service{stream: s.handle}), fastPolicy(t))
	got, err = recvAll(openStream(t, context.Background(), conn, "a"))
	if err != io.EOF || !slices.Equal(got, []string{"reply 3.0", "reply 3.1", "reply 3.2"}) || s.count() != 3 {
		t.Fatalf("got %q, %v after %d attempts", got, err, s.count())
	}

	// A stream that ends with OK and no message is not retried.
	s = &streamServer{sends: []int{0}, codes: []codes.Code{codes.OK}}
	conn = dial(t, serve(t, &service{stream: s.handle}), fastPolicy(t))
	if got, err = recvAll(openStream(t, context.Background(), conn)); err != io.EOF || len(got) != 0 || s.count() != 1 {
		t.Fatalf("got %q, %v after %d attempts", got, err, s.count())
	}

	// A business error before any message: not retried either.
	s = &streamServer{sends: []int{0}, codes: []codes.Code{codes.InvalidArgument}}
	conn = dial(t, serve(t, &service{stream: s.handle}), fastPolicy(t))
	if _, err = recvAll(openStream(t, context.Background(), conn, "a")); status.Code(err) != codes.InvalidArgument || s.count() != 1 {
		t.Fatalf("%v after %d attempts", err, s.count())
	}

	// More than MaxReplay messages before the first response: committed,
	// so the failure is the caller's.
	s = &streamServer{sends: []int{0, 1}, codes: []codes.Code{codes.Unavailable, codes.OK}}
	conn = dial(t, serve(t, &service{stream: s.handle}), fastPolicy(t))
	many := make([]string, MaxReplay+1)
	for i := range many {
		many[i] = strconv.Itoa(i)
	}
	if _, err = recvAll(openStream(t, context.Background(), conn, many...)); status.Code(err) != codes.Unavailable || s.count() != 1 {
		t.Fatalf("%v after %d attempts", err, s.count())
	}
}

// TestStreamHeaderCommits: once the caller has read an attempt's headers,
// the stream is committed.
func TestStreamHeaderCommits(t *testing.T) {
	var s seen
	svc := &service{stream: func(ss grpc.ServerStream) error {
		s.add(ss.Context())
		if err := ss.SendHeader(metadata.Pairs("attempt", "x")); err != nil {
			return err
		}
		return status.Error(codes.Unavailable, "after headers")
	}}
	conn := dial(t, serve(t, svc), fastPolicy(t))
	cs := openStream(t, context.Background(), conn)
	if h, err := cs.Header(); err != nil || h.Get("attempt")[0] != "x" {
		t.Fatalf("header %v, %v", h, err)
	}
	if _, err := recvAll(cs); status.Code(err) != codes.Unavailable || s.count() != 1 {
		t.Fatalf("%v after %d attempts", err, s.count())
	}
}

// TestChain is the seed 001 scenario over gRPC (SPEC B5): A → B → C, C too
// slow for B's per-attempt timeout. Every level sees the timeout; only A,
// the entrance, retries it, so C gets MaxAttempts requests per call instead
// of MaxAttempts².
func TestChain(t *testing.T) {
	const maxAttempts = 3
	var a, b, c seen
	addrC := serve(t, &service{unary: func(ctx context.Context, in []byte) ([]byte, error) {
		c.add(ctx)
		select { // far slower than B's per-attempt timeout
		case <-ctx.Done():
			return nil, status.FromContextError(ctx.Err()).Err()
		case <-time.After(5 * time.Second):
			return in, nil
		}
	}})
	toC := dial(t, addrC, mustPolicy(t, backoff.Settings{InitialRPCTimeout: 100 * time.Millisecond, InitialRetryDelay: time.Millisecond, MaxAttempts: maxAttempts}))
	addrB := serve(t, &service{unary: func(ctx context.Context, in []byte) ([]byte, error) {
		b.add(ctx)
		out, err := unary(ctx, toC, string(in))
		return []byte(out), err
	}})
	toB := dial(t, addrB, mustPolicy(t, backoff.Settings{InitialRPCTimeout: 5 * time.Second, InitialRetryDelay: time.Millisecond, MaxAttempts: maxAttempts}))
	addrA := serve(t, &service{unary: func(ctx context.Context, in []byte) ([]byte, error) {
		a.add(ctx)
		out, err := unary(ctx, toB, string(in))
		return []byte(out), err
	}})
	user := dial(t, addrA, nil)
	const calls = 2
	for i := range calls {
		if _, err := unary(context.Background(), user, "x"); status.Code(err) != codes.DeadlineExceeded {
			t.Fatalf("call %d: %v", i, err)
		}
		if c.count() > maxAttempts*(i+1) {
			t.Fatalf("call %d: C saw %d requests, more than MaxAttempts per call", i, c.count())
		}
	}
	if a.count() != calls || b.count() != calls*maxAttempts || c.count() != calls*maxAttempts {
		t.Fatalf("A %d, B %d, C %d requests", a.count(), b.count(), c.count())
	}
	for _, f := range a.flags {
		if !f.Entrance || f.Attempt != 0 {
			t.Fatalf("A's flags %+v: it is the entrance", a.flags)
		}
	}
	if fmt.Sprint(b.attempts()) != "[1 2 3 1 2 3]" || fmt.Sprint(c.attempts()) != "[1 1 1 1 1 1]" {
		t.Fatalf("attempts: B %v, C %v", b.attempts(), c.attempts())
	}
	for _, f := range append(b.flags, c.flags...) {
		if f.Entrance {
			t.Fatal("the entrance mark travelled")
		}
	}
}

func mustPolicy(t testing.TB, s backoff.Settings) *call.Policy {
	t.Helper()
	p, err := call.NewPolicy(call.WithSettings(s), call.WithoutJitter())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestServerEdge (B5 round 2): with call.Edge, the server interceptors
// ignore the flags a caller sends and make every call the entrance; without
// it they are believed.
func TestServerEdge(t *testing.T) {
	var inside, edge seen
	svc := func(s *seen) *service {
		return &service{
			unary: func(ctx context.Context, in []byte) ([]byte, error) { s.add(ctx); return in, nil },
			stream: func(ss grpc.ServerStream) error {
				s.add(ss.Context())
				return nil
			},
		}
	}
	connIn := dial(t, serve(t, svc(&inside)), nil)
	connEdge := dial(t, serve(t, svc(&edge), call.Edge()), nil)
	ctx := metadata.NewOutgoingContext(context.Background(), metadata.Pairs(call.HeaderAttempt, "2", call.HeaderFlag, "sneaky"))
	for _, conn := range []*grpc.ClientConn{connIn, connEdge} {
		if _, err := unary(ctx, conn, "x"); err != nil {
			t.Fatal(err)
		}
		if _, err := recvAll(openStream(t, ctx, conn)); err != io.EOF {
			t.Fatal(err)
		}
	}
	believed, entrance := call.Flags{Attempt: 2, Flag: "sneaky"}, call.Flags{Entrance: true}
	if !slices.Equal(inside.flags, []call.Flags{believed, believed}) || !slices.Equal(edge.flags, []call.Flags{entrance, entrance}) {
		t.Fatalf("inside %+v, edge %+v", inside.flags, edge.flags)
	}
}

// TestNestedAttempts: a unary call made inside a call.Do retry loop numbers
// its attempts after the outer ones.
func TestNestedAttempts(t *testing.T) {
	var s seen
	conn := dial(t, serve(t, &service{unary: failing(&s, 1, codes.Unavailable)}), fastPolicy(t))
	outer := 0
	err := call.Do(context.Background(), fastPolicy(t), func(ctx context.Context) error {
		outer++
		if outer == 1 {
			return call.Mark(errors.New("outer"), call.Network)
		}
		_, err := unary(ctx, conn, "x")
		return err
	})
	if err != nil || fmt.Sprint(s.attempts()) != "[2 3]" {
		t.Fatalf("%v, server saw %v", err, s.attempts())
	}
}

// BenchmarkUnaryOverhead: the interceptor's cost on the success path, each
// iteration one bare call and one intercepted call to the same loopback
// server, alternating so that both see the same machine. Reports each
// one's ns and allocations, and their ratio (the goal is at most 1.05).
func BenchmarkUnaryOverhead(b *testing.B) {
	addr := serve(b, &service{unary: func(_ context.Context, in []byte) ([]byte, error) { return in, nil }})
	bare, wrapped := dial(b, addr, nil), dial(b, addr, fastPolicy(b))
	ctx := context.Background()
	req := []byte("ping")
	invoke := func(conn *grpc.ClientConn) {
		var out []byte
		if err := conn.Invoke(ctx, unaryMethod, &req, &out); err != nil {
			b.Fatal(err)
		}
	}
	invoke(bare)
	invoke(wrapped)
	allocsBare := testing.AllocsPerRun(20, func() { invoke(bare) })
	allocsWrapped := testing.AllocsPerRun(20, func() { invoke(wrapped) })
	var tBare, tWrapped time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first, so neither always follows the other.
		first, second, t1, t2 := bare, wrapped, &tBare, &tWrapped
		if i%2 == 1 {
			first, second, t1, t2 = wrapped, bare, &tWrapped, &tBare
		}
		start := time.Now()
		invoke(first)
		mid := time.Now()
		invoke(second)
		*t1 += mid.Sub(start)
		*t2 += time.Since(mid)
	}
	n := float64(b.N)
	b.ReportMetric(float64(tBare.Nanoseconds())/n, "ns-bare")
	b.ReportMetric(float64(tWrapped.Nanoseconds())/n, "ns-intercepted")
	b.ReportMetric(float64(tWrapped)/float64(tBare), "x-bare")
	b.ReportMetric(allocsBare, "allocs-bare")
	b.ReportMetric(allocsWrapped, "allocs-intercepted")
}

// TestHeadersCommit (SPEC M2 round 3, gRFC A6): an attempt whose server sent
// response headers before failing is committed — the server may have done
// the work — so the caller gets the failure after one handler run; a
// trailers-only failure is retried per policy (3 attempts by default).
// Unary calls, client streams (two uploads) and server streams, none of
// them reading the headers. grpc-go's own retry, configured alike, is run
// first on the same server as the reference: the counts must be its.
func TestHeadersCommit(t *testing.T) {
	type kind int
	const (
		unaryCall kind = iota
		clientStream
		serverStream
	)
	for _, c := range []struct {
		name    string
		kind    kind
		headers bool
		want    int // handler runs
	}{
		{"unary trailers-only", unaryCall, false, call.DefaultMaxAttempts},
		{"unary headers then Unavailable", unaryCall, true, 1},
		{"client stream trailers-only", clientStream, false, call.DefaultMaxAttempts},
		{"client stream headers then Unavailable", clientStream, true, 1},
		{"server stream trailers-only", serverStream, false, call.DefaultMaxAttempts},
		{"server stream headers then Unavailable", serverStream, true, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			var s seen
			var mu sync.Mutex
			var uploads [][]string
			svc := &service{
				unary: func(ctx context.Context, in []byte) ([]byte, error) {
					s.add(ctx)
					if c.headers {
						if err := grpc.SendHeader(ctx, metadata.Pairs("work", "done")); err != nil {
							return nil, err
						}
					}
					return nil, status.Error(codes.Unavailable, "draining")
				},
				stream: func(ss grpc.ServerStream) error {
					s.add(ss.Context())
					var got []string
					for {
						var m []byte
						if err := ss.RecvMsg(&m); err == io.EOF {
							break
						} else if err != nil {
							return err
						}
						got = append(got, string(m))
					}
					mu.Lock()
					uploads = append(uploads, got)
					mu.Unlock()
					if c.headers {
						if err := ss.SendHeader(metadata.Pairs("work", "done")); err != nil {
							return err
						}
					}
					return status.Error(codes.Unavailable, "draining")
				},
			}
			addr := serve(t, svc)
			run := func(conn *grpc.ClientConn) (err error) {
				switch c.kind {
				case unaryCall:
					_, err = unary(context.Background(), conn, "x")
				case clientStream:
					_, err = recvAll(openStream(t, context.Background(), conn, "upload 1", "upload 2"))
				case serverStream:
					desc := &grpc.StreamDesc{StreamName: "Stream", ServerStreams: true}
					var cs grpc.ClientStream
					if cs, err = conn.NewStream(context.Background(), desc, streamMethod); err != nil {
						t.Fatal(err)
					}
					req := []byte("query")
					if err = cs.SendMsg(&req); err != nil {
						t.Fatal(err)
					}
					if err = cs.CloseSend(); err != nil {
						t.Fatal(err)
					}
					_, err = recvAll(cs)
				}
				return err
			}
			// grpc-go's own retry (gRFC A6) as the reference, then the
			// interceptors: the same handler runs for both.
			for _, client := range []struct {
				name string
				conn *grpc.ClientConn
			}{
				{"grpc-go retry", dialGRPCRetry(t, addr)},
				{"interceptors", dial(t, addr, fastPolicy(t))},
			} {
				s = seen{}
				mu.Lock()
				uploads = nil
				mu.Unlock()
				err := run(client.conn)
				// (grpc-go's retry says in the message that it gave up.)
				if status.Code(err) != codes.Unavailable || !strings.HasSuffix(status.Convert(err).Message(), "draining") {
					t.Fatalf("%s: err %v, want the server's Unavailable", client.name, err)
				}
				if s.count() != c.want {
					t.Fatalf("%s: handler ran %d times, want %d", client.name, s.count(), c.want)
				}
				if c.kind == clientStream {
					for i, u := range uploads {
						if !slices.Equal(u, []string{"upload 1", "upload 2"}) {
							t.Fatalf("%s: attempt %d uploaded %q", client.name, i+1, u)
						}
					}
				}
			}
		})
	}
}

// dialGRPCRetry connects to addr with grpc-go's built-in retry and no
// interceptor: 3 attempts for Unavailable on every method of the test
// service, with a short backoff.
func dialGRPCRetry(t testing.TB, addr string) *grpc.ClientConn {
	t.Helper()
	const config = `{"methodConfig": [{
		"name": [{"service": "` + serviceName + `"}],
		"retryPolicy": {
			"maxAttempts": 3,
			"initialBackoff": "0.001s",
			"maxBackoff": "0.001s",
			"backoffMultiplier": 1,
			"retryableStatusCodes": ["UNAVAILABLE"]
		}
	}]}`
	conn, err := grpc.NewClient(addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithDefaultServiceConfig(config))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}
