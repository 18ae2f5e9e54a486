package grpccall

import (
	"context"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/readretry/readretry/retry/backoff"
	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/call"
)

func ExampleUnaryClientInterceptor() {
	// A server on 127.0.0.1 whose first answer is Unavailable. Its flag
	// interceptor puts each call's retry flags into the handler's context.
	var calls atomic.Int32
	svc := &service{unary: func(ctx context.Context, in []byte) ([]byte, error) {
		f, _ := call.FlagsFrom(ctx)
		fmt.Printf("server: attempt %d, flag %q, retry %v\n", f.Attempt, f.Flag, f.IsRetry())
		if calls.Add(1) == 1 {
			return nil, status.Error(codes.Unavailable, "warming up")
		}
		return append([]byte("echo "), in...), nil
	}}
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := grpc.NewServer(grpc.ForceServerCodec(rawCodec{}),
		grpc.UnaryInterceptor(UnaryServerInterceptor()))
	srv.RegisterService(&serviceDesc, svc)
	go srv.Serve(lis)
	defer srv.Stop()

	// The client: retries under a policy with a budget shared by the client.
	b, _ := budget.New(budget.Config{})
	policy := call.MustPolicy(call.WithBudget(b), call.WithBackoff(backoff.Constant{Wait: 10 * time.Millisecond}))
	conn, err := grpc.NewClient(lis.Addr().String(),
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.ForceCodec(rawCodec{})),
		grpc.WithUnaryInterceptor(UnaryClientInterceptor(policy)))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer conn.Close()

	ctx := call.WithRetryFlag(context.Background(), "checkout")
	req, reply := []byte("hi"), []byte(nil)
	err = conn.Invoke(ctx, unaryMethod, &req, &reply)
	fmt.Printf("client: %q, %v, budget: %d retry\n", reply, err, b.Stats().Retries)
	// Output:
	// server: attempt 1, flag "checkout", retry false
	// server: attempt 2, flag "checkout", retry true
	// client: "echo hi", <nil>, budget: 1 retry
}
