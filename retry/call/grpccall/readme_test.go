package grpccall_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/readretry/readretry/retry/budget"
	"github.com/readretry/readretry/retry/call"
	"github.com/readretry/readretry/retry/call/grpccall"
	"github.com/readretry/readretry/retry/call/httpcall"
)

// The README's toolkit snippet, compiled and run: readmeToolkit's body
// between the markers is the README's block, byte for byte once its one
// level of indentation is removed (TestReadmeToolkitSnippet). What the
// snippet takes from its surroundings — a context, a client, a fetch
// function and its User, an address — are the parameters a newcomer's own
// code would have.

type User struct{ Code, Name string }

type pinger struct{ pings int }

func (p *pinger) Ping(context.Context) error {
	if p.pings++; p.pings == 1 {
		return call.Mark(errors.New("connection reset"), call.Network)
	}
	return nil
}

func readmeToolkit(ctx context.Context, client *pinger, fetch func(context.Context) (User, error), addr string) error {
	// README:begin
	// One budget per client: retries stay within 10% of its requests over a sliding window.
	retries, err := budget.New(budget.Config{Ratio: 0.1})
	if err != nil {
		return err
	}
	// One policy per RPC, shared by all its calls: 3 attempts in all, jittered backoff.
	policy, err := call.NewPolicy(call.WithMaxAttempts(3), call.WithBudget(retries))
	if err != nil {
		return err
	}
	if err := call.Do(ctx, policy, func(ctx context.Context) error { return client.Ping(ctx) }); err != nil {
		return err
	}
	user, err := call.DoValue(ctx, policy, fetch, call.RetryIf(func(u User) bool { return u.Code == "err_01" }))
	if err != nil {
		return err
	}
	web := &http.Client{Transport: &httpcall.Transport{Policy: policy}}
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithUnaryInterceptor(grpccall.UnaryClientInterceptor(policy)))
	// README:end
	if err != nil {
		return err
	}
	defer conn.Close()
	fmt.Printf("pings %d, user %s, transport %T, budget %d requests %d retries\n",
		client.pings, user.Name, web.Transport, retries.Stats().Requests, retries.Stats().Retries)
	return nil
}

func Example_readme() {
	fetches := 0
	fetch := func(context.Context) (User, error) {
		fetches++
		if fetches == 1 {
			return User{Code: "err_01"}, nil // the business code asks for a retry
		}
		return User{Name: "ada"}, nil
	}
	if err := readmeToolkit(context.Background(), &pinger{}, fetch, "127.0.0.1:1"); err != nil {
		fmt.Println(err)
	}
	// Output:
	// pings 2, user ada, transport *httpcall.Transport, budget 2 requests 2 retries
}

// TestReadmeToolkitSnippet: the README's toolkit block is readmeToolkit's
// body, so the README shows code that compiles and runs.
func TestReadmeToolkitSnippet(t *testing.T) {
	readme, err := os.ReadFile("../../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	src, err := os.ReadFile("readme_test.go")
	if err != nil {
		t.Fatal(err)
	}
	var block string
	for _, b := range strings.Split(string(readme), "```go\n")[1:] {
		b = b[:strings.Index(b, "```")]
		if strings.Contains(b, "call.NewPolicy(") {
			block = b
		}
	}
	if block == "" {
		t.Fatal("README: no go block with call.NewPolicy")
	}
	body := string(src)
	body = body[strings.Index(body, "// README:begin\n")+len("// README:begin\n") : strings.Index(body, "\t// README:end")]
	var lines []string
	for _, l := range strings.SplitAfter(body, "\n") {
		lines = append(lines, strings.TrimPrefix(l, "\t"))
	}
	if got := strings.Join(lines, ""); got != block {
		t.Fatalf("README block differs from readmeToolkit:\n--- README\n%s--- readme_test.go\n%s", block, got)
	}
}
