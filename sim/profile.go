package sim

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	"github.com/readretry/readretry/retry"
)

// Latency is a proxy's answer-time distribution: fixed at P50 when P99 is
// not above it, otherwise lognormal with the given median and 99th
// percentile (a long tail grows as P99/P50 grows). The zero Latency answers
// at once.
type Latency struct {
	P50, P99 time.Duration // median and 99th percentile of the answer time
}

// z99 is the standard normal's 99th percentile.
const z99 = 2.3263478740408408

// maxLatency caps every sample, so that a lognormal tail cannot hold an
// answer back for hours.
const maxLatency = time.Minute

// Sample draws one answer time from rng.
func (l Latency) Sample(rng *rand.Rand) time.Duration {
	if l.P99 <= l.P50 || l.P50 <= 0 {
		return max(l.P50, 0)
	}
	sigma := math.Log(float64(l.P99)/float64(l.P50)) / z99
	d := float64(l.P50) * math.Exp(sigma*rng.NormFloat64())
	if !(d < float64(maxLatency)) {
		return maxLatency
	}
	return time.Duration(d)
}

// Quantile returns the distribution's q-quantile (0 < q < 1), for reports
// and tests.
func (l Latency) Quantile(q float64) time.Duration {
	if l.P99 <= l.P50 || l.P50 <= 0 {
		return max(l.P50, 0)
	}
	sigma := math.Log(float64(l.P99)/float64(l.P50)) / z99
	return time.Duration(float64(l.P50) * math.Exp(sigma*normQuantile(q)))
}

// normQuantile is the standard normal quantile.
func normQuantile(p float64) float64 {
	if p <= 0 {
		return math.Inf(-1)
	}
	if p >= 1 {
		return math.Inf(1)
	}
	return math.Sqrt2 * math.Erfinv(2*p-1)
}

// Profile is a proxy's fault profile: how long it takes to answer and what
// goes wrong, each fault drawn independently per request with its
// probability (0 = never, 1 = always). The zero Profile is a healthy proxy
// that answers at once with DefaultPacketRecords records per packet.
// Profiles are values; a proxy's can be replaced at any time (Proxy.SetProfile).
type Profile struct {
	// Latency is the time from a request's arrival to its answer.
	Latency Latency
	// Drop: the request is silently dropped (no answer ever). Drop 1 is a
	// black hole: connected, and dark.
	Drop float64
	// Error: the answer is ErrorCode with no records.
	Error float64
	// ErrorCode is the code of Error answers; 0 means -7953
	// (PROXY_ERR_SWIFT_TIMEOUT, the default retry code of SPEC R5).
	ErrorCode int32
	// PacketRecords is the records per packet of a complex answer (batch
	// and index reads); 0 means DefaultPacketRecords.
	PacketRecords int
	// Cut: a multi-packet answer stops, silently, after CutAfter packets
	// (0 means 1); answers that fit in CutAfter packets are whole.
	Cut      float64
	CutAfter int // packets sent before the cut
	// Stall: the answer stalls for StallFor: a simple answer comes that
	// much later; a multi-packet answer sends its first packet on time and
	// the rest that much later.
	Stall    float64
	StallFor time.Duration // how long a stalled answer waits
	// Dup: each packet is sent twice (a buggy proxy or a replaying
	// middlebox), the copy right after the original.
	Dup float64
	// Close: the connection is closed in the middle of the answer: after
	// the first packet of a multi-packet answer, instead of a simple one.
	// Every other answer pending on that connection is lost with it.
	Close float64
	// Refuse: the proxy stops listening, closes its connections, and
	// refuses new ones until a profile without Refuse is set.
	Refuse bool
}

// DefaultPacketRecords is Profile.PacketRecords' default.
const DefaultPacketRecords = 8

// Errors of ParseProfile.
var ErrBadProfile = errors.New("sim: bad profile")

func (p Profile) errorCode() int32 {
	if p.ErrorCode == 0 {
		return retry.ResultProxySwiftTimeout
	}
	return p.ErrorCode
}

func (p Profile) packetRecords() int {
	if p.PacketRecords <= 0 {
		return DefaultPacketRecords
	}
	return p.PacketRecords
}

func (p Profile) cutAfter() int { return max(p.CutAfter, 1) }

// Validate reports the first field out of range, wrapping ErrBadProfile:
// a probability outside [0, 1], a negative duration or count, a P50 above
// P99 with P99 set.
func (p Profile) Validate() error {
	for _, f := range []struct {
		name string
		v    float64
	}{{"drop", p.Drop}, {"error", p.Error}, {"cut", p.Cut}, {"stall", p.Stall}, {"dup", p.Dup}, {"close", p.Close}} {
		if !(f.v >= 0 && f.v <= 1) {
			return fmt.Errorf("%w: %s=%v is not a probability in [0, 1]", ErrBadProfile, f.name, f.v)
		}
	}
	if p.Latency.P50 < 0 || p.Latency.P99 < 0 || p.StallFor < 0 {
		return fmt.Errorf("%w: negative duration", ErrBadProfile)
	}
	if p.Latency.P50 > maxLatency || p.Latency.P99 > maxLatency || p.StallFor > maxLatency {
		return fmt.Errorf("%w: duration above %v", ErrBadProfile, maxLatency)
	}
	if p.Latency.P99 != 0 && p.Latency.P99 < p.Latency.P50 {
		return fmt.Errorf("%w: latency p99 %v below p50 %v", ErrBadProfile, p.Latency.P99, p.Latency.P50)
	}
	if p.PacketRecords < 0 || p.PacketRecords > maxPacketRecords || p.CutAfter < 0 || p.CutAfter > maxPacketRecords {
		return fmt.Errorf("%w: packet or cut count out of 0..%d", ErrBadProfile, maxPacketRecords)
	}
	return nil
}

const maxPacketRecords = 1 << 16

// String renders p in ParseProfile's syntax, leaving out zero fields;
// ParseProfile(p.String()) returns p for every valid p (up to float
// formatting, which is exact with 'g' and -1 precision).
func (p Profile) String() string {
	var parts []string
	add := func(s string) { parts = append(parts, s) }
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	switch {
	case p.Latency.P99 != 0:
		add("latency=" + p.Latency.P50.String() + "/" + p.Latency.P99.String())
	case p.Latency.P50 != 0:
		add("latency=" + p.Latency.P50.String())
	}
	if p.Drop != 0 {
		add("drop=" + f(p.Drop))
	}
	if p.Error != 0 {
		add("error=" + f(p.Error))
	}
	if p.ErrorCode != 0 {
		add("code=" + strconv.Itoa(int(p.ErrorCode)))
	}
	if p.PacketRecords != 0 {
		add("packet=" + strconv.Itoa(p.PacketRecords))
	}
	if p.Cut != 0 || p.CutAfter != 0 {
		add("cut=" + f(p.Cut) + "@" + strconv.Itoa(p.CutAfter))
	}
	if p.Stall != 0 || p.StallFor != 0 {
		add("stall=" + f(p.Stall) + "@" + p.StallFor.String())
	}
	if p.Dup != 0 {
		add("dup=" + f(p.Dup))
	}
	if p.Close != 0 {
		add("close=" + f(p.Close))
	}
	if p.Refuse {
		add("refuse")
	}
	if len(parts) == 0 {
		return "healthy"
	}
	return strings.Join(parts, ",")
}

// ParseProfile parses a profile from its text form, as rrsim's -profile
// flag takes it: comma-separated items, each one of
//
//	healthy              (no item: the zero Profile)
//	latency=D            fixed answer time, e.g. latency=2ms
//	latency=P50/P99      lognormal, e.g. latency=1ms/250ms
//	drop=P  error=P  dup=P  close=P     probabilities in [0, 1]
//	dark                 drop=1
//	code=N               error code of error answers (default -7953)
//	packet=N             records per packet of complex answers
//	cut=P@N              cut multi-packet answers after N packets
//	stall=P@D            stall answers for D
//	refuse               refuse connections
//
// Errors wrap ErrBadProfile and name the item; nothing is returned but the
// error.
func ParseProfile(s string) (Profile, error) {
	var p Profile
	s = strings.TrimSpace(s)
	if s == "" || s == "healthy" {
		return p, nil
	}
	for _, item := range strings.Split(s, ",") {
		item = strings.TrimSpace(item)
		name, val, hasVal := strings.Cut(item, "=")
		bad := func(why string) error { return fmt.Errorf("%w: %q: %s", ErrBadProfile, item, why) }
		prob := func(v string) (float64, error) {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || !(f >= 0 && f <= 1) {
				return 0, bad("want a probability in [0, 1]")
			}
			return f, nil
		}
		dur := func(v string) (time.Duration, error) {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 || d > maxLatency {
				return 0, bad("want a duration in [0, 1m]")
			}
			return d, nil
		}
		count := func(v string) (int, error) {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 || n > maxPacketRecords {
				return 0, bad("want a count in [0, 65536]")
			}
			return n, nil
		}
		var err error
		switch name {
		case "healthy":
			if hasVal {
				return Profile{}, bad("takes no value")
			}
		case "dark", "refuse":
			if hasVal {
				return Profile{}, bad("takes no value")
			}
			if name == "dark" {
				p.Drop = 1
			} else {
				p.Refuse = true
			}
		case "latency":
			a, b, two := strings.Cut(val, "/")
			if p.Latency.P50, err = dur(a); err == nil && two {
				if p.Latency.P99, err = dur(b); err == nil && p.Latency.P99 < p.Latency.P50 {
					err = bad("p99 below p50")
				}
			}
		case "drop":
			p.Drop, err = prob(val)
		case "error":
			p.Error, err = prob(val)
		case "dup":
			p.Dup, err = prob(val)
		case "close":
			p.Close, err = prob(val)
		case "code":
			var n int64
			if n, err = strconv.ParseInt(val, 10, 32); err != nil || n == 0 {
				err = bad("want a non-zero int32 result code")
			}
			p.ErrorCode = int32(n)
		case "packet":
			p.PacketRecords, err = count(val)
		case "cut":
			a, b, two := strings.Cut(val, "@")
			if p.Cut, err = prob(a); err == nil && two {
				p.CutAfter, err = count(b)
			}
		case "stall":
			a, b, two := strings.Cut(val, "@")
			if !two {
				err = bad("want P@duration")
			} else if p.Stall, err = prob(a); err == nil {
				p.StallFor, err = dur(b)
			}
		default:
			err = bad("unknown item")
		}
		if err != nil {
			return Profile{}, err
		}
		if !hasVal && name != "healthy" && name != "dark" && name != "refuse" {
			return Profile{}, bad("needs a value")
		}
	}
	return p, nil
}
