package registry

import (
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// MaxAttempts bounds a definition's execution.max_attempts: more attempts
// inside one call only multiply what a failing downstream is sent.
const MaxAttempts = 10

// attempts checks the attempts of the execution block (toolplane.Execution):
// its numbers; that more than one attempt is asked only where a retry can
// be safe; and that every attempt, each at its attempt_timeout, with
// every pause between them at its ceiling, fits the tool's timeout, so
// that the invoker never cuts a retry the definition promised (the full
// retry budget, not one attempt, is what is checked).
func (ch *checker) attempts() {
	d := ch.d
	e := d.Execution
	if e == nil {
		return
	}
	bad := false
	for _, f := range []struct {
		field string
		v     time.Duration
	}{
		{"execution.attempt_timeout", e.AttemptTimeout.Std()},
		{"execution.backoff", e.Backoff.Std()},
		{"execution.max_backoff", e.MaxBackoff.Std()},
	} {
		if f.v < 0 {
			ch.add(f.field, fmt.Sprintf("%v is negative", f.v), "use a positive duration such as 200ms, or omit it for the default")
			bad = true
		}
	}
	switch {
	case e.MaxAttempts < 0:
		ch.add("execution.max_attempts", fmt.Sprintf("%d is negative", e.MaxAttempts), fmt.Sprintf("use 1 to %d, or omit it for the default", MaxAttempts))
		bad = true
	case e.MaxAttempts > MaxAttempts:
		ch.add("execution.max_attempts", fmt.Sprintf("%d exceeds the platform limit of %d", e.MaxAttempts, MaxAttempts), fmt.Sprintf("use at most %d", MaxAttempts))
		bad = true
	}
	if e.MaxInFlight < 0 {
		ch.add("execution.max_in_flight", fmt.Sprintf("%d is negative", e.MaxInFlight), "use a positive cap, or omit it for the node's default")
		bad = true
	}
	if e.RatePerMinute < 0 {
		ch.add("execution.rate_per_minute", fmt.Sprintf("%d is negative", e.RatePerMinute), "use a positive rate, or omit it for none")
		bad = true
	}
	switch e.Priority {
	case "", toolplane.PriorityLow, toolplane.PriorityNormal, toolplane.PriorityCritical:
	default:
		ch.add("execution.priority", fmt.Sprintf("%q is not a priority", e.Priority), "use low, normal or critical")
		bad = true
	}
	if e.Backoff > 0 && e.MaxBackoff > 0 && e.MaxBackoff < e.Backoff {
		ch.add("execution.max_backoff", fmt.Sprintf("%v is below backoff %v", e.MaxBackoff.Std(), e.Backoff.Std()), "raise max_backoff to at least backoff, or omit it")
		bad = true
	}
	if bad {
		return
	}
	possible, never := retryPossible(d)
	if e.MaxAttempts > 1 && !possible {
		ch.add("execution.max_attempts", fmt.Sprintf("%d attempts on a tool that is never attempted twice: %s", e.MaxAttempts, never),
			"set max_attempts: 1, or omit it")
		return
	}
	timeout := d.Timeout.Std()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	attempts := e.Attempts(possible)
	if total, sum := e.Budget(attempts); total > timeout {
		ch.add("execution", fmt.Sprintf("the retry budget does not fit the timeout: %s, more than the timeout of %v", sum, timeout),
			"lower max_attempts, attempt_timeout or backoff, or raise timeout: every attempt and every pause must finish within it")
	} else if pauses := e.Pauses(attempts); total == 0 && e.MaxAttempts > 1 && pauses >= timeout {
		// Only a budget the definition declares is held to this: the
		// default attempts take a pause only where it and an attempt
		// after it fit the call's time left (invoke's retry loop), so a
		// short timeout with a block naming only, say, max_in_flight is
		// not refused for pauses it never asked for.
		ch.add("execution", fmt.Sprintf("the pauses between %d attempts, up to %v, leave no time of the %v timeout for an attempt", attempts, pauses, timeout),
			"lower backoff or max_attempts, or raise timeout")
	}
}

// retryPossible reports whether a call of d may be attempted more than
// once, as far as the definition can tell, and when it never can, why. A
// read may when its retry is safe (the default for a read the http runtime
// makes). A write may when the downstream cannot see a repeat twice: an
// http binding that sends the call's key in its idempotency_header, a sql
// binding (whose transient failures are rolled back), or a handler that
// declares one of those in its binding (which the invoker reads; the
// definition cannot tell). A remote server's write is never sent twice:
// toolplane cannot know whether that server honours the key it is sent.
func retryPossible(d *toolplane.Definition) (bool, string) {
	b := &d.Binding
	if !d.Writes() {
		switch {
		case d.Retry == toolplane.RetrySafe, d.Retry == "" && b.HTTP != nil:
			return true, ""
		}
		return false, "a read whose retry is none; set retry: safe if a second attempt is harmless"
	}
	switch {
	case d.Replay != nil:
		// Declared safe to repeat: its downstream honours the key.
		return true, ""
	case b.HTTP != nil && b.HTTP.IdempotencyHeader == "":
		return false, "an http write that sends no idempotency_header, so a second attempt could be a second effect; name the header the downstream deduplicates on"
	case b.Remote != nil:
		return false, "a remote tool's write, whose server may not honour the idempotency key it is sent (unless its owner says it does: idempotent_downstream, which declares replay)"
	}
	return true, ""
}
