package sim

import (
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// client is a raw wire client of one proxy.
type client struct {
	t  *testing.T
	nc net.Conn
	r  *wire.Reader
}

func dialProxy(t *testing.T, p *Proxy) *client {
	t.Helper()
	nc, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &client{t: t, nc: nc, r: wire.NewReader(nc, 0)}
}

func (c *client) send(frame []byte, err error) {
	c.t.Helper()
	if err != nil {
		c.t.Fatal(err)
	}
	out, _ := wire.AppendStreamFrame(nil, frame)
	if _, err := c.nc.Write(out); err != nil {
		c.t.Fatal(err)
	}
}

// recv reads packets until none comes for quiet, or the connection ends;
// it returns copies and the time each arrived after start.
func (c *client) recv(quiet time.Duration, start time.Time) (pkts []wire.Response, at []time.Duration, closed bool) {
	c.t.Helper()
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(quiet))
		f, err := c.r.Next()
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return pkts, at, false
			}
			return pkts, at, true
		}
		rsp, err := wire.ParseResponse(append([]byte(nil), f...))
		if err != nil {
			c.t.Fatalf("proxy sent a malformed frame: %v", err)
		}
		pkts = append(pkts, rsp)
		at = append(at, time.Since(start))
	}
}

func hdr(cmd wire.Command, seq uint64) wire.RequestHeader {
	return wire.RequestHeader{Command: cmd, Seq: seq, AsyncID: seq + 100, Table: "t"}
}

func startProxy(t *testing.T, p Profile) *Proxy {
	t.Helper()
	px, err := StartProxy(retry.Proxy{Host: "host-1", Port: 9000}, NewDataset(5), p, 1)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = px.Close() })
	return px
}

func TestProxyAnswers(t *testing.T) {
	px := startProxy(t, Profile{PacketRecords: 3})
	d := px.data
	c := dialProxy(t, px)

	c.send(wire.AppendKeyRequest(nil, hdr(wire.CmdGet, 1), []byte("k5")))
	pkts, _, _ := c.recv(200*time.Millisecond, time.Now())
	if len(pkts) != 1 || pkts[0].Seq() != 1 || pkts[0].AsyncID() != 101 || pkts[0].Result() != 0 || pkts[0].HaveMore() {
		t.Fatalf("GET: %d packets", len(pkts))
	}
	s := pkts[0].Scan()
	if !s.Next() || string(s.Key()) != "k5" || string(s.Value()) != string(d.AppendValue(nil, []byte("k5"))) {
		t.Fatalf("GET record %q=%q", s.Key(), s.Value())
	}

	c.send(wire.AppendKeyRequest(nil, hdr(wire.CmdListGet, 2), []byte("k100000")))
	pkts, _, _ = c.recv(200*time.Millisecond, time.Now())
	if len(pkts) != 1 || pkts[0].Result() != ResultNotFound || pkts[0].RecordCount() != 0 {
		t.Fatalf("absent key: %+v", pkts)
	}

	keys := [][]byte{[]byte("k1"), []byte("k200000"), []byte("k3"), []byte("k4"), []byte("k5"), []byte("k6"), []byte("k7")}
	c.send(wire.AppendBatchRequest(nil, hdr(wire.CmdBatchGet, 3), keys))
	pkts, _, _ = c.recv(200*time.Millisecond, time.Now())
	if len(pkts) != 3 || !pkts[0].HaveMore() || !pkts[1].HaveMore() || pkts[2].HaveMore() || pkts[2].Packet() != 2 {
		t.Fatalf("batch of 7 keys, 3 per packet: %d packets", len(pkts))
	}
	tag := uint64(0)
	for _, p := range pkts {
		s := p.Scan()
		for s.Next() {
			rec := s.Record()
			if rec.Tag != tag || string(rec.Key) != string(keys[tag]) {
				t.Fatalf("batch record %d: tag %d key %q", tag, rec.Tag, rec.Key)
			}
			if tag == 1 && (rec.Result != ResultNotFound || len(rec.Value) != 0) {
				t.Fatalf("absent batch key: result %d value %q", rec.Result, rec.Value)
			}
			tag++
		}
	}

	// An index read from position 2 with limit 5 of a stream long enough.
	part := []byte("p0")
	for n := uint64(0); d.StreamLen(part) < 8; n++ {
		part = d.AppendPartKey(nil, n)
	}
	c.send(wire.AppendIndexRequest(nil, hdr(wire.CmdGetByPartKey, 4), part, 2, 5))
	pkts, _, _ = c.recv(200*time.Millisecond, time.Now())
	if len(pkts) != 2 || pkts[0].Cursor() != 5 || pkts[1].Cursor() != 7 || pkts[1].HaveMore() {
		t.Fatalf("index read: %d packets", len(pkts))
	}
	pos := uint64(2)
	for _, p := range pkts {
		s := p.Scan()
		for s.Next() {
			if s.Tag() != pos || string(s.Value()) != string(d.AppendRecordValue(nil, part, pos)) {
				t.Fatalf("index record at %d: tag %d", pos, s.Tag())
			}
			pos++
		}
	}
	// Past the end: one empty last packet whose cursor is the position.
	c.send(wire.AppendIndexRequest(nil, hdr(wire.CmdListGetAll, 5), part, 500, 0))
	pkts, _, _ = c.recv(200*time.Millisecond, time.Now())
	if len(pkts) != 1 || pkts[0].RecordCount() != 0 || pkts[0].HaveMore() || pkts[0].Cursor() != 500 {
		t.Fatalf("index read past the end: %+v", pkts)
	}

	c.send(wire.AppendWriteRequest(nil, hdr(wire.CmdReplace, 6), []byte("k1"), []byte("v")))
	pkts, _, _ = c.recv(200*time.Millisecond, time.Now())
	if len(pkts) != 1 || pkts[0].Result() != 0 || pkts[0].Command() != wire.CmdReplace {
		t.Fatalf("write: %+v", pkts)
	}
	if st := px.Stats(); st.Requests != 6 || st.Packets != 9 || st.Connections != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestProxyFaults(t *testing.T) {
	keys := [][]byte{[]byte("k1"), []byte("k2"), []byte("k3"), []byte("k4"), []byte("k5")}
	batch := func() ([]byte, error) { return wire.AppendBatchRequest(nil, hdr(wire.CmdBatchGet, 9), keys) }
	get := func() ([]byte, error) { return wire.AppendKeyRequest(nil, hdr(wire.CmdGet, 8), []byte("k1")) }
	quiet := 150 * time.Millisecond

	t.Run("drop", func(t *testing.T) {
		px := startProxy(t, Profile{Drop: 1})
		c := dialProxy(t, px)
		c.send(get())
		if pkts, _, _ := c.recv(quiet, time.Now()); len(pkts) != 0 || px.Stats().Dropped != 1 {
			t.Fatalf("dark proxy answered %d packets", len(pkts))
		}
	})
	t.Run("error", func(t *testing.T) {
		px := startProxy(t, Profile{Error: 1})
		c := dialProxy(t, px)
		c.send(batch())
		pkts, _, _ := c.recv(quiet, time.Now())
		if len(pkts) != 1 || pkts[0].Result() != -7953 || pkts[0].HaveMore() {
			t.Fatalf("error answer: %+v", pkts)
		}
	})
	t.Run("latency", func(t *testing.T) {
		px := startProxy(t, Profile{Latency: Latency{P50: 40 * time.Millisecond}})
		c := dialProxy(t, px)
		start := time.Now()
		c.send(get())
		_, at, _ := c.recv(quiet, start)
		if len(at) != 1 || at[0] < 40*time.Millisecond {
			t.Fatalf("answer after %v, want >= 40ms", at)
		}
	})
	t.Run("cut", func(t *testing.T) {
		px := startProxy(t, Profile{PacketRecords: 2, Cut: 1, CutAfter: 1})
		c := dialProxy(t, px)
		c.send(batch())
		pkts, _, closed := c.recv(quiet, time.Now())
		if len(pkts) != 1 || !pkts[0].HaveMore() || closed || px.Stats().Cut != 1 {
			t.Fatalf("cut: %d packets, closed %v", len(pkts), closed)
		}
	})
	t.Run("stall", func(t *testing.T) {
		px := startProxy(t, Profile{PacketRecords: 2, Stall: 1, StallFor: 60 * time.Millisecond})
		c := dialProxy(t, px)
		start := time.Now()
		c.send(batch())
		pkts, at, _ := c.recv(quiet, start)
		if len(pkts) != 3 || at[1]-at[0] < 50*time.Millisecond {
			t.Fatalf("stall: %d packets at %v", len(pkts), at)
		}
		start = time.Now()
		c.send(get())
		if _, at, _ = c.recv(quiet, start); len(at) != 1 || at[0] < 60*time.Millisecond {
			t.Fatalf("stalled simple answer at %v", at)
		}
	})
	t.Run("dup", func(t *testing.T) {
		px := startProxy(t, Profile{PacketRecords: 2, Dup: 1})
		c := dialProxy(t, px)
		c.send(batch())
		pkts, _, _ := c.recv(quiet, time.Now())
		if len(pkts) != 6 || pkts[0].Packet() != 0 || pkts[1].Packet() != 0 || pkts[5].Packet() != 2 {
			t.Fatalf("dup: %d packets", len(pkts))
		}
	})
	t.Run("close", func(t *testing.T) {
		px := startProxy(t, Profile{PacketRecords: 2, Close: 1})
		c := dialProxy(t, px)
		c.send(batch())
		pkts, _, closed := c.recv(quiet, time.Now())
		if len(pkts) != 1 || !closed || px.Stats().Closed != 1 {
			t.Fatalf("close mid-stream: %d packets, closed %v", len(pkts), closed)
		}
		c = dialProxy(t, px)
		c.send(get())
		if pkts, _, closed = c.recv(quiet, time.Now()); len(pkts) != 0 || !closed {
			t.Fatalf("close before a simple answer: %d packets, closed %v", len(pkts), closed)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		px := startProxy(t, Profile{})
		c := dialProxy(t, px)
		c.send([]byte("not a frame"), nil)
		if _, _, closed := c.recv(quiet, time.Now()); !closed || px.Stats().Malformed != 1 {
			t.Fatal("malformed frame did not close the connection")
		}
	})
}

func TestProxyRefuseAndReturn(t *testing.T) {
	px := startProxy(t, Profile{})
	c := dialProxy(t, px)
	if err := px.SetProfile(Profile{Refuse: true}); err != nil {
		t.Fatal(err)
	}
	_ = c.nc.SetReadDeadline(time.Now().Add(time.Second))
	if _, err := c.r.Next(); err == nil {
		t.Fatal("connection survived Refuse")
	}
	if nc, err := net.Dial("tcp", px.Addr()); err == nil {
		_ = nc.Close()
		t.Fatal("refusing proxy accepted a connection")
	}
	if err := px.SetProfile(Profile{}); err != nil {
		t.Fatal(err)
	}
	c = dialProxy(t, px)
	c.send(wire.AppendKeyRequest(nil, hdr(wire.CmdGet, 1), []byte("k1")))
	if pkts, _, _ := c.recv(200*time.Millisecond, time.Now()); len(pkts) != 1 {
		t.Fatal("no answer after coming back on the same address")
	}
	if err := px.SetProfile(Profile{Drop: 3}); !errors.Is(err, ErrBadProfile) {
		t.Fatalf("invalid profile: %v", err)
	}
	if px.Profile() != (Profile{}) {
		t.Fatal("invalid profile changed the proxy")
	}
	_ = px.Close()
	_ = px.Close()
	if err := px.SetProfile(Profile{}); !errors.Is(err, ErrProxyClosed) {
		t.Fatalf("SetProfile after Close: %v", err)
	}
	// A proxy started refusing listens only when told otherwise.
	rp, err := StartProxy(retry.Proxy{Host: "h", Port: 1}, NewDataset(1), Profile{Refuse: true}, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rp.Close()
	if nc, err := net.Dial("tcp", rp.Addr()); err == nil {
		_ = nc.Close()
		t.Fatal("proxy started with Refuse accepted a connection")
	}
}

func TestFleet(t *testing.T) {
	if _, err := StartFleet(FleetConfig{Hosts: 0, Ports: 1}); !errors.Is(err, ErrBadFleet) {
		t.Fatalf("0 hosts: %v", err)
	}
	if _, err := StartFleet(FleetConfig{Hosts: 1, Ports: 1, Profile: Profile{Dup: 2}}); !errors.Is(err, ErrBadProfile) {
		t.Fatalf("bad profile: %v", err)
	}
	f, err := StartFleet(FleetConfig{Hosts: 3, Ports: 2, Seed: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	labels := f.Labels()
	if len(labels) != 6 || labels[0] != (retry.Proxy{Host: "host-1", Port: BasePort}) || labels[5] != (retry.Proxy{Host: "host-3", Port: BasePort + 1}) {
		t.Fatalf("labels %v", labels)
	}
	addr, err := f.Resolve(labels[3])
	if err != nil || addr != f.Proxy(1, 1).Addr() {
		t.Fatalf("Resolve: %q %v", addr, err)
	}
	if _, err := f.Resolve(retry.Proxy{Host: "host-9", Port: 1}); !errors.Is(err, ErrUnknownLabel) {
		t.Fatalf("Resolve unknown: %v", err)
	}
	if err := f.Set(HostSel(1), Profile{Drop: 1}); err != nil {
		t.Fatal(err)
	}
	for h := 0; h < 3; h++ {
		for j := 0; j < 2; j++ {
			if got := f.Proxy(h, j).Profile().Drop; got != map[bool]float64{true: 1, false: 0}[h == 1] {
				t.Fatalf("proxy %d/%d drop %v", h, j, got)
			}
		}
	}
	if err := f.Set(Selector{Host: 3, Port: 0}, Profile{}); !errors.Is(err, ErrBadFleet) {
		t.Fatalf("selector outside: %v", err)
	}
	if err := f.Set(All, Profile{Cut: -1}); !errors.Is(err, ErrBadProfile) {
		t.Fatalf("bad profile: %v", err)
	}
	if f.Proxy(3, 0) != nil || f.Hosts() != 3 || f.Ports() != 2 || f.Data() == nil {
		t.Fatal("fleet accessors")
	}
	if f.Stats().Connections != 0 {
		t.Fatal("connections before any client")
	}
	var _ io.Closer = f
}

// TestItemHeap: items come out by time, then by the order they were
// scheduled in.
func TestItemHeap(t *testing.T) {
	var h itemHeap
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 2000; i++ {
		h.push(item{at: int64(rng.IntN(50)), order: uint64(i)})
	}
	prev := item{at: -1}
	for len(h) > 0 {
		it := h.pop()
		if it.at < prev.at || (it.at == prev.at && it.order < prev.order) {
			t.Fatalf("%+v after %+v", it, prev)
		}
		prev = it
	}
}
