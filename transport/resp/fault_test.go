package resp_test

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/transport/resp"
	"github.com/readretry/readretry/transport/resp/resptest"
)

// Budgets of the fault tests: with two retries a simple read re-sends
// after 83 ms and 250 ms and ends at 500 ms; a complex read waits 167,
// 333, then 500 ms between packets (SPEC R6, R10). Room enough that a
// test process not run for a moment on a loaded machine still re-sends
// before its reads' budgets end.
const (
	faultSimple  = 500 * time.Millisecond
	faultComplex = time.Second
)

// mixResult counts what a mix of reads saw.
type mixResult struct {
	ok, failed atomic.Int64
	firstErr   atomic.Value
}

func (m *mixResult) fail(err error) {
	m.failed.Add(1)
	m.firstErr.CompareAndSwap(nil, err)
}

// runMix runs n reads on workers goroutines — GETs (some of missing keys),
// 40-key batches (MGET chunks of 16) and list reads (LRANGE chunks of 50)
// — and checks every answer against the data set: each key's value or
// not-found, every batch index exactly once, every list position once and
// in order. during, if not nil, runs beside the reads (a fault); the mix
// waits for it.
func runMix(t *testing.T, c *retry.Client, d resptest.Data, n, workers int, during func()) *mixResult {
	t.Helper()
	var m mixResult
	var next atomic.Int64
	var wg sync.WaitGroup
	if during != nil {
		wg.Add(1)
		go func() { defer wg.Done(); during() }()
	}
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var res retry.Result
			for {
				k := int(next.Add(1)) - 1
				if k >= n {
					return
				}
				var err error
				switch k % 4 {
				case 0, 1: // GET, one in eleven of a missing key
					i := (k * 7919) % (d.Keys + d.Keys/10)
					if err = do(c, getReq(d, i), &res, 10*time.Second); err == nil || isCode(err, resp.ResultNotFound) {
						err = checkGet(d, i, &res)
					}
				case 2:
					idx := make([]int, 40)
					for j := range idx {
						idx[j] = (k*31 + j*13) % (d.Keys + 20)
					}
					if err = do(c, batchReq(d, idx), &res, 10*time.Second); err == nil {
						err = checkBatch(d, idx, &res)
					}
				case 3:
					j := k % d.Lists
					if err = do(c, rangeReq(d, j, 0, 0), &res, 10*time.Second); err == nil {
						err = checkRange(d, j, 0, 0, &res)
					}
				}
				if err != nil {
					m.fail(fmt.Errorf("request %d: %w", k, err))
					continue
				}
				m.ok.Add(1)
			}
		}()
	}
	wg.Wait()
	return &m
}

// requireAllOK fails the test unless every read of the mix succeeded.
func requireAllOK(t *testing.T, what string, m *mixResult, n int) {
	t.Helper()
	if m.failed.Load() != 0 || m.ok.Load() != int64(n) {
		t.Fatalf("%s: %d ok, %d failed of %d; first: %v", what, m.ok.Load(), m.failed.Load(), n, m.firstErr.Load())
	}
}

var faultCfg = resp.Config{BatchChunk: 16, RangeChunk: 50}

// Faults a replica has, made with the server's own means, one replica of
// three at a time: every read still ends with its full, correct answer,
// exactly once, because the engine re-sends to the other two. Each step:
// the fault, applied during a mix of reads, and the counter that shows the
// fault was really met.
func TestReplicaFaults(t *testing.T) {
	steps := []struct {
		name string
		// fault runs beside the reads against server s; it returns when
		// the fault is over (or leaves it for cleanup).
		fault func(t *testing.T, s *resptest.Server)
		// met reports whether the transport saw the fault.
		met func(s resp.Stats) bool
	}{
		{"dark host: SIGSTOP", func(t *testing.T, s *resptest.Server) {
			if err := s.Freeze(); err != nil {
				t.Error(err)
			}
		}, nil},
		{"flapping: SIGSTOP 150 ms, SIGCONT 50 ms, eight times", func(t *testing.T, s *resptest.Server) {
			for range 8 {
				_ = s.Freeze()
				time.Sleep(150 * time.Millisecond)
				_ = s.Thaw()
				time.Sleep(50 * time.Millisecond)
			}
		}, nil},
		{"slow: DEBUG SLEEP 0.5 s, twice", func(t *testing.T, s *resptest.Server) {
			for range 2 {
				if err := <-s.Sleep(500 * time.Millisecond); err != nil {
					t.Error(err)
				}
			}
		}, nil},
		{"stall: CLIENT PAUSE 600 ms", func(t *testing.T, s *resptest.Server) {
			if err := s.Pause(600 * time.Millisecond); err != nil {
				t.Error(err)
			}
			time.Sleep(600 * time.Millisecond)
		}, nil},
		{"killed: SIGKILL, refused", func(t *testing.T, s *resptest.Server) {
			s.Kill()
		}, func(s resp.Stats) bool { return s.Conn.Disconnects > 0 }},
		{"busy: a script past busy-reply-threshold", func(t *testing.T, s *resptest.Server) {
			s.StartBusy()
			time.Sleep(400 * time.Millisecond)
			if err := s.EndBusy(); err != nil {
				t.Error(err)
			}
		}, func(s resp.Stats) bool { return s.ReplicaTransient > 0 }},
		{"masterdown: replica of a dead master, stale data off", func(t *testing.T, s *resptest.Server) {
			if err := s.MasterDown(); err != nil {
				t.Error(err)
			}
			time.Sleep(400 * time.Millisecond)
			if err := s.MasterUp(); err != nil {
				t.Error(err)
			}
		}, func(s resp.Stats) bool { return s.ReplicaTransient > 0 }},
		{"loading: DEBUG RELOAD at 1 ms a key", func(t *testing.T, s *resptest.Server) {
			done, err := s.Reload(time.Millisecond)
			if err != nil {
				t.Error(err)
				return
			}
			if err := <-done; err != nil {
				t.Error(err)
			}
		}, func(s resp.Stats) bool { return s.ReplicaTransient > 0 }},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			r := ownReplicas(t, 3)
			c, tr := setup(t, r, faultCfg, faultSimple, faultComplex)
			const n = 600
			// Warm: every replica connected and answering.
			requireAllOK(t, "before", runMix(t, c, r.Data, 60, 6, nil), 60)
			m := runMix(t, c, r.Data, n, 6, func() { st.fault(t, r.Servers[0]) })
			requireAllOK(t, "during", m, n)
			s := tr.Stats()
			if st.met != nil && !st.met(s) {
				t.Errorf("the fault was not met: %+v", s)
			}
			if s.ProtocolErrors != 0 || s.ReplicaErrors != 0 {
				t.Errorf("protocol or replica errors: %+v", s)
			}
			zs, _ := c.Stats(zone)
			t.Logf("retries timeout %d code %d, duplicates %d, transient %d", zs.RetriesTimeout, zs.RetriesErrorCode, zs.DuplicatesDropped, s.ReplicaTransient)
			_ = r.Servers[0].Thaw()
		})
	}
}

// A killed replica comes back: the transport redials it with backoff, and
// reads reach it again (its server counts the commands).
func TestKilledReplicaReturns(t *testing.T) {
	r := ownReplicas(t, 2)
	c, tr := setup(t, r, faultCfg, faultSimple, faultComplex)
	requireAllOK(t, "before", runMix(t, c, r.Data, 40, 4, nil), 40)
	s0 := r.Servers[0]
	s0.Kill()
	requireAllOK(t, "one killed", runMix(t, c, r.Data, 200, 4, nil), 200)
	connects := tr.Stats().Conn.Connects // the killed replica's redials fail until it is back
	if err := s0.Restart(); err != nil { // its data comes back from the snapshot Load saved
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); tr.Stats().Conn.Connects == connects; {
		if time.Now().After(deadline) {
			t.Fatalf("the restarted replica was not redialled: %+v", tr.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	before, err := s0.Do("INFO", "stats")
	if err != nil {
		t.Fatal(err)
	}
	// The killed replica is suspect (SPEC R13 round 3): first sends skip it
	// and a probe reaches it once per probe interval, so it serves reads
	// again within a few intervals, not at once. Every read is checked
	// meanwhile.
	served := false
	for deadline := time.Now().Add(10 * time.Second); !served && time.Now().Before(deadline); {
		requireAllOK(t, "restarted", runMix(t, c, r.Data, 400, 4, nil), 400)
		after, err := s0.Do("INFO", "stats")
		if err != nil {
			t.Fatal(err)
		}
		served = processed(after)-processed(before) > 1 // beyond the INFO itself
		before = after
	}
	if !served {
		t.Errorf("the restarted replica served no read within 10 s: %+v", tr.Stats())
	}
}

// processed reads total_commands_processed from INFO stats.
func processed(info string) int {
	var n int
	for _, f := range splitFields(info) {
		if _, err := fmt.Sscanf(f, "total_commands_processed:%d", &n); err == nil {
			return n
		}
	}
	return -1
}

func splitFields(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' || s[i] == '\r' || s[i] == ' ' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// A replica whose connection dies in the middle of MGET and LRANGE answer
// streams (a loopback proxy cuts it after a few hundred bytes of replies):
// the engine re-sends only the keys not answered and resumes lists from
// the first position not accepted, on the other replica, and every batch
// and list still arrives exactly once, in order (SPEC R11) — whether the
// re-send waits for the request's timer or, with AnswerLost, goes out at
// once.
func TestStreamCut(t *testing.T) {
	for _, answerLost := range []bool{false, true} {
		t.Run(fmt.Sprintf("AnswerLost=%v", answerLost), func(t *testing.T) {
			r := ownReplicas(t, 2)
			cut, err := resptest.NewCutProxy(r.Servers[0].Addr, 700)
			if err != nil {
				t.Fatal(err)
			}
			defer cut.Close()
			cfg := faultCfg
			cfg.AnswerLost = answerLost
			c, tr := setupAddrs(t, []string{cut.Addr(), r.Servers[1].Addr}, cfg, faultSimple, faultComplex)
			d := r.Data
			var res retry.Result
			for k := range 40 {
				var err error
				if k%2 == 0 {
					idx := make([]int, 60)
					for j := range idx {
						idx[j] = (k*17 + j) % d.Keys
					}
					if err = do(c, batchReq(d, idx), &res, 10*time.Second); err == nil {
						err = checkBatch(d, idx, &res)
					}
				} else {
					j := 2 + 5*(k%8) // lists of 256 elements
					if err = do(c, rangeReq(d, j, 0, 0), &res, 10*time.Second); err == nil {
						err = checkRange(d, j, 0, 0, &res)
					}
				}
				if err != nil {
					t.Fatalf("request %d: %v", k, err)
				}
			}
			zs, _ := c.Stats(zone)
			s := tr.Stats()
			if cut.Cuts() == 0 || zs.RecordsResent == 0 {
				t.Errorf("no stream was cut and resumed: %d cuts, %d records re-sent", cut.Cuts(), zs.RecordsResent)
			}
			if lost := s.LostAnswers > 0; lost != answerLost || answerLost != (zs.RetriesErrorCode > 0) {
				t.Errorf("AnswerLost %v: %d lost answers, %d error-code retries, %d timeout retries",
					answerLost, s.LostAnswers, zs.RetriesErrorCode, zs.RetriesTimeout)
			}
			t.Logf("cuts %d, records re-sent %d, retries timeout %d code %d", cut.Cuts(), zs.RecordsResent, zs.RetriesTimeout, zs.RetriesErrorCode)
		})
	}
}
