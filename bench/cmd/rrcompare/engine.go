package main

import (
	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
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
// when that is below x.
func newAdaptiveClient(e *env) (client, error) {
	opt := e.opt
	opt.Hedge = retry.Hedge{Percentile: 0.95}
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
