package call

import (
	"context"
	"testing"
)

// TestExtractEdge: Edge ignores the carrier whatever it holds.
func TestExtractEdge(t *testing.T) {
	for _, c := range []mapCarrier{
		{},
		{HeaderAttempt: "2", HeaderFlag: "x"},
		{HeaderAttempt: "1"},
		{HeaderAttempt: "junk", HeaderFlag: "y"},
	} {
		f, ok := FlagsFrom(Extract(context.Background(), c, Edge()))
		if !ok || f != (Flags{Entrance: true}) {
			t.Errorf("Extract(%v, Edge()) = %+v", c, f)
		}
		// A nil option is ignored: the carrier is read.
		g, _ := FlagsFrom(Extract(context.Background(), c, nil))
		h, _ := FlagsFrom(Extract(context.Background(), c))
		if g != h {
			t.Errorf("Extract(%v, nil) = %+v, want %+v", c, g, h)
		}
	}
}

// TestReceive: the server-side endpoint middleware puts the flags read from
// the request's metadata into the handler's context, and under Propagate on
// the client side the metadata carries what Receive needs.
func TestReceive(t *testing.T) {
	type req struct{ meta mapCarrier }
	carrier := func(_ context.Context, r *req) Carrier {
		if r.meta == nil {
			return nil
		}
		return r.meta
	}
	var got Flags
	var ok bool
	handler := func(ctx context.Context, _ *req) (string, error) {
		got, ok = FlagsFrom(ctx)
		return "done", nil
	}
	cases := []struct {
		meta mapCarrier
		opts []ServerOption
		want Flags
	}{
		{nil, nil, Flags{Entrance: true}},
		{mapCarrier{}, nil, Flags{Entrance: true}},
		{mapCarrier{HeaderAttempt: "1"}, nil, Flags{Attempt: 1}},
		{mapCarrier{HeaderAttempt: "3", HeaderFlag: "checkout"}, nil, Flags{Attempt: 3, Flag: "checkout"}},
		{mapCarrier{HeaderAttempt: "-1"}, nil, Flags{Attempt: 2}},
		{mapCarrier{HeaderAttempt: "3", HeaderFlag: "checkout"}, []ServerOption{Edge()}, Flags{Entrance: true}},
		{nil, []ServerOption{Edge()}, Flags{Entrance: true}},
	}
	for _, c := range cases {
		ep := Receive[*req, string](carrier, c.opts...)(handler)
		v, err := ep(context.Background(), &req{meta: c.meta})
		if v != "done" || err != nil || !ok || got != c.want {
			t.Errorf("meta %v, %d opts: %q %v, flags %+v (%v), want %+v", c.meta, len(c.opts), v, err, got, ok, c.want)
		}
	}

	// Client to server: Retry(Propagate(...)) on one side, Receive on the
	// other; the server's flags follow the attempts.
	var seen []Flags
	server := Receive[*req, string](carrier)(func(ctx context.Context, _ *req) (string, error) {
		f, _ := FlagsFrom(ctx)
		seen = append(seen, f)
		if len(seen) < 3 {
			return "", errNet
		}
		return "ok", nil
	})
	client := Chain(
		Retry[*req, string](fastPolicy(t)),
		Propagate[*req, string](carrier),
	)(func(ctx context.Context, r *req) (string, error) {
		// The wire: a fresh request whose metadata is what was injected.
		return server(context.Background(), &req{meta: mapCarrier{HeaderAttempt: r.meta[HeaderAttempt], HeaderFlag: r.meta[HeaderFlag]}})
	})
	ctx := WithRetryFlag(context.Background(), "checkout")
	if v, err := client(ctx, &req{meta: mapCarrier{}}); v != "ok" || err != nil {
		t.Fatalf("%q %v", v, err)
	}
	want := []Flags{{Attempt: 1, Flag: "checkout"}, {Attempt: 2, Flag: "checkout"}, {Attempt: 3, Flag: "checkout"}}
	if len(seen) != 3 || seen[0] != want[0] || seen[1] != want[1] || seen[2] != want[2] {
		t.Fatalf("server saw %+v, want %+v", seen, want)
	}
	// The server serving attempt 2 or 3 would not retry its own calls.
	if !seen[1].IsRetry() || seen[0].IsRetry() {
		t.Fatal("IsRetry wrong")
	}
}
