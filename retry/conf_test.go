package retry

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestParseConf(t *testing.T) {
	def := DefaultConf()
	cases := []struct {
		in      string
		want    Conf
		clamped string // the ReadRetryMaxCnt text when clamped
		wantErr bool
	}{
		// R5: the seed's element.
		{in: "conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2", want: def},
		// A present element with every key left out takes the defaults.
		{in: "conf://", want: def},
		{in: "conf://ReadRetryMaxCnt=3", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 3}},
		// Order kept, duplicates and non-read commands (writes, SQL) dropped.
		{in: "conf://ReadRetryCmd=23|7|23|1|3|9|999|7", want: Conf{Cmds: []uint32{23, 7}, ErrorCodes: def.ErrorCodes, MaxRetries: 2}},
		// Empty command list or zero retries turn retry off.
		{in: "conf://ReadRetryCmd=&ReadRetryMaxCnt=2", want: Conf{ErrorCodes: def.ErrorCodes, MaxRetries: 2}},
		{in: "conf://ReadRetryMaxCnt=0", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 0}},
		// Clamped to 8.
		{in: "conf://ReadRetryMaxCnt=20", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 8}, clamped: "20"},
		// Several error codes, an empty list, unknown keys, trailing separators, spaces.
		{in: "conf://ReadRetryErrorCode=-7953|-1|-7953&Foo=bar&", want: Conf{Cmds: def.Cmds, ErrorCodes: []int32{-7953, -1}, MaxRetries: 2}},
		{in: " conf://ReadRetryErrorCode=&ReadRetryCmd=7| ", want: Conf{Cmds: []uint32{7}, MaxRetries: 2}},
		// Malformed.
		{in: "tcp://1.2.3.4:5", wantErr: true},
		{in: "conf://ReadRetryMaxCnt", wantErr: true},
		{in: "conf://ReadRetryMaxCnt=-1", wantErr: true},
		{in: "conf://ReadRetryMaxCnt=two", wantErr: true},
		// Any all-digit count above 8 is clamped, however long (SPEC R5 round 2).
		{in: "conf://ReadRetryMaxCnt=99999999999", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 8}, clamped: "99999999999"},
		{in: "conf://ReadRetryMaxCnt=+123456789012345678901234567890", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 8}, clamped: "+123456789012345678901234567890"},
		{in: "conf://ReadRetryMaxCnt=0009", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 8}, clamped: "0009"},
		{in: "conf://ReadRetryMaxCnt=08", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 8}},
		{in: "conf://ReadRetryMaxCnt=-99999999999", wantErr: true},
		{in: "conf://ReadRetryMaxCnt=-0", want: Conf{Cmds: def.Cmds, ErrorCodes: def.ErrorCodes, MaxRetries: 0}},
		{in: "conf://ReadRetryMaxCnt=1e3", wantErr: true},
		{in: "conf://ReadRetryMaxCnt=", wantErr: true},
		// At most MaxErrorCodes error codes (SPEC R5 round 2; issue 17 item 11).
		{in: "conf://ReadRetryErrorCode=" + strings.Repeat("-1|", MaxErrorCodes-1) + "-2", want: Conf{Cmds: def.Cmds, ErrorCodes: []int32{-1, -2}, MaxRetries: 2}},
		{in: "conf://ReadRetryErrorCode=" + strings.Repeat("-1|", MaxErrorCodes) + "-2", wantErr: true},
		{in: "conf://ReadRetryCmd=7|x", wantErr: true},
		{in: "conf://ReadRetryCmd=-7", wantErr: true},
		{in: "conf://ReadRetryErrorCode=abc", wantErr: true},
		{in: "conf://ReadRetryErrorCode=9999999999", wantErr: true},
	}
	for _, c := range cases {
		got, raw, err := parseConf(c.in)
		if c.wantErr {
			if !errors.Is(err, ErrMalformedConf) {
				t.Errorf("%q: err = %v, want ErrMalformedConf", c.in, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", c.in, err)
			continue
		}
		if !reflect.DeepEqual(got, c.want) || raw != c.clamped {
			t.Errorf("%q:\n got %+v clamped %q\nwant %+v clamped %q", c.in, got, raw, c.want, c.clamped)
		}
		pub, err := ParseConf(c.in)
		if err != nil || !reflect.DeepEqual(pub, got) {
			t.Errorf("%q: ParseConf differs from parseConf", c.in)
		}
	}
}

func TestConfEnabled(t *testing.T) {
	if !DefaultConf().Enabled() || (Conf{}).Enabled() || (Conf{Cmds: []uint32{7}}).Enabled() || (Conf{MaxRetries: 2}).Enabled() {
		t.Fatal("Enabled")
	}
	c := DefaultConf()
	if !c.HasCmd(25) || c.HasCmd(1) || !c.IsRetryCode(-7953) || c.IsRetryCode(0) {
		t.Fatal("HasCmd/IsRetryCode")
	}
	if s := c.String(); s != "conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2" {
		t.Fatalf("String: %s", s)
	}
}

func TestConfFromCollectURLList(t *testing.T) {
	c, found, err := ConfFromCollectURLList("tcp://10.0.0.1:9000;conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	if err != nil || !found || !reflect.DeepEqual(c, DefaultConf()) {
		t.Fatalf("seed list: %+v %v %v", c, found, err)
	}
	// An old directory server: no conf:// element.
	for _, l := range []string{"", "tcp://10.0.0.1:9000", "tcp://a:1;tcp://b:2;"} {
		if _, found, err := ConfFromCollectURLList(l); found || err != nil {
			t.Errorf("%q: found=%v err=%v", l, found, err)
		}
	}
	if _, found, err := ConfFromCollectURLList("tcp://a:1;conf://ReadRetryMaxCnt=x"); !found || !errors.Is(err, ErrMalformedConf) {
		t.Errorf("malformed: found=%v err=%v", found, err)
	}
	if _, _, err := ConfFromCollectURLList("conf://ReadRetryMaxCnt=1;conf://ReadRetryMaxCnt=2"); !errors.Is(err, ErrMalformedConf) {
		t.Errorf("two elements: %v", err)
	}
	c, found, err = ConfFromCollectURLList(" conf://ReadRetryMaxCnt=1 ; tcp://x:1")
	if err != nil || !found || c.MaxRetries != 1 {
		t.Errorf("spaces: %+v %v", c, err)
	}
}

// FuzzParseConf: no input panics; an accepted element keeps only read
// commands without duplicates, MaxRetries in 0..8, and renders back to an
// element that parses to the same Conf.
func FuzzParseConf(f *testing.F) {
	f.Add("conf://ReadRetryCmd=7|103|15|23|117|153|25|11&ReadRetryErrorCode=-7953&ReadRetryMaxCnt=2")
	f.Add("conf://ReadRetryCmd=&ReadRetryMaxCnt=0")
	f.Add("conf://ReadRetryMaxCnt=20&x=y&&")
	f.Add("tcp://1.1.1.1:1;conf://ReadRetryErrorCode=-1|-2")
	f.Add("conf://ReadRetryCmd=7||1|23&ReadRetryErrorCode=")
	f.Fuzz(func(t *testing.T, s string) {
		c, found, err := ConfFromCollectURLList(s)
		if err != nil && !errors.Is(err, ErrMalformedConf) {
			t.Fatalf("error does not wrap ErrMalformedConf: %v", err)
		}
		if !found && !strings.Contains(s, confPrefix) && err != nil {
			t.Fatal("error without a conf element")
		}
		if err != nil || !found {
			return
		}
		if c.MaxRetries < 0 || c.MaxRetries > MaxMaxRetries {
			t.Fatalf("MaxRetries %d", c.MaxRetries)
		}
		seen := map[uint32]bool{}
		for _, cmd := range c.Cmds {
			if seen[cmd] || !isReadCmd(cmd) {
				t.Fatalf("cmd %d duplicated or not a read", cmd)
			}
			seen[cmd] = true
		}
		again, err := ParseConf(c.String())
		if err != nil || !reflect.DeepEqual(again, c) {
			t.Fatalf("String round trip: %+v -> %q -> %+v, %v", c, c.String(), again, err)
		}
	})
}

func isReadCmd(c uint32) bool {
	switch c {
	case 7, 103, 15, 23, 117, 153, 25, 11:
		return true
	}
	return false
}

// TestSimpleDeadlines pins SPEC R6's worked example and the triangular shape.
func TestSimpleDeadlines(t *testing.T) {
	ms := time.Millisecond
	cases := []struct {
		budget  time.Duration
		retries int
		want    []time.Duration
	}{
		{3000 * ms, 2, []time.Duration{500 * ms, 1500 * ms, 3000 * ms}}, // the seed's table
		{3000 * ms, 0, []time.Duration{3000 * ms}},
		{1000 * ms, 1, []time.Duration{333333333, 1000 * ms}},
		{4500 * ms, 8, []time.Duration{100 * ms, 300 * ms, 600 * ms, 1000 * ms, 1500 * ms, 2100 * ms, 2800 * ms, 3600 * ms, 4500 * ms}},
		{4500 * ms, 20, []time.Duration{100 * ms, 300 * ms, 600 * ms, 1000 * ms, 1500 * ms, 2100 * ms, 2800 * ms, 3600 * ms, 4500 * ms}},
		{3000 * ms, -1, []time.Duration{3000 * ms}},
		{0, 2, nil},
		{-ms, 2, nil},
		{time.Duration(1<<63 - 1), 8, nil}, // checked below: no overflow, last == budget
	}
	for _, c := range cases {
		got := SimpleDeadlines(c.budget, c.retries)
		if c.want == nil && c.budget > 0 {
			if len(got) != 9 || got[8] != c.budget || got[0] <= 0 {
				t.Errorf("huge budget: %v", got)
			}
			for i := 1; i < len(got); i++ {
				if got[i] <= got[i-1] {
					t.Errorf("huge budget not increasing: %v", got)
				}
			}
			continue
		}
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("SimpleDeadlines(%v, %d) = %v, want %v", c.budget, c.retries, got, c.want)
		}
	}
}

// TestComplexWaits pins SPEC R10's worked example.
func TestComplexWaits(t *testing.T) {
	ms := time.Millisecond
	if got := ComplexWaits(6000*ms, 2); !reflect.DeepEqual(got, []time.Duration{1000 * ms, 2000 * ms, 3000 * ms}) {
		t.Fatalf("ComplexWaits(6000ms, 2) = %v", got)
	}
	if got := ComplexWaits(0, 2); got != nil {
		t.Fatalf("off: %v", got)
	}
}
