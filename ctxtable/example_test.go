package ctxtable_test

import (
	"errors"
	"fmt"

	"github.com/readretry/readretry/ctxtable"
)

// readCtx is an engine's fixed-size context: no pointers, so the table can
// keep it where the garbage collector never looks.
type readCtx struct {
	Command   uint16
	Retries   uint8
	Tried     [9]uint16 // proxy ids tried so far
	NTried    uint8
	FirstSend int64 // unix nanoseconds
	AsyncID   uint64
	Answered  uint32 // keys answered so far (complex reads)
}

func Example() {
	tab, err := ctxtable.New[readCtx](ctxtable.Config{Shards: 4})
	if err != nil {
		panic(err)
	}

	// A sender stores the context of read 41 before sending it: the packed
	// frame and the caller's user buffer are copied, plus 1 zeroed byte of
	// scratch for a bitset of the batch's 3 answered keys.
	frame, userBuf := []byte("\x17GET k1 k2 k3"), []byte("user-41")
	meta := readCtx{Command: 23, Tried: [9]uint16{7}, NTried: 1, AsyncID: 9001}
	if _, err := tab.Insert(41, meta, frame, userBuf, 1); err != nil {
		panic(err)
	}
	if _, err := tab.Insert(42, readCtx{Command: 7}, []byte("\x07GET k9"), nil, 0); err != nil {
		panic(err)
	}
	// A retry of read 42 under the same sequence number changes nothing.
	_, err = tab.Insert(42, readCtx{Command: 7}, nil, nil, 0)
	fmt.Println("second insert of 42:", errors.Is(err, ctxtable.ErrExists))

	// The poller finds the context when a packet for 41 arrives and
	// updates it in place.
	r, ok := tab.Lookup(41)
	if !ok {
		panic("lost")
	}
	m := r.Meta()
	m.Retries++
	m.Tried[m.NTried] = 12
	m.NTried++
	r.Scratch()[0] |= 1 << 1 // key #1 answered
	fmt.Printf("seq %d async %d retries %d tried %v frame %q user %q scratch %08b\n",
		r.Seq(), m.AsyncID, m.Retries, m.Tried[:m.NTried], r.Frame()[1:], r.UserBuf(), r.Scratch()[0])

	// The final answer releases the context; its buffers go back to the
	// slabs, for the next insert to reuse.
	fmt.Println("deleted:", tab.Delete(41), "len:", tab.Len())
	_, err = tab.Insert(43, readCtx{Command: 7}, nil, nil, 0)
	fmt.Println("insert after delete:", err)
	// Output:
	// second insert of 42: true
	// seq 41 async 9001 retries 1 tried [7 12] frame "GET k1 k2 k3" user "user-41" scratch 00000010
	// deleted: true len: 1
	// insert after delete: <nil>
}
