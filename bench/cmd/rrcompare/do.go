package main

import (
	"context"
	"errors"
	"sync"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/sim"
	"github.com/readretry/readretry/transport/tcp"
)

// doClient is readretry's blocking front door (Client.Do, SPEC R20) used as
// a Go developer would: a goroutine per request blocked in Do, the engine's
// own poller (a PollSelf client's driver, waking on transport/tcp's Wait)
// behind them, each answer's records collected into a reusable retry.Result. The
// engine, schedule and proxy choice are readretry's; only the way the
// caller waits differs from the readretry row.
type doClient struct {
	c    *retry.Client
	tr   *tcp.Transport
	sink *sink
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup
	pool sync.Pool // *doCall
}

// doCall is one request's goroutine state, reused across requests.
type doCall struct {
	req  retry.Request
	keys [][]byte
	buf  []byte // backing bytes of req's key(s), value and user buffer
	res  retry.Result
	ans  sim.Answer
}

func newDoClient(e *env) (client, error) {
	c, tr, err := sim.NewEngine(e.opt, e.fleet, true, 0, retry.PollSelf)
	if err != nil {
		return nil, err
	}
	ctx, stop := context.WithCancel(context.Background())
	return &doClient{c: c, tr: tr, sink: e.sink, ctx: ctx, stop: stop,
		pool: sync.Pool{New: func() any { return new(doCall) }}}, nil
}

// send copies req (valid only during the call) and runs Do on a goroutine
// of its own; the answer carries op.ID as its sequence number, as the other
// blocking clients' do.
func (d *doClient) send(op *sim.Op, req *retry.Request) (uint64, error) {
	call := d.pool.Get().(*doCall)
	call.copyRequest(req)
	id := op.ID // op and req are the generator's, reused after this call
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		err := d.c.Do(d.ctx, sim.Zone, &call.req, &call.res)
		a := &call.ans
		a.AsyncID, a.Seq, a.Command, a.UserBuffer = id, id, call.req.Command, call.req.UserBuffer
		a.HaveMore, a.Attempts = false, call.res.Attempts()
		a.Result = call.res.Code()
		if err != nil && a.Result == retry.ResultOK {
			a.Result = codeOf(err) // refused before sending, or the run ended
		}
		a.Records = a.Records[:0]
		for i := range call.res.Len() {
			a.Records = append(a.Records, call.res.Record(i))
		}
		a.RecordCount = len(a.Records)
		d.sink.deliver(a)
		d.pool.Put(call)
	}()
	return id, nil
}

// copyRequest makes call.req a deep copy of req in the call's own buffers.
func (call *doCall) copyRequest(req *retry.Request) {
	call.buf = call.buf[:0]
	keep := func(b []byte) []byte {
		if b == nil {
			return nil
		}
		off := len(call.buf)
		call.buf = append(call.buf, b...)
		return call.buf[off:len(call.buf):len(call.buf)]
	}
	n := len(req.Key) + len(req.Value) + len(req.UserBuffer)
	for _, k := range req.Keys {
		n += len(k)
	}
	if cap(call.buf) < n {
		call.buf = make([]byte, 0, n)
	}
	call.req = *req
	call.req.Key, call.req.Value, call.req.UserBuffer = keep(req.Key), keep(req.Value), keep(req.UserBuffer)
	call.keys = call.keys[:0]
	for _, k := range req.Keys {
		call.keys = append(call.keys, keep(k))
	}
	if req.Keys != nil {
		call.req.Keys = call.keys
	}
}

// codeOf returns the result code an error from Do carries, or -1.
func codeOf(err error) int32 {
	var e *retry.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return -1
}

func (d *doClient) close() {
	d.stop()
	d.wg.Wait()
	_ = d.c.Close()
	_ = d.tr.Close()
}
