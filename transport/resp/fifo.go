package resp

// fifo is a first-in first-out queue over one slice that is reused: popped
// items free their slots, and a push that finds the slice full moves the
// live items to the front before it grows. After warm-up it allocates
// nothing, which keeps the per-request path free of allocation.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) {
	if len(q.items) == cap(q.items) && q.head > 0 {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, v)
}

// front returns the oldest item; the queue must not be empty.
func (q *fifo[T]) front() *T { return &q.items[q.head] }

func (q *fifo[T]) pop() {
	var zero T
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
}

// byteQueue holds the key bytes of the commands in flight, in the order
// the commands were sent: a command's bytes are addressed by virtual
// positions that never change, so compaction (moving live bytes to the
// front) does not disturb them.
type byteQueue struct {
	buf  []byte
	base uint64 // virtual position of buf[0]
	head int    // bytes of buf already released
}

// reserve makes room for n more bytes without growing when released bytes
// can be reclaimed, and returns the virtual position the next append gets.
func (q *byteQueue) reserve(n int) uint64 {
	if len(q.buf)+n > cap(q.buf) && q.head > 0 {
		m := copy(q.buf, q.buf[q.head:])
		q.base += uint64(q.head)
		q.buf, q.head = q.buf[:m], 0
	}
	return q.base + uint64(len(q.buf))
}

// bytes returns the bytes at virtual positions [from, to).
func (q *byteQueue) bytes(from, to uint64) []byte {
	return q.buf[from-q.base : to-q.base]
}

// release frees every byte before virtual position to.
func (q *byteQueue) release(to uint64) {
	h := int(to - q.base)
	if h >= len(q.buf) {
		q.base += uint64(len(q.buf))
		q.buf, q.head = q.buf[:0], 0
		return
	}
	q.head = max(q.head, h)
}
