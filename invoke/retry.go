package invoke

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/registry"
)

// The attempts of one call.
//
// A call is sent to its handler up to its attempt budget, inside its own
// time, and this loop is the only place that sends it again: the runtimes
// (http, sql, a remote server's) make one attempt per Invoke and report
// what the loop needs (handler.Outcome: Retry, After, and whether the
// attempt may have acted), so no call is retried twice over.
//
// Another attempt is made only when all of these hold:
//
//   - the attempt failed transiently (RetryableUpstream, Unavailable, an
//     explained retryable_upstream, an ending marked Retryable, or an
//     attempt cut at its own bound, Execution.AttemptTimeout);
//   - it cannot double an effect: a read whose definition says retry:
//     safe; a write whose binding is WithKeyedDownstream, or whose
//     definition declares replay (every attempt carries the call's one
//     key, which its downstream honours); or a write whose binding is
//     WithTransactionalAttempts, when the failure made no effect (never
//     after an ending that may have acted);
//   - the budget has an attempt left (Execution.Attempts);
//   - nothing was streamed yet to the call's reader;
//   - the tool's breaker is closed, before the pause and after it: one
//     that opened meanwhile, or that was half-open with this call as its
//     probe, ends the call on its last attempt, with the breaker's wait
//     as its retry hint;
//   - the pause before it, and a whole attempt after the pause, fit in
//     the call's time. The pause is what the downstream asked for
//     (Retry-After) or, when it asked nothing, a draw between zero and
//     the ceiling Execution.PauseCeiling (full jitter).
//
// A write's attempts share its one claim and key. When the last attempt
// failed without effect, the claim is released, unless an earlier
// attempt may have acted without an answer: the call is then uncertain
// whatever the last one said, since releasing the key would let the
// effect happen twice. A downstream's Retry-After is carried onto the
// call's refusal (Error.RetryAfter).

// minAttempt is the least time an attempt after a pause must have before
// the call's deadline, for a tool that bounds no attempt of its own.
const minAttempt = 50 * time.Millisecond

// errExpired is the error of an attempt cut at its own bound whose
// handler did not answer (one that does not stop with its context).
var errExpired = errors.New("the attempt did not answer within its bound")

// tries is what one call's attempts share, on its stack.
type tries struct {
	exec *toolplane.Execution
	// max is the attempt budget; made counts the attempts made.
	max, made int
	// limit bounds each attempt, zero for none; total is the call's time,
	// and deadline its end, on the clock its contexts keep.
	limit, total time.Duration
	deadline     time.Time
	// writes, keyed, transactional: what makes another attempt safe.
	writes, keyed, transactional bool
	// maybe: an attempt may have acted without an answer; why says how.
	maybe bool
	why   string
	// abandoned: an attempt was left running past its bound.
	abandoned bool
	// callerCut: the call's time is shorter than the tool's own timeout,
	// cut by its caller's deadline or its parent's time left; its end
	// then says nothing of the downstream (see attemptMark).
	callerCut bool
}

// newTries answers the attempt state of c, run by b for total from now.
func (c *call) newTries(b *handler.Binding, total time.Duration) tries {
	d := &c.tool.Def
	own := d.Timeout.Std()
	if own <= 0 {
		own = registry.DefaultTimeout
	}
	t := tries{exec: d.Execution, limit: d.Execution.AttemptLimit(), total: total, deadline: time.Now().Add(total), writes: d.Writes(),
		callerCut: total < own}
	safe := d.Retry == toolplane.RetrySafe
	if t.writes {
		// A write that declares replay is safe to repeat by its own
		// definition (its downstream honours the key it is sent: a
		// remote server's owner said so, or its handler's author): what
		// may start it again after a lost worker may also attempt it
		// again within the call.
		t.keyed, t.transactional = b.KeyedDownstream() || d.Replay != nil, b.TransactionalAttempts()
		safe = t.keyed || t.transactional
	}
	t.max = d.Execution.Attempts(safe)
	return t
}

// attempt is how one attempt ended.
type attempt struct {
	r ret
	// late: the call's own time ran out, or its caller asked it to stop,
	// before the handler answered.
	late bool
	// expired: the attempt's own bound ran out first. r.err is errExpired
	// when the handler did not answer.
	expired bool
	// done is where the answer of a handler left running may still come.
	done <-chan ret
	// within is the bound the handler did not answer within.
	within time.Duration
}

// dispatch makes the call's attempts and answers the last one with its
// outcome (zero for an answer or a panic), or, in cut, an attempt the
// call ends on without its handler's answer: the caller ends the call as
// timed out. vctx carries the call's values (a stream's emitter, its
// usage) and, when the caller may ask it to stop, that signal; n is the
// journal's attempt count the handler is told.
func (c *call) dispatch(vctx context.Context, b *handler.Binding, n int, t *tries, st *stream) (r ret, o handler.Outcome, cut *attempt) {
	for {
		a := c.attemptOnce(vctx, b, n, t)
		t.made++
		// One attempt has ended, and only here: what is counted per
		// attempt is read from a.
		switch {
		case a.late:
			cut := a // on the heap only when the call ends so
			return a.r, o, &cut
		case a.r.panic != nil || a.r.err == nil:
			return a.r, o, nil
		}
		o = c.outcome(b, &a, t)
		// A write's attempt that may have acted is remembered; a read has
		// no effect to double, and its last answer stands.
		if o.Kind == handler.Held && t.writes && !t.maybe {
			t.maybe, t.why = true, o.Reason
		}
		if a.r.err == errExpired {
			t.abandoned = true
		}
		if c.again(vctx, t, &o, st) {
			continue
		}
		if a.r.err == errExpired {
			cut := a
			return a.r, o, &cut
		}
		t.settle(&o)
		return a.r, o, nil
	}
}

// attemptOnce makes one attempt, bounded by the call's deadline and the
// tool's attempt bound.
func (c *call) attemptOnce(vctx context.Context, b *handler.Binding, n int, t *tries) (a attempt) {
	end, own := t.deadline, false
	if t.limit > 0 {
		if e := time.Now().Add(t.limit); e.Before(end) {
			end, own = e, true
		}
	}
	actx, cancel := context.WithDeadline(vctx, end)
	defer cancel()
	actx, asp := c.attemptSpan(actx, n)
	defer endAttempt(asp, &a)
	actx, mark := attemptContext(actx, own || !t.callerCut)
	defer func() {
		if !mark.counts && errors.Is(actx.Err(), context.DeadlineExceeded) {
			c.obs.CallerCut = true
		}
	}()
	// cutShort answers how an attempt whose context ended ended: at its
	// own bound (expired), or with the call.
	cutShort := func() {
		if own && errors.Is(actx.Err(), context.DeadlineExceeded) {
			a.expired, a.within = true, t.limit
		} else {
			a.late, a.within = true, t.total
		}
	}
	if c.claim == nil && b.ContextBound() {
		// A read of a handler its deadline stops: run it here, saving the
		// hand-off to a goroutine and back.
		a.r = c.invokeHere(actx, b, n)
		if a.r.err != nil && actx.Err() != nil {
			cutShort()
		}
		return a
	}
	done := make(chan ret, 1)
	unhold := c.handOff()
	go func() {
		defer unhold()
		defer func() {
			if p := recover(); p != nil {
				done <- ret{panic: p}
			}
		}()
		done <- c.runHandler(actx, b, n)
	}()
	select {
	case a.r = <-done:
		// An answer is classified as it stands, even one given as the
		// call's time ran out (a statement rolled back at the deadline
		// says nothing was done); one given at the attempt's own bound is
		// marked so.
		if a.r.err != nil && own && errors.Is(actx.Err(), context.DeadlineExceeded) {
			a.expired, a.within = true, t.limit
		}
		return a
	case <-actx.Done():
	}
	// The invoker stops waiting: the attempt's timeout counts against
	// its breaker now, not when (if ever) the handler returns.
	if errors.Is(actx.Err(), context.DeadlineExceeded) {
		c.timedOutHandler(mark)
	}
	if cutShort(); a.late {
		a.done = done
		return a
	}
	if b.ContextBound() {
		// The handler stops with its context, so its answer says what
		// the attempt did: wait for it, within the call's time.
		wait := time.NewTimer(time.Until(t.deadline))
		defer wait.Stop()
		select {
		case a.r = <-done:
			return a
		case <-wait.C:
		case <-vctx.Done():
		}
		a.expired, a.late, a.done, a.within = false, true, done, t.total
		return a
	}
	a.r, a.done = ret{err: errExpired}, done
	return a
}

// outcome classifies an attempt that failed. An attempt cut at its own
// bound is transient whatever its handler made of it: a read's answers
// timeout, and a write's may have acted, unless its handler answered
// that it did not.
func (c *call) outcome(b *handler.Binding, a *attempt, t *tries) handler.Outcome {
	if a.r.err != errExpired {
		o := b.Classify(a.r.err)
		if !a.expired {
			return o
		}
		switch o.Kind {
		case handler.Release, handler.Held:
			o.Retry = true
			return o
		case handler.Definite:
			return o
		}
	}
	within := a.within.Round(time.Millisecond)
	if !t.writes {
		return handler.Outcome{Kind: handler.Release, Retry: true, Result: toolplane.Fail(toolplane.CodeTimeout,
			fmt.Sprintf("%s did not answer within its attempt time of %v; try again, perhaps with a narrower request", c.tool.Model, within))}
	}
	return handler.Outcome{Kind: handler.Held, Retry: true, Reason: fmt.Sprintf("an attempt was sent and did not answer within its attempt time of %v", within)}
}

// again reports whether the call makes another attempt after one that
// ended in o, and waits the pause before it.
func (c *call) again(vctx context.Context, t *tries, o *handler.Outcome, st *stream) bool {
	switch {
	case !o.Retry || t.made >= t.max:
		return false
	case o.Kind != handler.Release && o.Kind != handler.Held:
		return false
	case t.writes && o.Kind == handler.Held && !t.keyed:
		// The attempt may have acted: only a downstream that knows the
		// key makes a second attempt the same effect.
		return false
	case st.started() || st != nil && t.abandoned:
		// The reader has part of an answer, or may yet get one from an
		// attempt left running: another attempt would stream it again.
		return false
	case !c.passing(o):
		return false
	}
	wait := o.After
	if wait <= 0 {
		wait = jitter(t.exec.PauseCeiling(t.made - 1))
	}
	need := t.limit
	if need == 0 {
		need = minAttempt
	}
	if time.Until(t.deadline) < wait+need {
		// Too little time is left: the call ends on this attempt, and a
		// Retry-After the downstream gave is passed on to the caller.
		return false
	}
	if wait <= 0 {
		return true
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case <-timer.C:
		// The breaker may have opened during the pause.
		return c.passing(o)
	case <-vctx.Done():
		return false // the caller asked the call to stop
	}
}

// passing reports whether the call's breaker still lets calls through, as
// the call is about to attempt its downstream again. A breaker that opened
// since the call was admitted (on this call's failures or others'), and a
// half-open one whose probe this call was (its first attempt decided the
// breaker), say the downstream is failing: the call ends on the attempt
// it made, with the breaker's wait as its retry hint, rather than add its
// remaining attempts to the failing downstream's load.
func (c *call) passing(o *handler.Outcome) bool {
	if c.ticket == nil {
		return true // the protections are off
	}
	ok, wait := c.ticket.Passing()
	if !ok {
		o.After = max(o.After, wait)
	}
	return ok
}

// jitter draws a pause at random from zero to ceiling.
func jitter(ceiling time.Duration) time.Duration {
	if ceiling <= 0 {
		return 0
	}
	return rand.N(ceiling + 1)
}

// settle shapes the outcome the call ends on: the downstream's
// Retry-After goes on a refusal, and any failure after an attempt that
// may have acted (a business one included) leaves the call uncertain.
func (t *tries) settle(o *handler.Outcome) {
	if o.After > 0 && o.Kind == handler.Release && o.Result.Error != nil {
		o.Result.Error.RetryAfter = toolplane.FailAfter(o.Result.Error.Code, "", o.After).Error.RetryAfter
	}
	if !t.maybe || o.Kind == handler.Held {
		return
	}
	// A failure answered after an attempt that may have acted is not the
	// write's answer either: a downstream honouring the key answers a
	// repeat of a request it is still processing with a conflict (409),
	// and some with one for a request already done. Only a person can
	// tell whether the effect happened; the key stays held.
	last := "a platform fault"
	if o.Result.Error != nil {
		last = o.Result.Error.Message
	}
	*o = handler.Outcome{Kind: handler.Held, Quoted: true,
		Reason: t.why + "; a later attempt, with the same key, then ended: " + last}
}
