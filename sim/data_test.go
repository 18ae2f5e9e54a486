package sim

import (
	"bytes"
	"errors"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

func TestDatasetKeys(t *testing.T) {
	d := NewDataset(3)
	for _, c := range []struct {
		key  string
		want bool
	}{
		{"k0", true}, {"k99999", true}, {"k100000", false}, {"k", false}, {"k01", false}, {"x1", false},
		{"k-1", false}, {"k18446744073709551615", false}, {"k18446744073709551616", false}, {"", false},
	} {
		if got := d.Has([]byte(c.key)); got != c.want {
			t.Errorf("Has(%q) = %v, want %v", c.key, got, c.want)
		}
	}
	if got := string(d.AppendKey([]byte("x"), 42)); got != "xk42" {
		t.Fatalf("AppendKey: %q", got)
	}
	if got := string(d.AppendPartKey(nil, 7)); got != "p7" {
		t.Fatalf("AppendPartKey: %q", got)
	}
}

func TestDatasetValues(t *testing.T) {
	d, other := NewDataset(3), NewDataset(4)
	seen := map[string]bool{}
	for n := uint64(0); n < 2000; n++ {
		k := d.AppendKey(nil, n)
		v := d.AppendValue(nil, k)
		if !bytes.Equal(v, d.AppendValue(nil, k)) {
			t.Fatal("value not deterministic")
		}
		if bytes.Equal(v, other.AppendValue(nil, k)) {
			t.Fatalf("key %s: same value under another seed", k)
		}
		if !bytes.HasPrefix(v, append(append([]byte("v:"), k...), ':')) || len(v) < len(k)+3+8 || len(v) > len(k)+3+64 {
			t.Fatalf("value %q of %q", v, k)
		}
		if seen[string(v)] {
			t.Fatalf("value %q repeats", v)
		}
		seen[string(v)] = true
	}
}

func TestDatasetStreams(t *testing.T) {
	d := NewDataset(3)
	var lens []uint64
	for n := uint64(0); n < d.Parts; n++ {
		l := d.StreamLen(d.AppendPartKey(nil, n))
		if l > d.MaxStream {
			t.Fatalf("stream %d: %d records, max %d", n, l, d.MaxStream)
		}
		lens = append(lens, l)
	}
	if slices.Min(lens) != 0 || slices.Max(lens) != d.MaxStream {
		t.Fatalf("stream lengths span %d..%d, want 0..%d", slices.Min(lens), slices.Max(lens), d.MaxStream)
	}
	if d.StreamLen([]byte("p1000")) != 0 || d.StreamLen([]byte("k1")) != 0 {
		t.Fatal("unknown part key has a stream")
	}
	a := d.AppendRecordValue(nil, []byte("p1"), 5)
	if bytes.Equal(a, d.AppendRecordValue(nil, []byte("p1"), 6)) || bytes.Equal(a, d.AppendRecordValue(nil, []byte("p2"), 5)) {
		t.Fatal("record values collide")
	}
	if got := string(d.AppendRecordKey(nil, []byte("p1"), 5)); got != "p1/5" {
		t.Fatalf("record key %q", got)
	}
}

func TestLatencySample(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	fixed := Latency{P50: 3 * time.Millisecond}
	if fixed.Sample(rng) != 3*time.Millisecond || fixed.Quantile(0.99) != 3*time.Millisecond {
		t.Fatal("fixed latency varies")
	}
	if (Latency{}).Sample(rng) != 0 {
		t.Fatal("zero latency not 0")
	}
	l := Latency{P50: time.Millisecond, P99: 100 * time.Millisecond}
	const n = 200_000
	s := make([]time.Duration, n)
	for i := range s {
		s[i] = l.Sample(rng)
	}
	slices.Sort(s)
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, time.Millisecond}, {0.99, 100 * time.Millisecond}} {
		got := s[int(c.q*n)]
		if r := float64(got) / float64(c.want); r < 0.9 || r > 1.1 {
			t.Errorf("q%.2f: sampled %v, want about %v", c.q, got, c.want)
		}
		if r := float64(l.Quantile(c.q)) / float64(c.want); math.Abs(r-1) > 1e-6 {
			t.Errorf("Quantile(%.2f) = %v, want %v", c.q, l.Quantile(c.q), c.want)
		}
	}
	huge := Latency{P50: time.Second, P99: time.Minute}
	for i := 0; i < 1000; i++ {
		if d := huge.Sample(rng); d > maxLatency || d < 0 {
			t.Fatalf("sample %v outside [0, %v]", d, maxLatency)
		}
	}
}

func TestParseProfile(t *testing.T) {
	for _, c := range []struct {
		in   string
		want Profile
	}{
		{"", Profile{}},
		{"healthy", Profile{}},
		{"latency=2ms", Profile{Latency: Latency{P50: 2 * time.Millisecond}}},
		{"latency=1ms/250ms, drop=0.5", Profile{Latency: Latency{P50: time.Millisecond, P99: 250 * time.Millisecond}, Drop: 0.5}},
		{"dark", Profile{Drop: 1}},
		{"refuse", Profile{Refuse: true}},
		{"error=0.05,code=-7953", Profile{Error: 0.05, ErrorCode: -7953}},
		{"packet=4,cut=0.2@2,stall=0.05@400ms,dup=0.01,close=0.002", Profile{PacketRecords: 4, Cut: 0.2, CutAfter: 2,
			Stall: 0.05, StallFor: 400 * time.Millisecond, Dup: 0.01, Close: 0.002}},
		{"cut=1", Profile{Cut: 1}},
	} {
		got, err := ParseProfile(c.in)
		if err != nil {
			t.Fatalf("%q: %v", c.in, err)
		}
		if got != c.want {
			t.Errorf("%q: %+v, want %+v", c.in, got, c.want)
		}
		again, err := ParseProfile(got.String())
		if err != nil || again != got {
			t.Errorf("%q: String %q parses to %+v, %v", c.in, got.String(), again, err)
		}
	}
	for _, in := range []string{"drop", "drop=2", "drop=-0.1", "drop=NaN", "latency=5ms/1ms", "latency=-1ms", "latency=2h",
		"code=0", "code=x", "packet=-1", "packet=70000", "stall=0.1", "stall=0.1@x", "cut=0.1@-2", "dark=1", "refuse=yes",
		"bogus=1", "healthy=1", ",", "drop=0.1,,"} {
		if p, err := ParseProfile(in); !errors.Is(err, ErrBadProfile) {
			t.Errorf("%q: %+v, %v; want ErrBadProfile", in, p, err)
		}
	}
}

func TestProfileValidate(t *testing.T) {
	for _, p := range []Profile{
		{Drop: 1.5}, {Error: -1}, {Cut: math.NaN()}, {Latency: Latency{P50: -1}}, {StallFor: -1},
		{Latency: Latency{P50: 2, P99: 1}}, {PacketRecords: -1}, {CutAfter: 1 << 20}, {Latency: Latency{P50: 2 * time.Minute}},
	} {
		if err := p.Validate(); !errors.Is(err, ErrBadProfile) {
			t.Errorf("%+v: %v", p, err)
		}
	}
}

// FuzzParseProfile: any text gives a valid profile or ErrBadProfile, never
// a panic; a parsed profile renders to text that parses back to it.
func FuzzParseProfile(f *testing.F) {
	for _, s := range []string{"", "healthy", "dark", "latency=1ms/250ms,drop=0.02", "cut=0.2@2,stall=0.05@400ms",
		"error=1,code=-7953,packet=1", "refuse,dup=0.5,close=1e-3", "latency=0s/1ns"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProfile(s)
		if err != nil {
			if !errors.Is(err, ErrBadProfile) {
				t.Fatalf("%q: error %v does not wrap ErrBadProfile", s, err)
			}
			return
		}
		if err := p.Validate(); err != nil {
			t.Fatalf("%q parsed to an invalid profile: %v", s, err)
		}
		again, err := ParseProfile(p.String())
		if err != nil || again != p {
			t.Fatalf("%q: %+v renders as %q, which parses to %+v, %v", s, p, p.String(), again, err)
		}
	})
}

func TestWorkload(t *testing.T) {
	d := NewDataset(1)
	w, err := NewWorkload(d, 9, nil)
	if err != nil {
		t.Fatal(err)
	}
	counts := map[wire.Command]int{}
	var a, b Op
	var absent int
	for id := uint64(1); id <= 20000; id++ {
		w.Op(id, &a)
		w.Op(id, &b)
		if a != b {
			t.Fatalf("op %d not deterministic", id)
		}
		counts[a.Command]++
		switch a.Command.Body() {
		case wire.BodyBatch:
			if a.NKeys < 1 || a.NKeys > MaxBatchKeys {
				t.Fatalf("batch of %d keys", a.NKeys)
			}
		case wire.BodyIndex:
			if a.Key >= d.Parts || a.Limit > 20 {
				t.Fatalf("index op %+v", a)
			}
		case wire.BodyKey:
			if a.Key >= d.Keys {
				absent++
			}
		}
	}
	for _, m := range DefaultMix {
		got := float64(counts[m.Command]) / 20000 * 100
		if math.Abs(got-float64(m.Weight)) > 1.5 {
			t.Errorf("%v: %.1f%%, want about %d%%", m.Command, got, m.Weight)
		}
	}
	if absent == 0 {
		t.Error("no absent keys in simple reads")
	}
	if _, err := NewWorkload(d, 1, []Weight{{wire.Command(999), 1}}); !errors.Is(err, ErrBadMix) {
		t.Errorf("unknown command: %v", err)
	}
	if _, err := NewWorkload(d, 1, []Weight{{wire.CmdGet, 0}}); !errors.Is(err, ErrBadMix) {
		t.Errorf("no weight: %v", err)
	}
}

// TestWorkloadRequest: built requests pack and parse back to the op.
func TestWorkloadRequest(t *testing.T) {
	d := NewDataset(1)
	w, _ := NewWorkload(d, 9, nil)
	var op Op
	var bufs RequestBuffers
	for id := uint64(1); id <= 500; id++ {
		w.Op(id, &op)
		var req struct{ r retry.Request }
		w.Request(&op, &req.r, &bufs)
		if req.r.AsyncID != id || req.r.Command != op.Command || !bytes.Equal(req.r.UserBuffer, AppendUserBuffer(nil, id)) {
			t.Fatalf("request %d: %+v", id, req.r)
		}
		switch op.Command.Body() {
		case wire.BodyBatch:
			if len(req.r.Keys) != op.NKeys || string(req.r.Keys[0]) != string(d.AppendKey(nil, op.Keys[0])) {
				t.Fatalf("batch %d: %q", id, req.r.Keys)
			}
		case wire.BodyIndex:
			if string(req.r.Key) != string(d.AppendPartKey(nil, op.Key)) || req.r.Position != op.Position || req.r.Limit != op.Limit {
				t.Fatalf("index %d: %+v", id, req.r)
			}
		case wire.BodyKeyValue:
			if op.Command != wire.CmdDelete && !bytes.Equal(req.r.Value, d.AppendValue(nil, req.r.Key)) {
				t.Fatalf("write %d: %+v", id, req.r)
			}
		}
		if w.Records(&op) > 0 && op.Command.Body() == wire.BodyKeyValue {
			t.Fatalf("write %d expects records", id)
		}
	}
	if a, b := AppendUserBuffer(nil, 1), AppendUserBuffer(nil, 2); bytes.Equal(a, b) || len(a) < 16 {
		t.Fatal("user buffers collide")
	}
}
