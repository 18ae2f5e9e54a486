package idem_test

import (
	"sync/atomic"
	"time"
)

// fakeClock is a clock the test moves by hand; safe for concurrent use.
type fakeClock struct {
	base time.Time
	ns   atomic.Int64
}

func newFakeClock() *fakeClock {
	return &fakeClock{base: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time { return c.base.Add(time.Duration(c.ns.Load())) }

func (c *fakeClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
