// Package testclock is the settable clock tests inject wherever production
// code takes a clock (a Now func), so a test moves time instead of
// sleeping: a lease runs out, an approval expires, a key's last use falls
// due, at once and the same way on every run.
package testclock

import (
	"sync"
	"time"
)

// Clock is a clock that stands still until a test moves it. It is safe
// for concurrent use, since the code under test reads it from its own
// goroutines while the test advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// New answers a clock standing at start.
func New(start time.Time) *Clock { return &Clock{now: start} }

// Now answers the clock's time; pass the method value (c.Now) where code
// takes a func() time.Time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d (back, for a negative d).
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}
