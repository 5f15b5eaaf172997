package invoke

import (
	"context"
	"errors"
	"sync/atomic"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/resilience"
)

// enter asks the node's traffic protections (Config.Traffic) whether the
// call may run, before anything is claimed, released or dispatched: a call
// refused here touched nothing, and its answer is the refusal, with when
// to try again. An admitted call holds a ticket the call gives back on
// every ending (see leave and handOff).
func (c *call) enter(b *handler.Binding) *toolplane.Result {
	tr := c.iv.cfg.Traffic
	if tr == nil {
		return nil
	}
	d, inv := &c.tool.Def, c.inv
	req := resilience.Request{Organization: inv.OrganizationID, Agent: inv.AgentID, Tool: d.Name, Target: b.Target(),
		Priority: toolplane.PriorityNormal}
	if req.Agent == "" {
		req.Agent = "principal:" + inv.Principal.ID
	}
	if e := d.Execution; e != nil {
		req.ToolMaxInFlight = e.MaxInFlight
		if e.Priority != "" {
			req.Priority = e.Priority
		}
	}
	tk, ref := tr.Admit(req)
	if ref != nil {
		c.audit.Reason = ref.Reason
		r := toolplane.FailAfter(ref.Code, ref.Message(c.tool.Model), ref.Wait)
		return &r
	}
	c.ticket = tk
	c.holds.Store(1) // the call's own, until it answers (leave)
	return nil
}

// leave gives back the call's hold on the protections as it answers: the
// caller's slots always, the downstream's unless a handler goroutine still
// running holds them (handOff).
func (c *call) leave() {
	if c.ticket == nil {
		return
	}
	c.ticket.EndCall()
	c.unhold()
}

// handOff gives a goroutine about to run the handler a hold on the
// downstream's slots, which the func answered gives back when the handler
// returns: a handler still running past its attempt's bound or the call's
// timeout still holds its downstream, and the caps count it until it
// ends, however many attempts the call made meanwhile.
func (c *call) handOff() func() {
	if c.ticket == nil {
		return func() {}
	}
	c.holds.Add(1)
	return c.unhold
}

// unhold ends one hold on the downstream's slots, and gives them back
// with the last.
func (c *call) unhold() {
	if c.holds.Add(-1) == 0 {
		c.ticket.EndWork()
	}
}

// attemptMark is one attempt's, in its context: whether its timeout was
// counted against the breaker yet, by the invoker when it stopped
// waiting (timedOutHandler) or by the handler's own return (observe),
// whichever came first; and whether a timeout of it counts at all.
type attemptMark struct {
	counted atomic.Bool
	// counts is unset when the attempt's end was set by the call's caller
	// (a deadline it passed, or the time its parent call had left) rather
	// than by the tool's own timeout or attempt bound: running out of a
	// caller's short time says nothing of the downstream, and one agent's
	// tight deadlines must not open a breaker every caller shares.
	counts bool
}

type attemptKey struct{}

// attemptContext answers ctx marked as one attempt's.
func attemptContext(ctx context.Context, counts bool) (context.Context, *attemptMark) {
	m := &attemptMark{counts: counts}
	return context.WithValue(ctx, attemptKey{}, m), m
}

// observe counts one handler attempt's ending against the breaker of the
// tool and its target: a failure when the downstream could not be reached,
// failed retryably (a 5xx, unavailable) or did not answer in time; a
// success when it answered, a business failure included; nothing for a
// refusal (the egress policy, a refused credential), a cancellation, or an
// ending the downstream did not decide.
func (c *call) observe(ctx context.Context, b *handler.Binding, err error) {
	if c.ticket == nil {
		return
	}
	o := outcome(b, err, ctx)
	if m, ok := ctx.Value(attemptKey{}).(*attemptMark); ok && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		if !m.counts || !m.counted.CompareAndSwap(false, true) {
			// The caller's own time ran out, or the invoker counted the
			// timeout when it stopped waiting (timedOutHandler).
			return
		}
	}
	c.ticket.Record(o)
}

// timedOutHandler counts a handler the invoker stopped waiting for at its
// timeout, at once: a handler that ignores its context may return much
// later, or never, and its breaker must not wait for it. Whichever of this
// and the handler's own return (observe) sees the timeout first counts it,
// once.
func (c *call) timedOutHandler(m *attemptMark) {
	if c.ticket != nil && m.counts && m.counted.CompareAndSwap(false, true) {
		c.ticket.Record(resilience.Failure)
	}
}

// outcome classifies one attempt's ending for a breaker.
func outcome(b *handler.Binding, err error, ctx context.Context) resilience.Outcome {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return resilience.Failure
	case ctx.Err() != nil:
		return resilience.Neutral // the caller asked it to stop
	case err == nil:
		return resilience.Success
	}
	var dest *handler.DestinationRefused
	if errors.As(err, &dest) {
		return resilience.Neutral // the egress policy refused it: nothing was sent
	}
	var cred *handler.CredentialRefused
	if errors.As(err, &cred) {
		// The downstream answered, refusing the credential it was sent:
		// the connection needs a person, the downstream is not failing
		// (a runtime may classify the refusal as unavailable for the
		// model, which must not open the breaker of every caller).
		return resilience.Neutral
	}
	o := b.Classify(err)
	if o.Answered {
		return resilience.Success // the downstream answered, refusing
	}
	switch o.Kind {
	case handler.Definite:
		return resilience.Success
	case handler.Release:
		if o.Result.Error != nil {
			switch o.Result.Error.Code {
			case toolplane.CodeUnavailable, toolplane.CodeRetryableUpstream, toolplane.CodeTimeout:
				return resilience.Failure
			}
		}
	}
	return resilience.Neutral
}

// Breakers answers the circuit breakers of org's tool on this node, one
// per downstream target it has called, and how many of its calls run here
// now; none when the node's protections are off. Each node keeps its own:
// another node may see the same downstream otherwise.
func (iv *Invoker) Breakers(org, tool string) ([]resilience.BreakerView, int) {
	tr := iv.cfg.Traffic
	if tr == nil {
		return nil, 0
	}
	return tr.Breakers(org, tool), tr.ToolInFlight(org, tool)
}

// Protected reports whether the node's traffic protections are on.
func (iv *Invoker) Protected() bool { return iv.cfg.Traffic != nil }
