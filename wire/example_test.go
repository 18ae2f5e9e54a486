package wire_test

import (
	"fmt"

	"github.com/readretry/readretry/wire"
)

// A batch read is packed, two of its keys are answered, and the re-send asks
// only for the third, under its original index (SPEC R11).
func Example() {
	h := wire.RequestHeader{Command: wire.CmdBatchGet, Seq: 1001, AsyncID: 55, AppID: 2, ZoneID: 3, Table: "players"}
	orig, err := wire.AppendBatchRequest(nil, h, [][]byte{[]byte("alice"), []byte("bob"), []byte("carol")})
	if err != nil {
		panic(err)
	}

	// A proxy answers keys 0 and 2 in one packet.
	var rb wire.ResponseBuilder
	rb.Start(nil, wire.ResponseHeader{Command: wire.CmdBatchGet, Seq: 1001, AsyncID: 55})
	_ = rb.AddRecord(0, 0, []byte("alice"), []byte("level 9"))
	_ = rb.AddRecord(2, 0, []byte("carol"), []byte("level 3"))
	rsp, err := wire.ParseResponse(rb.Frame())
	if err != nil {
		panic(err)
	}
	answered := make(wire.Bitset, wire.BitsetLen(3))
	s := rsp.Scan()
	for s.Next() {
		answered.Set(uint32(s.Tag()))
		fmt.Printf("key %d %s: %s\n", s.Tag(), s.Key(), s.Value())
	}

	resend, n, err := wire.AppendPartialBatch(nil, orig, answered, 1)
	if err != nil {
		panic(err)
	}
	req, _ := wire.ParseRequest(resend)
	fmt.Println("re-send: seq", req.Seq(), "attempt", req.Attempt(), "keys", n)
	for it := req.Keys(); ; {
		idx, key, ok := it.Next()
		if !ok {
			break
		}
		fmt.Printf("  index %d %s\n", idx, key)
	}
	// Output:
	// key 0 alice: level 9
	// key 2 carol: level 3
	// re-send: seq 1001 attempt 1 keys 1
	//   index 1 bob
}
