package toolplane

import (
	"fmt"
	"strings"
	"time"
)

// The defaults of a definition's attempts (Execution), where its
// execution block leaves them unset.
const (
	// DefaultMaxAttempts is how many attempts a call makes where a retry
	// is safe and its definition names no max_attempts.
	DefaultMaxAttempts = 3
	// DefaultBackoff is the ceiling of the first pause between attempts.
	DefaultBackoff = 100 * time.Millisecond
	// DefaultMaxBackoff caps every later ceiling.
	DefaultMaxBackoff = 2 * time.Second
)

// Attempts answers how many attempts one call of the tool may make: 1
// where a retry could double an effect (safe false), otherwise
// MaxAttempts, or DefaultMaxAttempts when the block names none. A nil
// block is all defaults.
func (e *Execution) Attempts(safe bool) int {
	switch {
	case !safe:
		return 1
	case e == nil || e.MaxAttempts <= 0:
		return DefaultMaxAttempts
	}
	return e.MaxAttempts
}

// PauseCeiling answers the ceiling of the pause after retry n, from 0
// (the pause between the first attempt and the second): Backoff·2^n,
// capped at MaxBackoff. A pause is drawn at random from zero to its
// ceiling (full jitter), so callers failing together do not come back
// together.
func (e *Execution) PauseCeiling(n int) time.Duration {
	base, ceiling := DefaultBackoff, DefaultMaxBackoff
	if e != nil && e.Backoff > 0 {
		base = e.Backoff.Std()
	}
	if e != nil && e.MaxBackoff > 0 {
		ceiling = e.MaxBackoff.Std()
	}
	if base >= ceiling {
		return ceiling
	}
	for ; n > 0; n-- {
		if base > ceiling/2 {
			return ceiling
		}
		base *= 2
	}
	return base
}

// AttemptLimit answers the bound of each attempt, zero when an attempt
// may take whatever remains of its call's time.
func (e *Execution) AttemptLimit() time.Duration {
	if e == nil || e.AttemptTimeout <= 0 {
		return 0
	}
	return e.AttemptTimeout.Std()
}

// Budget answers the longest attempts attempts can take, each bounded by
// AttemptTimeout, with every pause between them at its ceiling, and that
// sum written out as a person checks it ("3 attempts × 4s + pauses up to
// 200ms + 400ms = 12.6s"). It answers zero and "" when AttemptTimeout is
// unset: each attempt then takes what remains of the call's time, and
// the call's timeout bounds them all.
func (e *Execution) Budget(attempts int) (time.Duration, string) {
	limit := e.AttemptLimit()
	if limit == 0 || attempts < 1 {
		return 0, ""
	}
	total := time.Duration(attempts) * limit
	var b strings.Builder
	noun := "attempts"
	if attempts == 1 {
		noun = "attempt"
	}
	fmt.Fprintf(&b, "%d %s × %v", attempts, noun, limit)
	for n := range attempts - 1 {
		p := e.PauseCeiling(n)
		total += p
		if n == 0 {
			fmt.Fprintf(&b, " + pauses up to %v", p)
		} else {
			fmt.Fprintf(&b, " + %v", p)
		}
	}
	fmt.Fprintf(&b, " = %v", total)
	return total, b.String()
}

// Pauses answers the sum of the pause ceilings between attempts attempts.
func (e *Execution) Pauses(attempts int) time.Duration {
	var total time.Duration
	for n := range attempts - 1 {
		total += e.PauseCeiling(n)
	}
	return total
}
