package retry_test

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/retry/retrytest"
	"github.com/readretry/readretry/wire"
	"go.uber.org/goleak"
)

func mix(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	return x ^ x>>33
}

// flaky wraps a proxy model with faults decided by (seq, attempt, salt):
// dropped requests, -7953 answers, duplicated answers.
func flaky(h retrytest.Handler, salt uint64) retrytest.Handler {
	return func(req wire.Request, r *retrytest.Replier) {
		switch mix(req.Seq()*131+uint64(req.Attempt())*7+salt) % 100 {
		case 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15:
			return // lost
		case 16, 17, 18, 19, 20:
			retrytest.Fail(retry.ResultProxySwiftTimeout)(req, r)
		case 21, 22, 23, 24, 25, 26, 27, 28:
			h(req, r)
			h(req, r) // a duplicated answer
		default:
			h(req, r)
		}
	}
}

type reqState struct {
	cmd      wire.Command
	async    uint64
	user     string
	nkeys    int
	finals   int
	result   int32
	keys     map[uint64]int
	nextPos  uint64
	disorder bool
}

// TestStressExactlyOnce: senders on several goroutines, a poller, proxies
// that lose, duplicate and fail answers. Every request gets exactly one
// final result; no record is delivered twice; index records come in order;
// a read that did not time out has every record; nothing leaks (SPEC R7,
// R11, R12, §6). Run under -race.
func TestStressExactlyOnce(t *testing.T) {
	defer goleak.VerifyNone(t)
	px := hostProxies("a", "a", "b", "c")
	f := newFixture(t, px, "conf://ReadRetryMaxCnt=4")
	data := retrytest.Data{StreamLen: 30}
	for i, p := range px {
		f.tr.SetHandler(p, flaky(retrytest.Serve(data, 6), uint64(i)))
	}
	f.tr.SetLog(false)
	const senders, perSender = 4, 600
	var mu sync.Mutex
	states := map[uint64]*reqState{}
	var wg sync.WaitGroup
	for s := 0; s < senders; s++ {
		wg.Add(1)
		go func(s int) {
			defer wg.Done()
			for i := 0; i < perSender; i++ {
				id := uint64(s*perSender + i)
				req := retry.Request{AsyncID: id, UserBuffer: []byte("user-" + strconv.Itoa(int(id)))}
				switch id % 5 {
				case 0, 1:
					req.Command, req.Key = wire.CmdGet, []byte("k"+strconv.Itoa(int(id)))
				case 2:
					req.Command, req.Keys = wire.CmdBatchGet, batchKeys(20)
				case 3:
					req.Command, req.Key = wire.CmdGetByPartKey, []byte("p"+strconv.Itoa(int(id)))
				default:
					req.Command, req.Key, req.Value = wire.CmdReplace, []byte("w"), []byte("v")
				}
				mu.Lock() // Send and bookkeeping together: an answer may come before Send returns
				seq, err := f.c.Send(testZone, &req)
				if err != nil {
					mu.Unlock()
					t.Errorf("Send: %v", err)
					return
				}
				states[seq] = &reqState{cmd: req.Command, async: id, user: string(req.UserBuffer), nkeys: len(req.Keys), keys: map[uint64]int{}}
				mu.Unlock()
			}
		}(s)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	check := func() {
		for {
			rsp, ok := f.c.RecvResponse()
			if !ok {
				return
			}
			mu.Lock()
			st := states[rsp.Seq()]
			if st == nil {
				mu.Unlock()
				t.Fatalf("response for unknown seq %d", rsp.Seq())
			}
			if rsp.AsyncID() != st.async || string(rsp.UserBuffer()) != st.user {
				t.Errorf("seq %d: async %d user %q", rsp.Seq(), rsp.AsyncID(), rsp.UserBuffer())
			}
			for it := rsp.Records(); ; {
				rec, ok := it.Next()
				if !ok {
					break
				}
				st.keys[rec.Tag]++
				if st.cmd == wire.CmdGetByPartKey {
					if rec.Tag != st.nextPos {
						st.disorder = true
					}
					st.nextPos = rec.Tag + 1
				}
			}
			if !rsp.HaveMore() {
				st.finals++
				st.result = rsp.Result()
			}
			mu.Unlock()
		}
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		f.clock.Add(5 * time.Millisecond)
		check()
	}
	for i := 0; i < 4000; i++ { // 20 s of fake time: every budget and wait ends
		f.clock.Add(5 * time.Millisecond)
		check()
	}
	mu.Lock()
	defer mu.Unlock()
	if len(states) != senders*perSender {
		t.Fatalf("%d requests recorded", len(states))
	}
	results := map[string]int{}
	for seq, st := range states {
		if st.finals != 1 {
			t.Fatalf("seq %d (%v): %d final results", seq, st.cmd, st.finals)
		}
		for k, n := range st.keys {
			if n != 1 {
				t.Fatalf("seq %d: record %d delivered %d times", seq, k, n)
			}
		}
		if st.disorder {
			t.Fatalf("seq %d: index records out of order", seq)
		}
		results[fmt.Sprint(st.cmd, st.result)]++
		if st.result == 0 {
			want := 1
			switch st.cmd {
			case wire.CmdBatchGet:
				want = st.nkeys
			case wire.CmdGetByPartKey:
				want = data.StreamLen
			case wire.CmdReplace:
				want = 0
			}
			if len(st.keys) != want {
				t.Fatalf("seq %d (%v): %d records, want %d", seq, st.cmd, len(st.keys), want)
			}
		}
	}
	st := f.stats()
	t.Logf("results by command and code: %v", results)
	t.Logf("stats: %+v", st)
	if st.FinalResults != uint64(senders*perSender) || st.DuplicatesDropped == 0 || st.RetriesTimeout == 0 || st.RetriesErrorCode == 0 {
		t.Fatalf("stats %+v", st)
	}
	f.drained()
}

// TestDriver: the optional background driver delivers every response and
// stops cleanly (goleak).
func TestDriver(t *testing.T) {
	defer goleak.VerifyNone(t)
	tr := retrytest.NewTransport()
	got := make(chan uint64, 100)
	c, err := retry.New(retry.Config{Transport: tr, Logger: quiet, PollInterval: time.Millisecond,
		OnResponse: func(r *retry.Response) { got <- r.AsyncID() }})
	if err != nil {
		t.Fatal(err)
	}
	px := hostProxies("a")
	tr.SetHandler(px[0], retrytest.Serve(retrytest.Data{}, 0))
	if err := c.ApplyRoute(testZone, px, seedConf); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadRetryTimeout(time.Second, time.Second)
	for i := 0; i < 50; i++ {
		if _, err := c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k"), AsyncID: uint64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	seen := map[uint64]bool{}
	timeout := time.After(10 * time.Second)
	for len(seen) < 50 {
		select {
		case id := <-got:
			seen[id] = true
		case <-timeout:
			t.Fatalf("driver delivered %d of 50", len(seen))
		}
	}
	_ = c.Close()
	_ = c.Close()
	if _, err := retry.New(retry.Config{Transport: tr, Poller: retry.PollHand + 1}); !errors.Is(err, retry.ErrInvalidConfig) {
		t.Fatalf("unknown Poller: %v", err)
	}
}
