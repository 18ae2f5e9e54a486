package sim

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"
)

func TestFlags(t *testing.T) {
	parse := func(args ...string) (*Flags, error) {
		var f Flags
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f.Register(fs, FlagUsage{})
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		return &f, f.Check()
	}
	f, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	// rrsim's defaults, which are also what Run takes for zero Options.
	want := Options{Duration: 2 * time.Second, Rate: 2000, Seed: 1, SimpleBudget: 300 * time.Millisecond,
		ComplexBudget: 600 * time.Millisecond, MaxRetries: 2, WaitTimeout: time.Second}
	got := f.Options()
	if got.Duration != want.Duration || got.Rate != want.Rate || got.Seed != want.Seed || got.SimpleBudget != want.SimpleBudget ||
		got.ComplexBudget != want.ComplexBudget || got.MaxRetries != want.MaxRetries || got.WaitTimeout != want.WaitTimeout {
		t.Fatalf("defaults %+v, want %+v", got, want)
	}
	var zero Options
	if err := zero.defaults(); err != nil {
		t.Fatal(err)
	}
	if zero.Duration != got.Duration || zero.Rate != got.Rate || zero.Seed != got.Seed || zero.SimpleBudget != got.SimpleBudget ||
		zero.ComplexBudget != got.ComplexBudget || zero.MaxRetries != got.MaxRetries || zero.WaitTimeout != got.WaitTimeout {
		t.Fatalf("flag defaults %+v differ from Run's %+v", got, zero)
	}
	f, err = parse("-duration", "5s", "-rate", "300", "-seed", "9", "-simple", "1s", "-complex", "2s", "-retries", "8", "-wait", "3s")
	if err != nil {
		t.Fatal(err)
	}
	if o := f.Options(); o.Duration != 5*time.Second || o.Rate != 300 || o.Seed != 9 || o.SimpleBudget != time.Second ||
		o.ComplexBudget != 2*time.Second || o.MaxRetries != 8 || o.WaitTimeout != 3*time.Second {
		t.Fatalf("options %+v", o)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-retries", "0"}, "-retries 0: want 1..8"},
		{[]string{"-retries", "9"}, "-retries 9: want 1..8"},
		{[]string{"-duration", "0s"}, "must be positive"},
		{[]string{"-rate", "-1"}, "must be positive"},
		{[]string{"-simple", "0s"}, "must be positive"},
		{[]string{"-complex", "-1s"}, "must be positive"},
		{[]string{"-wait", "0s"}, "must be positive"},
	} {
		if _, err := parse(c.args...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want %q", c.args, err, c.want)
		}
	}
}

func TestIsFleetChild(t *testing.T) {
	for _, c := range []struct {
		args []string
		want bool
	}{
		{[]string{"rrsim", "-fleet-child"}, true},
		{[]string{"rrsim"}, false},
		{[]string{"rrsim", "-fleet-child", "x"}, false},
		{[]string{"rrsim", "-scenario", "-fleet-child"}, false},
	} {
		if got := IsFleetChild(c.args); got != c.want {
			t.Errorf("%v: %v", c.args, got)
		}
	}
	if cmd := FleetChild(); len(cmd.Args) != 2 || cmd.Args[1] != FleetChildArg {
		t.Fatalf("child args %v", cmd.Args)
	}
}

func TestFormatMs(t *testing.T) {
	for _, c := range []struct {
		v    float64
		want string
	}{{0, "0.00ms"}, {1.234, "1.23ms"}, {9.999, "10.00ms"}, {10, "10.0ms"}, {99.94, "99.9ms"}, {100, "100ms"}, {1234.5, "1234ms"}} {
		if got := FormatMs(c.v); got != c.want {
			t.Errorf("FormatMs(%v) = %q, want %q", c.v, got, c.want)
		}
	}
}
