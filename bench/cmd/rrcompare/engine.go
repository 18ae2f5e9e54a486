package main

import (
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"time"
)

// engineClient is readretry as rrsim runs it: retry.Client over
// transport/tcp (sim.NewEngine), Send from the generator, one poller
// goroutine draining RecvResponse into the checker and sleeping in
// sim.PollWait between rounds (SPEC R14's poll model).
type engineClient struct {
	c    *retry.Client
	tr   sim.EngineTransport
	sink *sink
	stop chan struct{}
	done chan struct{}
}

func newEngineClient(e *env) (client, error) {
	c, tr, err := sim.NewEngineFor(e.opt, e.fleet, true, 0, retry.PollHand)
	if err != nil {
		return nil, err
	}
	ec := &engineClient{c: c, tr: tr, sink: e.sink, stop: make(chan struct{}), done: make(chan struct{})}
	go ec.poll()
	return ec, nil
}

// newAdaptiveClient is newEngineClient with Config.Hedge at the p95 (SPEC
// R21): the first re-send at the zone's recent p95 first-answer latency
// when that is below x, but never before x/5 (Hedge.Min): on healthy
// proxies a p95 of a few milliseconds would re-send one read in twenty for
// nothing (issue 24's steady goal: under 1% extra attempts), while a slow
// tail's p95 (about x) is far above that floor.
func newAdaptiveClient(e *env) (client, error) {
	opt := e.opt
	opt.Hedge = retry.Hedge{Percentile: 0.95, Min: adaptiveMin(opt.SimpleBudget, opt.MaxRetries)}
	c, tr, err := sim.NewEngineFor(opt, e.fleet, true, 0, retry.PollHand)
	if err != nil {
		return nil, err
	}
	ec := &engineClient{c: c, tr: tr, sink: e.sink, stop: make(chan struct{}), done: make(chan struct{})}
	go ec.poll()
	return ec, nil
}

func (ec *engineClient) send(_ *sim.Op, req *retry.Request) (uint64, error) {
	return ec.c.Send(sim.Zone, req)
}

func (ec *engineClient) poll() {
	defer close(ec.done)
	var ans sim.Answer
	for {
		for {
			rsp, ok := ec.c.RecvResponse()
			if !ok {
				break
			}
			ans.SetResponse(rsp)
			ec.sink.deliver(&ans)
		}
		select {
		case <-ec.stop:
			return
		default:
		}
		sim.PollWait(ec.c, ec.tr)
	}
}

func (ec *engineClient) close() {
	close(ec.stop)
	<-ec.done
	_ = ec.c.Close()
	_ = ec.tr.Close()
}

// adaptiveMin is readretry-adaptive's Hedge.Min: a fifth of the first
// segment x of a simple read with the given budget and retries (SPEC R6).
func adaptiveMin(budget time.Duration, retries int) time.Duration {
	if d := retry.SimpleDeadlines(budget, retries); len(d) > 0 {
		return d[0] / 5
	}
	return 0
}
