package retry_test

// Proxy choice (SPEC R13).

import (
	"testing"

	"github.com/readretry/readretry/retry"
	"github.com/readretry/readretry/wire"
)

// TestR13ManyRefusingProxies: a send that fails moves on to the next proxy
// however many refuse, as long as one is healthy.
func TestR13ManyRefusingProxies(t *testing.T) {
	var px []retry.Proxy
	for i := 0; i < 20; i++ {
		px = append(px, retry.Proxy{Host: "h" + string(rune('a'+i)), Port: 1})
	}
	f := newFixture(t, px, seedConf)
	for _, p := range px[:17] {
		f.tr.SetRefusing(p, true)
	}
	for i := 0; i < 20; i++ {
		if _, err := f.c.Send(testZone, &retry.Request{Command: wire.CmdGet, Key: []byte("k")}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	for _, s := range f.tr.Sent() {
		for _, bad := range px[:17] {
			if s.Proxy == bad {
				t.Fatalf("sent to refusing proxy %v", bad)
			}
		}
	}
	f.drained()
}
