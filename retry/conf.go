package retry

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/readretry/readretry/wire"
)

// Defaults of the directory's read retry configuration (SPEC R5, seed 000 §5).
const (
	// DefaultMaxRetries is ReadRetryMaxCnt when the key is left out: two
	// re-sends, so at most three packets per request.
	DefaultMaxRetries = 2
	// MaxMaxRetries is the largest ReadRetryMaxCnt; larger values are clamped
	// to it with a warning.
	MaxMaxRetries = 8
	// MaxErrorCodes is the longest ReadRetryErrorCode list a conf://
	// element may carry; a longer one is malformed (logged, the zone keeps
	// its configuration; SPEC R5). Real configurations list one or two
	// codes. The bound keeps parsing linear, and every request keeps its
	// own copy of the list (4 bytes a code, SPEC R15), checked by a scan
	// that is therefore bounded: membership is O(1).
	MaxErrorCodes = 16
	// ResultProxySwiftTimeout is PROXY_ERR_SWIFT_TIMEOUT (-7953), the default
	// ReadRetryErrorCode: the proxy timed out talking to the storage layer.
	ResultProxySwiftTimeout int32 = -7953

	confPrefix = "conf://"

	// MaxQuotedConf is how many bytes of a value from a route update an
	// error or a log line quotes (SPEC R22): a longer value is cut there
	// and its total length is given instead of the rest, so a directory
	// (or whoever speaks for it) that sends a 10 MB ReadRetryMaxCnt gets a
	// log line of a hundred bytes, not of 10 MB.
	MaxQuotedConf = 64
)

// clip returns s if it has at most MaxQuotedConf bytes, else its first
// MaxQuotedConf bytes (cut back to a rune boundary) and its total length,
// as in `1234…(10000000 bytes)`. Every piece of a conf:// element that goes
// into an error or a log line passes through it.
func clip(s string) string {
	if len(s) <= MaxQuotedConf {
		return s
	}
	cut := MaxQuotedConf
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// numErr is the reason of a strconv error without the input it quotes in
// full (a *strconv.NumError carries the whole value).
func numErr(err error) error {
	if ne, ok := err.(*strconv.NumError); ok {
		return ne.Err
	}
	return err
}

// Errors of the conf:// parsers.
var (
	// ErrMalformedConf wraps every reason a conf:// element is rejected; the
	// zone then keeps its previous configuration (SPEC R5).
	ErrMalformedConf = errors.New("retry: malformed conf:// element")
)

// Conf is a zone's read retry configuration as the directory server sends it
// in a conf:// element (SPEC R5). The zero Conf turns read retry off.
type Conf struct {
	// Cmds are the commands that may be retried: only the eight read
	// commands of SPEC R4, in the order given, without duplicates.
	Cmds []uint32
	// ErrorCodes are the result codes that trigger an immediate re-send
	// (SPEC R8), and that mark a batch record as not answered (SPEC R8b):
	// at most MaxErrorCodes, without duplicates.
	ErrorCodes []int32
	// MaxRetries is the number of re-sends per request, not counting the
	// first send: 0..MaxMaxRetries; 0 turns retry off for the zone.
	MaxRetries int
}

// DefaultConf returns the configuration a present but empty conf://
// element means: the eight read commands, error code -7953, two retries.
func DefaultConf() Conf {
	c := Conf{ErrorCodes: []int32{ResultProxySwiftTimeout}, MaxRetries: DefaultMaxRetries}
	for _, cmd := range wire.ReadCommands {
		c.Cmds = append(c.Cmds, uint32(cmd))
	}
	return c
}

// Enabled reports whether the configuration retries anything: at least one
// command and MaxRetries > 0 (SPEC R3).
func (c Conf) Enabled() bool { return c.MaxRetries > 0 && len(c.Cmds) > 0 }

// HasCmd reports whether cmd is in Cmds.
func (c Conf) HasCmd(cmd uint32) bool { return slices.Contains(c.Cmds, cmd) }

// IsRetryCode reports whether result is in ErrorCodes (at most
// MaxErrorCodes entries, so the scan is bounded).
func (c Conf) IsRetryCode(result int32) bool { return slices.Contains(c.ErrorCodes, result) }

// String renders c in the directory's syntax (a conf:// element), for logs.
func (c Conf) String() string {
	var b strings.Builder
	b.WriteString(confPrefix + "ReadRetryCmd=")
	for i, v := range c.Cmds {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(strconv.FormatUint(uint64(v), 10))
	}
	b.WriteString("&ReadRetryErrorCode=")
	for i, v := range c.ErrorCodes {
		if i > 0 {
			b.WriteByte('|')
		}
		b.WriteString(strconv.FormatInt(int64(v), 10))
	}
	b.WriteString("&ReadRetryMaxCnt=")
	b.WriteString(strconv.Itoa(c.MaxRetries))
	return b.String()
}

// ParseConf parses one conf:// element of a CollectUrlList, such as
// "conf://ReadRetryCmd=7|103&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2"
// (SPEC R5). Keys are separated by '&', values by '|'. A key left out takes
// its default; unknown keys are ignored; empty pieces (a trailing '&' or '|')
// are skipped. "ReadRetryCmd=" (empty) or "ReadRetryMaxCnt=0" turn retry off.
// Commands other than the eight reads are dropped: writes are never retried
// (SPEC R3). A ReadRetryMaxCnt above 8, however many digits it has, is
// clamped to 8 (Client logs the warning). Errors wrap ErrMalformedConf: no
// conf:// prefix, a piece without '=', a value that is not a number of the
// right range, a negative ReadRetryMaxCnt, more than MaxErrorCodes error
// codes. An error quotes at most MaxQuotedConf bytes of any value.
func ParseConf(element string) (Conf, error) {
	c, _, err := parseConf(element)
	return c, err
}

// parseConf is ParseConf that also returns the ReadRetryMaxCnt text when
// it was clamped to MaxMaxRetries ("" otherwise; cut by clip), so that the
// client can log the warning SPEC R5 asks for.
func parseConf(element string) (c Conf, clampedFrom string, err error) {
	element = strings.TrimSpace(element)
	body, ok := strings.CutPrefix(element, confPrefix)
	if !ok {
		return Conf{}, "", fmt.Errorf("%w: %q does not start with %s", ErrMalformedConf, clip(element), confPrefix)
	}
	c = DefaultConf()
	for piece := range strings.SplitSeq(body, "&") {
		piece = strings.TrimSpace(piece)
		if piece == "" {
			continue
		}
		key, val, ok := strings.Cut(piece, "=")
		if !ok {
			return Conf{}, "", fmt.Errorf("%w: %q has no '='", ErrMalformedConf, clip(piece))
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "ReadRetryCmd":
			c.Cmds = c.Cmds[:0]
			for item := range strings.SplitSeq(val, "|") {
				if item = strings.TrimSpace(item); item == "" {
					continue
				}
				v, err := strconv.ParseUint(item, 10, 32)
				if err != nil {
					return Conf{}, "", fmt.Errorf("%w: ReadRetryCmd value %q: %v", ErrMalformedConf, clip(item), numErr(err))
				}
				if wire.Command(v).IsRead() && !slices.Contains(c.Cmds, uint32(v)) {
					c.Cmds = append(c.Cmds, uint32(v))
				}
			}
		case "ReadRetryErrorCode":
			if c.ErrorCodes, err = parseErrorCodes(val); err != nil {
				return Conf{}, "", err
			}
		case "ReadRetryMaxCnt":
			var clamped bool
			if c.MaxRetries, clamped, err = parseMaxRetries(val); err != nil {
				return Conf{}, "", err
			}
			clampedFrom = ""
			if clamped {
				clampedFrom = clip(val) // logged as it came, within bounds
			}
		}
	}
	if len(c.Cmds) == 0 {
		c.Cmds = nil
	}
	if len(c.ErrorCodes) == 0 {
		c.ErrorCodes = nil
	}
	return c, clampedFrom, nil
}

// parseErrorCodes parses a ReadRetryErrorCode value: int32 codes separated
// by '|', empty items skipped, duplicates dropped. More than MaxErrorCodes
// items is an error, found before any quadratic work is done.
func parseErrorCodes(val string) ([]int32, error) {
	var codes []int32
	items := 0
	for item := range strings.SplitSeq(val, "|") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		if items++; items > MaxErrorCodes {
			return nil, fmt.Errorf("%w: ReadRetryErrorCode lists more than %d codes", ErrMalformedConf, MaxErrorCodes)
		}
		v, err := strconv.ParseInt(item, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%w: ReadRetryErrorCode value %q: %v", ErrMalformedConf, clip(item), numErr(err))
		}
		if !slices.Contains(codes, int32(v)) {
			codes = append(codes, int32(v))
		}
	}
	return codes, nil
}

// parseMaxRetries parses a ReadRetryMaxCnt value: a decimal count, an
// optional '+' sign; any count above MaxMaxRetries — however many digits,
// even beyond int64 — is MaxMaxRetries (SPEC R5). Negative or non-numeric
// values are errors. clamped reports a value above MaxMaxRetries.
func parseMaxRetries(val string) (n int, clamped bool, err error) {
	digits := strings.TrimPrefix(val, "+")
	if digits == "" || strings.TrimLeft(digits, "0123456789") != "" {
		if d, ok := strings.CutPrefix(val, "-"); ok && d != "" && strings.TrimLeft(d, "0123456789") == "" {
			if strings.TrimLeft(d, "0") == "" {
				return 0, false, nil // "-0" is zero: retry off, not a negative count
			}
			return 0, false, fmt.Errorf("%w: ReadRetryMaxCnt %s is negative", ErrMalformedConf, clip(val))
		}
		return 0, false, fmt.Errorf("%w: ReadRetryMaxCnt value %q is not a count", ErrMalformedConf, clip(val))
	}
	if digits = strings.TrimLeft(digits, "0"); len(digits) > 2 {
		return MaxMaxRetries, true, nil
	}
	v, _ := strconv.Atoi("0" + digits)
	return min(v, MaxMaxRetries), v > MaxMaxRetries, nil
}

// ConfFromCollectURLList finds the conf:// element of a CollectUrlList
// (elements separated by ';', e.g. "tcp://10.0.0.1:9000;conf://...") and
// parses it (SPEC R5). found is false when the list has no conf:// element:
// an old directory server, whose zones keep their configuration. Errors wrap
// ErrMalformedConf: a malformed element, or more than one conf:// element.
func ConfFromCollectURLList(list string) (c Conf, found bool, err error) {
	pc := parseConfList(list)
	return pc.conf, pc.found, pc.err
}

// parsedConf is a CollectUrlList's conf:// element as the client applies
// it: the configuration, the ReadRetryMaxCnt text when it was clamped (for
// the warning of SPEC R5), whether the list had an element, and why it was
// malformed.
type parsedConf struct {
	conf        Conf
	clampedFrom string
	found       bool
	err         error
}

func parseConfList(list string) parsedConf {
	var elem string
	found := false
	for e := range strings.SplitSeq(list, ";") {
		e = strings.TrimSpace(e)
		if !strings.HasPrefix(e, confPrefix) {
			continue
		}
		if found {
			return parsedConf{found: true, err: fmt.Errorf("%w: more than one conf:// element in the list", ErrMalformedConf)}
		}
		elem, found = e, true
	}
	if !found {
		return parsedConf{}
	}
	c, clampedFrom, err := parseConf(elem)
	return parsedConf{conf: c, clampedFrom: clampedFrom, found: true, err: err}
}
