package resptest

import (
	"strconv"
)

// Data is the data set every replica is loaded with: Keys string keys and
// Lists lists, each derived from its number alone, so a test checks an
// answer against the model here and never against another answer.
//
// Key i (0 ≤ i < Keys) is "k:<i>" with value Value(i); keys from Keys on
// are missing. List j (0 ≤ j < Lists) is "l:<j>" with ListLen(j) elements,
// element p being Elem(j, p). The zero Data is empty.
type Data struct {
	Keys, Lists int
	// MaxListLen bounds ListLen; 0 means 300 (more than two LRANGE chunks
	// of the default size).
	MaxListLen int
}

// Key returns key i's name.
func (d Data) Key(i int) string { return "k:" + strconv.Itoa(i) }

// Value returns key i's value: a few dozen bytes that name the key, so a
// value delivered under the wrong key is caught.
func (d Data) Value(i int) string {
	return "v:" + strconv.Itoa(i) + ":" + strconv.FormatUint(mix(uint64(i)), 36)
}

// List returns list j's name.
func (d Data) List(j int) string { return "l:" + strconv.Itoa(j) }

// ListLen returns list j's length, in [0, MaxListLen]: some lists are
// empty, some end exactly on a chunk boundary; 0 for j ≥ Lists (no such
// list: LRANGE answers an empty array).
func (d Data) ListLen(j int) int {
	if j < 0 || j >= d.Lists {
		return 0
	}
	m := d.MaxListLen
	if m == 0 {
		m = 300
	}
	switch j % 5 {
	case 0:
		return 0
	case 1:
		return min(128, m)
	case 2:
		return min(256, m)
	}
	return int(mix(uint64(j)+1<<32) % uint64(m+1))
}

// Elem returns element p of list j.
func (d Data) Elem(j, p int) string {
	return "e:" + strconv.Itoa(j) + ":" + strconv.Itoa(p)
}

// mix is splitmix64's finaliser: a fixed, well-spread function of i.
func mix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// commands returns the data set as RESP-encoded SET and RPUSH commands,
// ready to pipeline into a server.
func (d Data) commands() (out []byte, n int) {
	for i := range d.Keys {
		out = AppendCommand(out, "SET", d.Key(i), d.Value(i))
		n++
	}
	for j := range d.Lists {
		l := d.ListLen(j)
		for p := 0; p < l; p += 100 {
			args := []string{"RPUSH", d.List(j)}
			for q := p; q < min(p+100, l); q++ {
				args = append(args, d.Elem(j, q))
			}
			out = AppendCommand(out, args...)
			n++
		}
	}
	return out, n
}

// AppendCommand appends one RESP command (an array of bulk strings) to
// out, for Server.Pipe.
func AppendCommand(out []byte, args ...string) []byte {
	out = append(out, '*')
	out = strconv.AppendInt(out, int64(len(args)), 10)
	out = append(out, "\r\n"...)
	for _, a := range args {
		out = append(out, '$')
		out = strconv.AppendInt(out, int64(len(a)), 10)
		out = append(out, "\r\n"...)
		out = append(out, a...)
		out = append(out, "\r\n"...)
	}
	return out
}
