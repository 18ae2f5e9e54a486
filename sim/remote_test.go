package sim

import (
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// serveFleetEnv makes the test binary a RemoteFleet child (see TestMain).
const serveFleetEnv = "SIM_TEST_SERVE_FLEET"

// testHook reports each proxy's real port as its extra string, so that the
// test sees the hook's output arrive in Labels order.
func testHook(f *Fleet) ([]string, func(), error) {
	var out []string
	for h := 0; h < f.Hosts(); h++ {
		for j := 0; j < f.Ports(); j++ {
			_, port, _ := net.SplitHostPort(f.Proxy(h, j).Addr())
			out = append(out, port)
		}
	}
	return out, func() {}, nil
}

func childCmd(t *testing.T) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), serveFleetEnv+"=1")
	cmd.Stderr = os.Stderr
	return cmd
}

// TestRemoteFleet starts proxies in a child process, asks one of them for a
// key over TCP, turns host 1 dark from the parent and sees the request go
// unanswered, and checks the counters and the hook's output.
func TestRemoteFleet(t *testing.T) {
	f, err := StartRemoteFleet(childCmd(t), FleetConfig{Hosts: 2, Ports: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	labels := f.Labels()
	if len(labels) != 4 || labels[0] != (retry.Proxy{Host: "host-1", Port: BasePort}) || labels[3] != (retry.Proxy{Host: "host-2", Port: BasePort + 1}) {
		t.Fatalf("labels %v", labels)
	}
	extra := f.Extra()
	for i, l := range labels {
		addr, err := f.Resolve(l)
		if err != nil {
			t.Fatal(err)
		}
		if _, port, _ := net.SplitHostPort(addr); len(extra) != 4 || extra[i] != port {
			t.Fatalf("extra %v, proxy %d at %s", extra, i, addr)
		}
	}
	if _, err := f.Resolve(retry.Proxy{Host: "nope", Port: 1}); !errors.Is(err, ErrUnknownLabel) {
		t.Fatalf("unknown label: %v", err)
	}
	addr, _ := f.Resolve(labels[0])
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	r := wire.NewReader(nc, 0)
	data := NewDataset(7)
	ask := func(seq uint64) (wire.Response, error) {
		frame, err := wire.AppendKeyRequest(nil, wire.RequestHeader{Command: wire.CmdGet, Seq: seq, AsyncID: seq, Table: "players"}, data.AppendKey(nil, 5))
		if err != nil {
			t.Fatal(err)
		}
		sf, _ := wire.AppendStreamFrame(nil, frame)
		if _, err := nc.Write(sf); err != nil {
			t.Fatal(err)
		}
		_ = nc.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		b, err := r.Next()
		if err != nil {
			return wire.Response{}, err
		}
		return wire.ParseResponse(b)
	}
	rsp, err := ask(1)
	if err != nil {
		t.Fatal(err)
	}
	it := rsp.Records()
	rec, _ := it.Next()
	if want := data.AppendValue(nil, data.AppendKey(nil, 5)); rsp.Seq() != 1 || string(rec.Value) != string(want) {
		t.Fatalf("answer seq %d value %q, want %q", rsp.Seq(), rec.Value, want)
	}
	if err := f.Set(HostSel(0), Profile{Drop: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := ask(2); err == nil {
		t.Fatal("a dark proxy answered")
	}
	st, err := f.Stats()
	if err != nil || st.Requests != 2 || st.Dropped != 1 {
		t.Fatalf("stats %+v, %v; want 2 requests, 1 dropped", st, err)
	}
	if err := f.Set(HostSel(5), Profile{}); !errors.Is(err, ErrRemoteFleet) {
		t.Fatalf("selector outside the fleet: %v", err)
	}
	if err := f.Set(All, Profile{Drop: 2}); !errors.Is(err, ErrBadProfile) {
		t.Fatalf("bad profile: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := f.Set(All, Profile{}); !errors.Is(err, ErrRemoteFleet) {
		t.Fatalf("after close: %v", err)
	}
}

// TestCapacitySmall runs a capacity scenario scaled down (2,000 reads/s
// for 1 s, answers after 400 ms) with the proxies in a child process, and
// checks that every figure the capacity report promises is filled in and
// that every read was answered right.
func TestCapacitySmall(t *testing.T) {
	exe, err := os.Executable()
	if err != nil {
		t.Skip(err)
	}
	sc := Scenario{Name: "capacity-small", Expect: expectCapacity, Load: &Load{
		Rate: 2000, Duration: time.Second, Latency: 400 * time.Millisecond,
		SimpleBudget: 4 * time.Second, ComplexBudget: 4 * time.Second,
	}}
	reps, err := Run(context.Background(), sc, Options{FleetProcess: func() *exec.Cmd {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), serveFleetEnv+"=1")
		cmd.Stderr = os.Stderr
		return cmd
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(reps) != 1 || !reps[0].Retry {
		t.Fatalf("want one retry-on report, got %d", len(reps))
	}
	r := reps[0]
	if !r.Passed() || r.Writes != 0 || r.ReadsOK != r.Reads || r.Reads < 1900 {
		t.Fatalf("reads %d ok %d writes %d violations %v", r.Reads, r.ReadsOK, r.Writes, r.Violations)
	}
	// 2,000/s × 0.4 s: about 800 contexts at the plateau.
	if r.ContextsGoal != 800 || r.PeakContexts < 600 || r.HeapContexts < 400 {
		t.Errorf("contexts: goal %d peak %d measured at %d", r.ContextsGoal, r.PeakContexts, r.HeapContexts)
	}
	if !r.ProxiesRemote || r.Offered != 2000 || r.RateReached < 1000 || r.R15BytesPerContext < R15OverheadBytes ||
		r.HeapBytesPerContext <= 0 || r.GCPauses == 0 || r.CPUNsPerRead <= 0 {
		t.Errorf("capacity figures missing: %+v", r)
	}
	names := map[string]bool{}
	for _, tg := range Targets(reps) {
		names[tg.Name] = true
	}
	for _, want := range []string{"capacity-small contexts", "capacity-small heap per context", "capacity-small GC pause p99", "capacity-small poller kept up"} {
		if !names[want] {
			t.Errorf("no target %q in %v", want, names)
		}
	}
}
