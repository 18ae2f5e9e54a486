package main

import (
	"context"
	"fmt"
	"os/exec"
	"runtime"
	"sync"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/wire"
)

// client is one read-retry design under comparison. The harness calls send
// from its open-loop generator goroutine; the client hands every answer
// to the sink, from any goroutine.
type client interface {
	// send issues one request and returns at once (open loop) with the
	// sequence number its answers carry, or an error: then no answer may
	// come. req and the memory it points to are valid only during the call.
	send(op *sim.Op, req *retry.Request) (seq uint64, err error)
	// close stops the client and waits for its goroutines.
	close()
}

// kind is a row of the comparison: a client and how to make it.
type kind struct {
	name  string
	about string
	make  func(e *env) (client, error)
}

// kinds are the clients in table order.
var kinds = []kind{
	{"readretry", "the engine over transport/tcp, polled as rrsim polls it", newEngineClient},
	{"readretry-do", "the same engine through Client.Do: a goroutine per request blocked in Do, the client polling itself (PollSelf)", newDoClient},
	{"readretry-adaptive", "the engine as readretry, with the adaptive first re-send at the zone's p95 first-answer latency, not before x/5 (Config.Hedge)", newAdaptiveClient},
	{"goroutines", "hand-written: goroutine per request, time.Timer per attempt, mutex map, reader goroutine per connection; same k·x schedule and proxy choice", newGoroutinesClient},
	{"failsafe-go", "failsafe-go hedgepolicy (delay x, n hedges) inside a timeout of the budget, over the same demultiplexing TCP client", newFailsafeClient},
	{"grpc-hedging", "grpc-go with a service config hedgingPolicy (maxAttempts n+1, hedgingDelay x), gRPC fronts on the proxies", newGRPCHedgingClient},
	{"grpc-failsafe", "grpc-go with failsafe-go's hedging interceptor (failsafegrpc), gRPC fronts on the proxies", newGRPCFailsafeClient},
}

// env is what a client is made from.
type env struct {
	opt     sim.Options // budgets, retries, wait timeout (defaults filled in)
	labels  []retry.Proxy
	addrs   []string         // the sim proxies, as labels
	fronts  []string         // the gRPC fronts beside them, as labels
	fleet   sim.FleetControl // a *sim.RemoteFleet, or a *sim.RedisFleet (-backend redis)
	sink    *sink
	retries int
}

// sink serialises answers into the Checker.
type sink struct {
	mu    sync.Mutex
	ck    *sim.Checker
	start time.Time
}

func (s *sink) deliver(a *sim.Answer) {
	s.mu.Lock()
	s.ck.Check(a, time.Since(s.start))
	s.mu.Unlock()
}

// request is one request as a blocking client's goroutine owns it: packed
// as a first attempt with sequence number 0, and the user buffer.
type request struct {
	id      uint64
	cmd     wire.Command
	frame   []byte
	ub      []byte
	read    bool
	complex bool
}

func newRequest(op *sim.Op, req *retry.Request) *request {
	return &request{
		id: op.ID, cmd: op.Command,
		frame:   sim.AppendRequestFrame(nil, req, 0),
		ub:      append([]byte(nil), req.UserBuffer...),
		read:    op.Command.IsRead(),
		complex: op.Command.Body() == wire.BodyBatch || op.Command.Body() == wire.BodyIndex,
	}
}

// answerBase fills the fields every final answer of r has.
func (r *request) answerBase(ans *sim.Answer, attempts int) {
	ans.AsyncID, ans.Seq, ans.Command, ans.UserBuffer = r.id, r.id, r.cmd, r.ub
	ans.HaveMore, ans.Attempts = false, attempts
	ans.Records, ans.RecordCount = ans.Records[:0], 0
}

// caller is a blocking client: call returns when r has its final result,
// written to ans (whose Records may point into memory call keeps alive).
type caller interface {
	call(ctx context.Context, r *request, ans *sim.Answer)
	close()
}

// blocking runs a caller as its users do: one goroutine per request,
// blocked in call until the final result.
type blocking struct {
	c      caller
	sink   *sink
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newBlocking(c caller, s *sink) *blocking {
	ctx, cancel := context.WithCancel(context.Background())
	return &blocking{c: c, sink: s, ctx: ctx, cancel: cancel}
}

func (b *blocking) send(op *sim.Op, req *retry.Request) (uint64, error) {
	r := newRequest(op, req)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		var ans sim.Answer
		b.c.call(b.ctx, r, &ans)
		b.sink.deliver(&ans)
	}()
	return r.id, nil
}

func (b *blocking) close() {
	b.cancel()
	b.wg.Wait()
	b.c.close()
}

// row is one client's result on one scenario (JSON keys stable).
type row struct {
	Client            string  `json:"client"`
	Scenario          string  `json:"scenario"`
	Rate              int     `json:"rate"`       // requests per second offered
	Seconds           float64 `json:"duration_s"` // of the sending phase
	Requests          uint64  `json:"requests"`
	Reads             uint64  `json:"reads"`
	ReadsOK           uint64  `json:"reads_ok"`
	ReadsOKPct        float64 `json:"reads_ok_pct"`
	ReadRetryTimeouts uint64  `json:"gave_up"`      // reads that ended with -19219 (the budget ran out)
	OtherErrors       uint64  `json:"other_errors"` // any other error result
	ExtraAttemptsPct  float64 `json:"extra_attempts_pct"`
	P50Ms             float64 `json:"p50_ms"`
	P99Ms             float64 `json:"p99_ms"`
	P999Ms            float64 `json:"p999_ms"`
	MaxMs             float64 `json:"max_ms"`
	// CPUNsPerRequest is this process's CPU time from the first request to
	// the last final result, per request: the client's own (the proxies
	// run in a child process), plus the generator and checker every row
	// shares.
	CPUNsPerRequest float64 `json:"cpu_ns_per_request"`
	// System calls on the client's side of its connections, over the same
	// span (issue 28), for the clients that count them (IOCounted: the
	// engine's transport/tcp and the demultiplexing TCP client; not
	// grpc-go): write and read calls per request, frames per call, and
	// the unbatched floor, one write per frame sent plus one read per
	// frame received, per request. A read call that finds no bytes parks
	// in the poller and reads again once woken: two system calls, counted
	// once. CtxSwitchesPerRequest is the process's context switches
	// (getrusage) per request: the threads that slept and were woken.
	IOCounted             bool    `json:"io_counted"`
	WritesPerRequest      float64 `json:"writes_per_request"`
	ReadsPerRequest       float64 `json:"reads_per_request"`
	FramesPerWrite        float64 `json:"frames_per_write"`
	FramesPerRead         float64 `json:"frames_per_read"`
	UnbatchedFloor        float64 `json:"unbatched_calls_per_request"`
	CtxSwitchesPerRequest float64 `json:"ctx_switches_per_request"`
	// In-flight cost (the inflight scenario; 0 elsewhere): heap objects
	// plus goroutine stacks the process grew by with Inflight requests in
	// flight, after a full collection, per request in flight.
	HeapBytesPerInflight  float64 `json:"heap_bytes_per_inflight"`
	StackBytesPerInflight float64 `json:"stack_bytes_per_inflight"`
	Inflight              int64   `json:"inflight"`
	GoroutinesPerInflight float64 `json:"goroutines_per_inflight"`
	GCFullMs              float64 `json:"gc_full_ms"` // one forced full collection with them in flight, wall time
	// GC pauses over the whole run (stop-the-world, all collections).
	GCPauses          uint64   `json:"gc_pauses"`
	GCPauseP99Ms      float64  `json:"gc_pause_p99_ms"`
	RecordsMissing    uint64   `json:"records_missing"`
	RecordsDuplicated uint64   `json:"records_duplicated"`
	MaxStallMs        float64  `json:"max_stall_ms"` // the generator's longest lateness
	Violations        []string `json:"violations"`

	latencies []time.Duration
}

// inflightScenario is the cost run: every proxy silent, requests piled up
// and measured once all are out.
const inflightScenario = "inflight"

// runOne runs scenario sc with client k against a fresh fleet in a child
// process and returns its row.
func runOne(ctx context.Context, sc sim.Scenario, opt sim.Options, k kind, child func() *exec.Cmd) (row, error) {
	rw := row{Client: k.name, Scenario: sc.Name, Rate: opt.Rate, Seconds: opt.Duration.Seconds()}
	fleet, w, fronts, err := startBackend(sc, opt, child)
	if err != nil {
		return rw, err
	}
	defer fleet.Close()
	events := sc.Events
	for len(events) > 0 && events[0].At == 0 {
		if err := fleet.Set(events[0].Select, events[0].Profile); err != nil {
			return rw, err
		}
		events = events[1:]
	}
	limit := int(opt.Duration.Seconds()*float64(opt.Rate)) + 1
	ck := sim.NewChecker(w, limit, opt.MaxRetries)
	ck.SetPartKeyRecords(opt.Backend == sim.BackendRedis) // LRANGE records carry the list's key
	e := &env{opt: opt, labels: fleet.Labels(), fleet: fleet, sink: &sink{ck: ck}, fronts: fronts, retries: opt.MaxRetries}
	for _, l := range e.labels {
		a, _ := fleet.Resolve(l)
		e.addrs = append(e.addrs, a)
	}
	c, err := k.make(e)
	if err != nil {
		return rw, err
	}
	closed := false
	defer func() {
		if !closed {
			c.close()
		}
	}()

	// Two collections: what the previous client left in sync.Pools (its
	// victim caches) is freed only by the second, and would otherwise be
	// freed during this client's run and counted against it (a negative
	// figure for the client measured after readretry-do).
	runtime.GC()
	runtime.GC()
	base := sim.ReadUsage()
	baseIO, baseCsw := clientCounts(c), contextSwitches()
	start := time.Now()
	e.sink.start = start
	sendDone := make(chan time.Duration, 1)
	go func() {
		var op sim.Op
		var req retry.Request
		var bufs sim.RequestBuffers
		sendDone <- sim.OpenLoop(ctx, start, opt.Rate, opt.Duration, uint64(limit), func(id uint64) {
			w.Op(id, &op)
			w.Request(&op, &req, &bufs)
			ck.Begin(id, time.Since(start))
			seq, err := c.send(&op, &req)
			if err != nil {
				ck.Refused(id)
				return
			}
			ck.Sent(id, seq)
		})
	}()
	eventTimer := time.NewTimer(time.Hour)
	defer eventTimer.Stop()
	var drainBy time.Time
	for drainBy.IsZero() || !ck.Settled() {
		next := time.Hour
		if len(events) > 0 {
			next = time.Until(start.Add(time.Duration(events[0].At * float64(opt.Duration))))
		}
		if !drainBy.IsZero() {
			if time.Now().After(drainBy) {
				break
			}
			next = min(next, 5*time.Millisecond)
		}
		eventTimer.Reset(max(next, 0))
		select {
		case <-eventTimer.C:
			if len(events) > 0 && time.Since(start) >= time.Duration(events[0].At*float64(opt.Duration)) {
				if err := fleet.Set(events[0].Select, events[0].Profile); err != nil {
					return rw, err
				}
				events = events[1:]
			}
		case stall := <-sendDone:
			rw.MaxStallMs = msOf(stall)
			drainBy = time.Now().Add(opt.WaitTimeout + opt.ComplexBudget + 2*time.Second)
			if sc.Name == inflightScenario {
				measureInflight(&rw, ck, base)
			}
		case <-ctx.Done():
			return rw, ctx.Err()
		}
	}
	end := sim.ReadUsage()
	endIO, endCsw := clientCounts(c), contextSwitches()
	c.close()
	closed = true

	rep := ck.Finish()
	rw.Requests, rw.Reads, rw.ReadsOK, rw.ReadsOKPct = rep.Requests, rep.Reads, rep.ReadsOK, rep.ReadsOKPct()
	rw.ReadRetryTimeouts, rw.OtherErrors = rep.ReadRetryTimeouts, rep.WaitTimeouts+rep.OtherErrors
	rw.ExtraAttemptsPct = rep.ExtraAttemptsPct
	rw.P50Ms, rw.P99Ms, rw.P999Ms, rw.MaxMs = rep.P50Ms, rep.P99Ms, rep.P999Ms, rep.MaxMs
	rw.RecordsMissing, rw.RecordsDuplicated = rep.RecordsMissing, rep.RecordsDuplicated
	rw.Violations, rw.latencies = rep.Violations, rep.Latencies
	if rw.Violations == nil {
		rw.Violations = []string{}
	}
	if rep.Requests > 0 {
		n := float64(rep.Requests)
		rw.CPUNsPerRequest = float64((end.CPU - base.CPU).Nanoseconds()) / n
		rw.CtxSwitchesPerRequest = float64(endCsw-baseCsw) / n
		if countsIO(c) {
			io := endIO.sub(baseIO)
			rw.IOCounted = true
			rw.WritesPerRequest, rw.ReadsPerRequest = float64(io.writes)/n, float64(io.reads)/n
			rw.FramesPerWrite = float64(io.framesSent) / float64(max(io.writes, 1))
			rw.FramesPerRead = float64(io.framesRecv) / float64(max(io.reads, 1))
			rw.UnbatchedFloor = float64(io.framesSent+io.framesRecv) / n
		}
	}
	n, p99 := end.GCPausesSince(base)
	rw.GCPauses, rw.GCPauseP99Ms = n, msOf(p99)
	return rw, nil
}

// startBackend starts what the clients meet: a fresh fleet of simulated
// proxies in a child process (with gRPC fronts, listed in fronts), or
// -backend redis's real redis-server replicas loaded with the Redis data
// set; and the workload over its data.
func startBackend(sc sim.Scenario, opt sim.Options, child func() *exec.Cmd) (sim.FleetControl, *sim.Workload, []string, error) {
	if opt.Backend == sim.BackendRedis {
		data := sim.RedisDataset(opt.Seed)
		w, err := sim.NewWorkload(data, opt.Seed, sim.RedisMix)
		if err != nil {
			return nil, nil, nil, err
		}
		fleet, err := sim.StartRedisFleet(opt.Hosts, data)
		if err != nil {
			return nil, nil, nil, err
		}
		if err := fleet.Set(sim.All, sc.Base); err != nil {
			_ = fleet.Close()
			return nil, nil, nil, err
		}
		return fleet, w, nil, nil
	}
	w, err := sim.NewWorkload(sim.NewDataset(opt.Seed), opt.Seed, nil)
	if err != nil {
		return nil, nil, nil, err
	}
	fleet, err := sim.StartRemoteFleet(child(), sim.FleetConfig{Hosts: opt.Hosts, Ports: opt.Ports, Profile: sc.Base, Seed: opt.Seed})
	if err != nil {
		return nil, nil, nil, err
	}
	return fleet, w, fleet.Extra(), nil
}

// measureInflight takes the in-flight figures once every request is out:
// a full collection (timed), then heap and stacks against the baseline,
// per request not yet answered.
func measureInflight(rw *row, ck *sim.Checker, base sim.Usage) {
	// The collection marks what is live when it starts: count the
	// requests in flight then (a slow collection sees some end meanwhile,
	// their memory still counted until the next one).
	inflight := int64(ck.Issued()) - int64(ck.Finals())
	t := time.Now()
	runtime.GC()
	rw.GCFullMs = msOf(time.Since(t))
	u := sim.ReadUsage()
	rw.Inflight = inflight
	if inflight <= 0 {
		return
	}
	heap := float64(u.HeapObjects) - float64(base.HeapObjects)
	stacks := float64(u.Stacks) - float64(base.Stacks)
	rw.HeapBytesPerInflight = (heap + stacks) / float64(inflight)
	rw.StackBytesPerInflight = stacks / float64(inflight)
	rw.GoroutinesPerInflight = (float64(u.Goroutines) - float64(base.Goroutines)) / float64(inflight)
}

func msOf(d time.Duration) float64 { return float64(d.Microseconds()) / 1e3 }

// describe is the table's one-line description of a run's settings.
func describe(opt sim.Options) string {
	return fmt.Sprintf("%d hosts x %d ports, budgets %v/%v, %d retries, wait %v", opt.Hosts, opt.Ports,
		opt.SimpleBudget, opt.ComplexBudget, opt.MaxRetries, opt.WaitTimeout)
}
