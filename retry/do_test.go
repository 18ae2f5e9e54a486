package retry_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

// TestR20DoReads: Do returns every record of every packet in order, each
// exactly once, for simple, batch and index reads, with a partial re-send
// behind the batch (proxy a silent, so the batch is re-sent to b after x).
func TestR20DoReads(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := servingClient(t, 7, "a", "b")
	defer c.Close()
	var res retry.Result
	ctx := context.Background()

	if err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("alice")}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Len() != 1 || string(res.Record(0).Value) != "value-of-alice" || res.Code() != retry.ResultOK || res.Attempts() != 1 {
		t.Fatalf("simple read: %d records, code %d", res.Len(), res.Code())
	}

	if err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("g")}, &res); err != nil {
		t.Fatal(err)
	}
	if res.Len() != 100 || res.Packets() != 15 {
		t.Fatalf("index read: %d records in %d packets", res.Len(), res.Packets())
	}
	for i := range res.Len() {
		if r := res.Record(i); r.Tag != uint64(i) || string(r.Value) != fmt.Sprint("rec-", i) {
			t.Fatalf("record %d: %+v", i, r)
		}
	}

	// A budget wide enough that a loaded machine's scheduling delays never
	// use it up: with MaxCnt 7 the first wait x is 2T/(n(n+1)) ≈ 107 ms.
	_ = c.SetReadRetryTimeout(time.Second, 3*time.Second)
	tr.SetHandler(px[0], nil) // a is silent: the batch goes to b after x
	keys := batchKeys(20)
	for range 4 { // at least one lands on a (round robin)
		if err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdBatchGet, Keys: keys}, &res); err != nil {
			t.Fatal(err)
		}
		seen := map[uint64]bool{}
		for i := range res.Len() {
			r := res.Record(i)
			if seen[r.Tag] || string(r.Value) != "value-of-"+string(keys[r.Tag]) {
				t.Fatalf("batch record %+v (seen before: %v)", r, seen[r.Tag])
			}
			seen[r.Tag] = true
		}
		if len(seen) != 20 {
			t.Fatalf("batch: %d keys", len(seen))
		}
	}
	if st, _ := c.Stats(testZone); st.RetriesTimeout == 0 {
		t.Fatal("no batch went to the silent proxy: the re-send path was not exercised")
	}
}

// TestR20DoErrors: the final code comes back as an error that errors.Is
// matches against the package's sentinels; Send's errors come back
// unchanged with nothing sent and nothing kept.
func TestR20DoErrors(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := servingClient(t, 0, "a", "b")
	_ = c.SetReadRetryTimeout(20*time.Millisecond, 20*time.Millisecond)
	for _, p := range px {
		tr.SetHandler(p, nil)
	}
	ctx := context.Background()
	var res retry.Result
	err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res)
	var re *retry.Error
	if !errors.Is(err, retry.ErrReadRetryTimeout) || !errors.As(err, &re) || re.Code != retry.ResultReadRetryTimeout || res.Attempts() != 3 {
		t.Fatalf("silent proxies: %v (attempts %d)", err, res.Attempts())
	}
	tr.SetHandler(px[0], retrytest.Fail(-100))
	tr.SetHandler(px[1], retrytest.Fail(-100))
	if err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, nil); !errors.As(err, &re) || re.Code != -100 {
		t.Fatalf("proxy code: %v", err)
	}

	tr.SetLog(true)
	for _, tc := range []struct {
		zone retry.Zone
		req  *retry.Request
		want error
	}{
		{retry.Zone{AppID: 9}, &retry.Request{Command: wire.CmdGet}, retry.ErrUnknownZone},
		{testZone, nil, retry.ErrBadRequest},
		{testZone, &retry.Request{Command: 999}, retry.ErrBadRequest},
		{testZone, &retry.Request{Command: wire.CmdBatchGet}, retry.ErrBadRequest},
	} {
		if err := c.Do(ctx, tc.zone, tc.req, &res); !errors.Is(err, tc.want) {
			t.Fatalf("%+v: %v, want %v", tc.req, err, tc.want)
		}
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Do(done, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res); !errors.Is(err, context.Canceled) {
		t.Fatalf("done context: %v", err)
	}
	if n := len(tr.Sent()); n != 0 {
		t.Fatalf("%d frames sent for refused calls", n)
	}
	if reqs, _ := c.InFlight(testZone); reqs != 0 {
		t.Fatalf("%d requests kept", reqs)
	}
	_ = c.Close()
	if err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res); !errors.Is(err, retry.ErrClosed) {
		t.Fatalf("closed client: %v", err)
	}
}

// silentClient is servingClient with its one proxy silent and sends
// logged, budgets 300 ms: a read's answer comes only when the test replays
// it, and a read left alone ends with -19219 at 300 ms.
func silentClient(t *testing.T) (*retry.Client, *retrytest.Transport, []retry.Proxy) {
	t.Helper()
	c, tr, px := servingClient(t, 0, "a")
	tr.SetHandler(px[0], nil)
	tr.SetLog(true)
	_ = c.SetReadRetryTimeout(300*time.Millisecond, 300*time.Millisecond)
	return c, tr, px
}

// TestR20DoContext: a context cancelled before the read retry budget ends
// is honoured: Do returns with the context's error long before the budget;
// the engine keeps the request to its own end, drops its late answer and
// counts it; nothing leaks (goroutines, table, wheel). (A deadline would
// become the read's budget, SPEC §7 R20: TestR20DeadlineIsBudget.)
func TestR20DoContext(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, _ := silentClient(t)
	defer c.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	start := time.Now()
	var res retry.Result
	err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, &res)
	if took := time.Since(start); !errors.Is(err, context.Canceled) || took >= 300*time.Millisecond {
		t.Fatalf("Do returned %v after %v, want the cancel before the 300 ms budget", err, took)
	}
	if res.Len() != 0 || res.Code() != 0 {
		t.Fatal("res was written after the caller left")
	}
	sent := tr.Sent()
	tr.Replay(sent[0], retrytest.Serve(retrytest.Data{}, 0)) // the late answer
	deadline := time.Now().Add(5 * time.Second)
	for {
		st, _ := c.Stats(testZone)
		reqs, timers := c.InFlight(testZone)
		if st.DoAbandoned == 1 && st.AbandonedResponses == 1 && reqs == 0 && timers == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("stats %+v, in flight %d/%d", st, reqs, timers)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestR20DoBesideAsync: one poller, chosen at New, serves both APIs and
// neither steals the other's answers (SPEC R20). A PollHand client serves
// Do through the caller's RecvResponse loop; a PollSelf client gives Send's
// responses to Config.OnResponse and Do's to Do, and RecvResponse returns
// nothing there. Mixes that could lose responses are refused by New
// (OnResponse with PollHand) or, by the Config alone, by Send (PollSelf
// without OnResponse), before and after any other call.
func TestR20DoBesideAsync(t *testing.T) {
	defer goleak.VerifyNone(t)
	t.Run("hand", func(t *testing.T) {
		c, _, _ := servingClientWith(t, retry.Config{Poller: retry.PollHand}, 0, "a")
		defer c.Close()
		if _, ok := c.RecvResponse(); ok {
			t.Fatal("response from an idle client")
		}
		stop := make(chan struct{})
		var asyncSeen, foreign atomic.Int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { // the caller's own loop
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				rsp, ok := c.RecvResponse()
				if !ok {
					time.Sleep(100 * time.Microsecond)
					continue
				}
				if rsp.AsyncID() >= 1000 {
					foreign.Add(1)
				} else {
					asyncSeen.Add(1)
				}
			}
		}()
		for i := range 50 {
			if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(i)}); err != nil {
				t.Fatal(err)
			}
			var res retry.Result
			if err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("d"), AsyncID: 1000 + uint64(i)}, &res); err != nil || res.Len() != 1 {
				t.Fatal(err)
			}
		}
		for asyncSeen.Load() < 50 {
			time.Sleep(time.Millisecond)
		}
		close(stop)
		wg.Wait()
		if asyncSeen.Load() != 50 || foreign.Load() != 0 {
			t.Fatalf("the loop saw %d of 50 async answers and %d of Do's", asyncSeen.Load(), foreign.Load())
		}
		if _, err := retry.New(retry.Config{Transport: retrytest.NewTransport(), Poller: retry.PollHand, OnResponse: func(*retry.Response) {}}); !errors.Is(err, retry.ErrInvalidConfig) {
			t.Fatalf("OnResponse with PollHand: %v", err)
		}
	})
	t.Run("self", func(t *testing.T) {
		got := make(chan uint64, 100)
		c, _, _ := servingClientWith(t, retry.Config{OnResponse: func(r *retry.Response) { got <- r.AsyncID() }}, 0, "a")
		defer c.Close()
		if _, ok := c.RecvResponse(); ok {
			t.Fatal("RecvResponse polled a PollSelf client")
		}
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var r retry.Result
				if err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("d"), AsyncID: 1000 + uint64(i)}, &r); err != nil || r.Len() != 1 {
					t.Error(err)
				}
			}()
			if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(i)}); err != nil {
				t.Fatal(err)
			}
		}
		wg.Wait()
		for seen := 0; seen < 20; seen++ {
			if id := <-got; id >= 1000 {
				t.Fatalf("the callback got Do's answer %d", id)
			}
		}
	})
	t.Run("self without OnResponse", func(t *testing.T) {
		c, _, _ := servingClient(t, 0, "a")
		defer c.Close()
		req := retry.Request{Command: wire.CmdGet, Key: []byte("k")}
		for i := range 2 { // before and after a Do: the answer depends on the Config alone
			if _, err := c.Send(testZone, &req); !errors.Is(err, retry.ErrPoller) {
				t.Fatalf("Send %d: %v, want ErrPoller", i, err)
			}
			if err := c.Do(context.Background(), testZone, &req, nil); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// TestR20DoClose: Close ends every Do under way with ErrClosed.
func TestR20DoClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := servingClient(t, 0, "a")
	tr.SetHandler(px[0], nil)
	errs := make(chan error, 10)
	for range 10 {
		go func() {
			errs <- c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}, nil)
		}()
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if reqs, _ := c.InFlight(testZone); reqs == 10 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the 10 Do calls never got in flight")
		}
	}
	_ = c.Close()
	for range 10 {
		if err := <-errs; !errors.Is(err, retry.ErrClosed) {
			t.Fatalf("Do after Close: %v", err)
		}
	}
}

// TestR20ManyWaiters: 100,000 goroutines blocked in Do on one zone at once
// (2,000 under the race detector, which allows 8,128 goroutines), every one
// answered exactly once; the memory each waiter costs is logged (and
// reported by BenchmarkDoBlocked). The client's clock stands still, so no
// read times out while a busy machine starts the goroutines (it took 6 s
// on two shared cores, against a 3 s budget): nothing here depends on the
// machine's speed.
func TestR20ManyWaiters(t *testing.T) {
	n := 100_000
	if raceEnabled {
		n = 2_000
	}
	c, tr := benchSilentClient(t)
	defer c.Close()
	perWaiter := blockWaiters(t, c, n, func() int {
		sent := tr.Sent()
		for _, s := range sent {
			tr.Replay(s, retrytest.Serve(retrytest.Data{}, 0))
		}
		return len(sent)
	})
	t.Logf("%d goroutines blocked in Do: %.0f bytes per waiter (heap + stacks)", n, perWaiter)
}

// blockWaiters starts n goroutines in Do, waits until all are in flight,
// measures heap and stack bytes per waiter, calls answer until it has
// answered n requests (a context is in the table just before its frame is
// sent), and checks that each Do returns its own answer. It waits as long
// as the machine needs (the test binary's -timeout bounds a hang).
func blockWaiters(t testing.TB, c *retry.Client, n int, answer func() int) float64 {
	before := inUse()
	errs := make(chan error, n)
	for i := range n {
		go func() {
			var res retry.Result
			key := fmt.Appendf(nil, "k%d", i)
			err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: key}, &res)
			if err == nil && (res.Len() != 1 || string(res.Record(0).Value) != "value-of-"+string(key)) {
				err = fmt.Errorf("waiter %d got %d records", i, res.Len())
			}
			errs <- err
		}()
	}
	for {
		if reqs, _ := c.InFlight(testZone); reqs == n {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	per := float64(inUse()-before) / float64(n)
	for answered := 0; answered < n; {
		answered += answer()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return per
}

// inUse returns the heap and goroutine-stack bytes in use after a GC.
func inUse() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse + ms.StackInuse
}

// ExampleClient_Do is what most Go code wants: a blocking read with a
// context, its records in a reusable Result. Proxy a is silent, so the
// read is quietly re-sent to b; the caller just gets the answer.
func ExampleClient_Do() {
	tr := retrytest.NewTransport()
	a := retry.Proxy{Host: "10.0.0.1", Port: 9000}
	b := retry.Proxy{Host: "10.0.0.2", Port: 9000}
	tr.SetHandler(b, retrytest.Serve(retrytest.Data{StreamLen: 3}, 1))
	c, _ := retry.New(retry.Config{Transport: tr})
	defer c.Close()
	zone := retry.Zone{AppID: 2, ZoneID: 3}
	_ = c.ApplyRoute(zone, []retry.Proxy{a, b},
		"tcp://10.0.0.9:9000;conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	_ = c.SetReadRetryTimeout(30*time.Millisecond, 60*time.Millisecond)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	var res retry.Result // reuse it: its buffers are kept
	for _, key := range []string{"alice", "bob"} {
		if err := c.Do(ctx, zone, &retry.Request{Command: wire.CmdGet, Table: "players", Key: []byte(key)}, &res); err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s: %s\n", key, res.Record(0).Value)
	}
	// An index read streamed in three packets: every record once, in order.
	if err := c.Do(ctx, zone, &retry.Request{Command: wire.CmdGetByPartKey, Key: []byte("guild")}, &res); err == nil {
		for i := range res.Len() {
			r := res.Record(i)
			fmt.Printf("  #%d %s = %s\n", r.Tag, r.Key, r.Value)
		}
	}
	// Output:
	// alice: value-of-alice
	// bob: value-of-bob
	//   #0 guild/0 = rec-0
	//   #1 guild/1 = rec-1
	//   #2 guild/2 = rec-2
}

// TestR20DoSequential: many Do calls in a row on one client, each checked,
// while Do's own Driver polls beside the callers' polls: a waiter that the
// Driver finishes just before its caller takes the poller lock must still
// consume its wake-up, or the next call on that waiter would return early
// with an empty result.
func TestR20DoSequential(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, _, _ := servingClient(t, 0, "a", "b")
	defer c.Close()
	var res retry.Result
	n := 20_000
	if raceEnabled {
		n = 2_000
	}
	for i := range n {
		key := fmt.Appendf(nil, "k%d", i)
		if err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: key}, &res); err != nil {
			t.Fatal(err)
		}
		if res.Len() != 1 || string(res.Record(0).Value) != "value-of-"+string(key) {
			t.Fatalf("call %d: %d records", i, res.Len())
		}
	}
}

// waitingTransport is retrytest's transport with the optional Waiter
// method: Wait reports true as soon as an answer is in the inbox.
type waitingTransport struct {
	*retrytest.Transport
	waits atomic.Int64
}

func (w *waitingTransport) Wait(timeout time.Duration) bool {
	w.waits.Add(1)
	for end := time.Now().Add(timeout); time.Now().Before(end); time.Sleep(100 * time.Microsecond) {
		if w.Pending() > 0 {
			return true
		}
	}
	return w.Pending() > 0
}

// TestDriverWakesOnArrival: over a Transport that implements Waiter, a
// PollSelf client's driver handles an answer when it arrives, not at its
// next tick (SPEC R14, R20; docs/design.md's claim for transport/tcp). With a
// 1 s interval, an answer that arrives just after a tick reaches the
// callback long before the next one. The first Send starts the driver; its
// answer comes at the first tick, after which the driver waits on the
// transport.
func TestDriverWakesOnArrival(t *testing.T) {
	defer goleak.VerifyNone(t)
	tr := &waitingTransport{Transport: retrytest.NewTransport()}
	px := hostProxies("a")
	tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	got := make(chan time.Time, 2)
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, PollInterval: time.Second,
		OnResponse: func(*retry.Response) { got <- time.Now() }})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := c.ApplyRoute(testZone, px, seedConf); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("first")}); err != nil {
		t.Fatal(err)
	}
	<-got
	for deadline := time.Now().Add(10 * time.Second); tr.waits.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the Driver never waited on the transport")
		}
	}
	sent := time.Now()
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if lag := at.Sub(sent); lag > 500*time.Millisecond {
			t.Fatalf("answer handled %v after it arrived: at the next tick, not on arrival", lag)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no answer")
	}
}

// TestR20AbandonedWaiterNotReused: a Do whose context ended leaves its
// waiter to the poller until its request ends; the next Do must get a
// waiter of its own and its own answer. Found by a new-user probe: the
// abandoned waiter was freed twice, so the next Do received the first
// request's late answer with a nil error (or its -19219 early), and a burst
// of more than 1,024 abandoned calls wiped the registry under the poller
// (index out of range).
func TestR20AbandonedWaiterNotReused(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, tr, px := silentClient(t)
	defer c.Close()
	// Cancelled, not timed out: a deadline would become A's budget (SPEC §7
	// R20) and end A in the engine too; a cancel leaves it in flight.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	time.AfterFunc(20*time.Millisecond, cancel)
	if err := c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("A")}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("first Do: %v", err)
	}
	sentA := tr.Sent()
	// B's budget is long, so that its answer comes from its first re-send
	// (at 1.67 s) however slow the machine is; reads sent later get 300 ms
	// again.
	_ = c.SetReadRetryTimeout(10*time.Second, 10*time.Second)
	done := make(chan error, 1)
	var res retry.Result
	go func() {
		done <- c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("B")}, &res)
	}()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		if reqs, _ := c.InFlight(testZone); reqs == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("B never got in flight")
		}
	}
	tr.Replay(sentA[0], retrytest.Serve(retrytest.Data{}, 0)) // A's late answer
	select {
	case err := <-done:
		t.Fatalf("B returned on A's answer: %v, %d records", err, res.Len())
	case <-time.After(100 * time.Millisecond):
	}
	tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0)) // B's re-send is answered
	if err := <-done; err != nil || res.Len() != 1 || string(res.Record(0).Key) != "B" {
		t.Fatalf("B: %v, %d records", err, res.Len())
	}
	_ = c.SetReadRetryTimeout(300*time.Millisecond, 300*time.Millisecond)

	// A burst of abandoned calls, more than the registry keeps when idle.
	var wg sync.WaitGroup
	for range 1100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			time.AfterFunc(10*time.Millisecond, cancel)
			tr.SetHandler(px[0], nil)
			_ = c.Do(ctx, testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("C")}, nil)
		}()
	}
	wg.Wait()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if reqs, timers := c.InFlight(testZone); reqs == 0 && timers == 0 {
			break
		}
		if time.Now().After(deadline) {
			reqs, timers := c.InFlight(testZone)
			t.Fatalf("abandoned requests never ended: %d requests, %d timers", reqs, timers)
		}
	}
	if err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("D")}, &res); !errors.Is(err, retry.ErrReadRetryTimeout) {
		t.Fatalf("a Do after the burst: %v", err)
	}
}

// TestR20HandPolledDoWaitsForTheLoop: on a PollHand client a Do started
// before the caller's loop is served by that loop once it runs, and the
// loop gets exactly its own Send's answer (found by a fresh-clone probe in
// round 2, when the poller was chosen by the first call: Do's own driver
// took over and the loop got nothing).
func TestR20HandPolledDoWaitsForTheLoop(t *testing.T) {
	defer goleak.VerifyNone(t)
	c, _, _ := servingClientWith(t, retry.Config{Poller: retry.PollHand}, 0, "a")
	defer c.Close()
	if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: 1}); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		var res retry.Result
		err := c.Do(context.Background(), testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("d")}, &res)
		if err == nil && res.Len() != 1 {
			err = fmt.Errorf("%d records", res.Len())
		}
		done <- err
	}()
	time.Sleep(20 * time.Millisecond) // Do is waiting; nobody has polled yet
	var async []uint64
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(time.Millisecond) {
		for {
			rsp, ok := c.RecvResponse()
			if !ok {
				break
			}
			async = append(async, rsp.AsyncID())
		}
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			if len(async) != 1 || async[0] != 1 {
				t.Fatalf("the caller's loop got %v, want its one answer", async)
			}
			if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
				t.Fatalf("Send after Do: %v", err)
			}
			return
		default:
		}
		if time.Now().After(deadline) {
			t.Fatal("Do never returned")
		}
	}
}
