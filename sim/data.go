package sim

import (
	"math"
	"strconv"

	"github.com/cespare/xxhash/v2"
)

// ResultNotFound is the result code the simulated proxies give for a key
// the dataset does not hold: the header result of a simple read, or the
// record result of one key of a batch read. The real database's code is not
// public; this one is the simulator's own.
const ResultNotFound int32 = -1

// Dataset is the deterministic data every simulated proxy serves, so that
// every answer can be checked from the request alone: Keys keys "k0" …
// "k{Keys-1}", each with a value computed from the key, and Parts part keys
// "p0" … "p{Parts-1}", each with an ordered stream of records for index
// reads. The zero Dataset holds nothing; use NewDataset.
type Dataset struct {
	// Keys is the number of keys present; key numbers from Keys on are
	// absent (ResultNotFound).
	Keys uint64
	// Parts is the number of part keys.
	Parts uint64
	// MaxStream is the longest stream of a part key in records; stream
	// lengths run from 0 to MaxStream.
	MaxStream uint64
	// Seed changes every value, so that answers from another dataset (a
	// proxy of another run) cannot pass for right ones.
	Seed uint64
}

// NewDataset returns the dataset the scenarios use: 100,000 keys, 1,000
// part keys with streams of 0 to 60 records.
func NewDataset(seed uint64) *Dataset {
	return &Dataset{Keys: 100_000, Parts: 1_000, MaxStream: 60, Seed: seed}
}

// AppendKey appends the key of key number n ("k" + n) to dst.
func (d *Dataset) AppendKey(dst []byte, n uint64) []byte {
	return strconv.AppendUint(append(dst, 'k'), n, 10)
}

// AppendPartKey appends the part key of part number n ("p" + n) to dst.
func (d *Dataset) AppendPartKey(dst []byte, n uint64) []byte {
	return strconv.AppendUint(append(dst, 'p'), n, 10)
}

// Has reports whether key is present. Keys are checked by their bytes, so
// a proxy needs no table: "k" followed by a decimal number below Keys, with
// no leading zero.
func (d *Dataset) Has(key []byte) bool {
	n, ok := parseNumbered(key, 'k')
	return ok && n < d.Keys
}

// StreamLen returns the number of records in partKey's stream, 0 for an
// unknown part key.
func (d *Dataset) StreamLen(partKey []byte) uint64 {
	n, ok := parseNumbered(partKey, 'p')
	if !ok || n >= d.Parts || d.MaxStream == 0 {
		return 0
	}
	return d.mix(n, 0x5a5a) % (d.MaxStream + 1)
}

// AppendValue appends key's value to dst: "v:" + key + ":" then hex digits
// of a hash of the seed and the key, 8 to 64 of them, so values differ in
// length as well as content.
func (d *Dataset) AppendValue(dst, key []byte) []byte {
	h := xxhash.Sum64(key) ^ d.Seed
	dst = append(append(append(dst, 'v', ':'), key...), ':')
	return appendHexRun(dst, h, 8+int(h%57))
}

// AppendRecordKey appends the key of record pos of partKey's stream
// (partKey + "/" + pos) to dst.
func (d *Dataset) AppendRecordKey(dst, partKey []byte, pos uint64) []byte {
	return strconv.AppendUint(append(append(dst, partKey...), '/'), pos, 10)
}

// AppendRecordValue appends the value of record pos of partKey's stream to
// dst: "r:" + pos + ":" and 16 hex digits of a hash of the seed, the part
// key and the position.
func (d *Dataset) AppendRecordValue(dst, partKey []byte, pos uint64) []byte {
	h := xxhash.Sum64(partKey) ^ d.Seed
	dst = strconv.AppendUint(append(dst, 'r', ':'), pos, 10)
	return appendHexRun(append(dst, ':'), splitmix(h+pos), 16)
}

func (d *Dataset) mix(n, salt uint64) uint64 { return splitmix(d.Seed ^ salt ^ n*0x9e3779b97f4a7c15) }

// parseNumbered parses prefix followed by a canonical decimal uint64.
func parseNumbered(b []byte, prefix byte) (uint64, bool) {
	if len(b) < 2 || len(b) > 21 || b[0] != prefix || (b[1] == '0' && len(b) > 2) {
		return 0, false
	}
	var n uint64
	for _, c := range b[1:] {
		if c < '0' || c > '9' {
			return 0, false
		}
		if n > (math.MaxUint64-uint64(c-'0'))/10 {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

const hexDigits = "0123456789abcdef"

// appendHexRun appends n hex digits drawn from h and its successors.
func appendHexRun(dst []byte, h uint64, n int) []byte {
	for i := 0; i < n; i++ {
		if i%16 == 0 && i > 0 {
			h = splitmix(h)
		}
		dst = append(dst, hexDigits[(h>>(4*(i%16)))&15])
	}
	return dst
}

// splitmix is SplitMix64's finaliser: a fast, well-mixed hash of x.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}
