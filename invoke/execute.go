package invoke

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/registry"
)

// ret is what a handler goroutine hands back.
type ret struct {
	out   any
	err   error
	panic any
	// released is the connection the handler last ran with, when the
	// broker renewed its credential (see runHandler); renewal is the
	// broker's answer when it could not.
	released *toolplane.Released
	renewal  *toolplane.ConnectionError
}

// execute claims the key (for a write or send), runs the handler and ends
// the claim the way its ending requires.
func (c *call) execute(ctx context.Context) (toolplane.Result, error) {
	iv, d := c.iv, &c.tool.Def
	b := c.bound
	switch {
	case b != nil:
	case d.Binding.Handler == nil:
		return toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("%s has no runnable binding in this deployment", c.tool.Model)), nil
	default:
		var ok bool
		if b, ok = iv.cfg.Handlers.Get(d.Binding.Handler.Key); !ok {
			return iv.fault(ctx, "handler "+d.Binding.Handler.Key+" is not registered", d.Name), nil
		}
	}
	c.mark(ctx, stageTraffic)
	if refusal := c.enter(b); refusal != nil {
		return *refusal, nil
	}
	defer c.leave()

	if d.Writes() {
		c.mark(ctx, stageClaim)
		out, cl, err := iv.journal.Claim(ctx, c.request(iv.owner()))
		if err != nil {
			return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, err)
		}
		if out != journal.Claimed {
			r, err, _ := c.answerExisting(ctx, out, cl)
			return r, err
		}
		c.claim = cl
	}

	// A call whose deadline passed since it was decided is refused before
	// dispatch: nothing outside the platform saw it, so its claim is
	// released.
	if c.timeout() <= 0 {
		if c.claim != nil && c.claim.Attempts > 0 {
			// A reclaimed attempt keeps the count of the attempts before
			// it: end the lease rather than forget the row.
			if err := iv.journal.Expire(context.WithoutCancel(ctx), c.claim, c.auditNow(string(toolplane.CodeDeadlineExceeded))); err != nil {
				c.audited = false
				return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, err)
			}
		} else if err := c.release(ctx); err != nil {
			return toolplane.Result{}, err
		}
		return c.lateForDispatch(), nil
	}
	c.mark(ctx, stageDispatch)
	if c.needsRelease() {
		c.mark(ctx, stageCredential)
		if res, err, done := c.releaseConnection(ctx); done {
			return res, err
		}
	}
	// The call's values without its cancellation and deadline, for the
	// dispatch mark and the handler's context below: one context for both.
	detached := context.WithoutCancel(ctx)
	attempt := 1
	if c.claim != nil {
		// The dispatch mark is the last write before the handler: a caller
		// going away must not leave it half done.
		if err := iv.journal.Dispatch(detached, c.claim); err != nil {
			if !errors.Is(err, journal.ErrLeaseLost) {
				_ = c.release(ctx) // nothing was dispatched: free the key
			}
			return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, err)
		}
		attempt = c.claim.Attempts
	}

	// The call's values, without its deadline: each attempt takes its
	// own (see dispatch), within the call's.
	vctx := c.withParent(detached)
	if asked, ok := ctx.Value(cancelKey{}).(context.Context); ok {
		// The caller asked, cooperatively, that the handler stop: unlike
		// the caller leaving, this ends the handler's context.
		var stop context.CancelFunc
		vctx, stop = context.WithCancel(vctx)
		defer stop()
		defer context.AfterFunc(asked, stop)()
	}
	st := c.newStream(ctx)
	if st != nil {
		vctx = handler.WithEmitter(vctx, st.emit)
		defer st.close()
	}
	var readUsage func() handler.Metering
	if d.Metered {
		vctx, readUsage = handler.WithUsage(vctx)
		c.readUsage = readUsage
	}
	t := c.newTries(b, c.timeout())
	// Each attempt has its own span (see attemptOnce).
	c.mark(ctx, stageDispatch)
	r, o, cut := c.dispatch(vctx, b, attempt, &t, st)
	c.audit.Attempts = t.made
	if cut != nil {
		return c.timedOut(ctx, b, cut.done, cut.within)
	}
	if r.panic != nil {
		if t.maybe {
			// An earlier attempt may have acted: the key stays held.
			iv.log.ErrorContext(ctx, "handler panicked after an attempt that may have acted", "tool", d.Name, "panic", fmt.Sprint(r.panic))
			o = handler.Outcome{Kind: handler.Fault}
			t.settle(&o)
			return c.ended(ctx, o, nil)
		}
		if err := c.release(ctx); err != nil {
			return toolplane.Result{}, err
		}
		return toolplane.Result{}, fmt.Errorf("%w: handler %s panicked: %v", ErrFault, b.Key, r.panic)
	}
	if r.err != nil {
		c.refused(ctx, &o, r)
		return c.ended(ctx, o, r.err)
	}
	c.mark(ctx, stageBoundary)
	res, violations := c.tool.Output(r.out)
	if len(violations) > 0 {
		iv.log.ErrorContext(ctx, "tool answered off its output schema", "tool", d.Name, "violations", violations)
	}
	if res.OK && readUsage != nil {
		if r, err, done := c.meter(ctx, &res, readUsage()); done {
			return r, err
		}
	}
	if err := c.complete(ctx, res); err != nil {
		return toolplane.Result{}, err
	}
	return res, nil
}

// meter writes the usage row of a metered call that succeeded, and names
// it in res. When the call cannot be counted (its handler could not price
// it, or the row was not written) the downstream's answer is withheld and
// done is reported with a platform fault instead: the run must never hold
// data its budget did not count. One log line is written per such call;
// the report of its cause is deduplicated (see Invoker.report).
//
// A write's effect happened, so its claim can neither be released (the
// next identical call would act again) nor completed: completing it with
// the answer would hand that same uncounted data to the next identical
// call, and completing it with the fault would store a failure for an
// effect that took place, with nobody asked to look. It is held as an
// uncertain action instead: identical calls answer uncertain and a person
// reconciles it, who can see the effect and its missing usage row.
func (c *call) meter(ctx context.Context, res *toolplane.Result, m handler.Metering) (toolplane.Result, error, bool) {
	iv, d := c.iv, &c.tool.Def
	var cause string
	var err error
	switch {
	case m.Fault != nil:
		cause, err = "a metered call could not be priced", m.Fault
	case !m.Reported:
		iv.log.WarnContext(ctx, "metered tool reported no usage", "tool", d.Name)
		return toolplane.Result{}, nil, false
	default:
		u := &toolplane.Usage{ID: toolplane.NewID("use_"), OrganizationID: c.inv.OrganizationID, RunID: c.inv.RunID,
			RootRunID: c.inv.EffectiveRootRunID(), AgentID: c.inv.AgentID, Tool: d.Name,
			CostCents: m.Cents, Units: m.Units, CreatedAt: iv.now()}
		if err = iv.cfg.Store.InsertUsage(context.WithoutCancel(ctx), u); err == nil {
			res.Meta.UsageID = u.ID
			c.audit.CostCents = u.CostCents
			return toolplane.Result{}, nil, false
		}
		cause = "a usage row was not written"
	}
	r := iv.faultErr(ctx, cause, d.Name, err)
	if c.claim == nil {
		return r, nil, true
	}
	const reason = "the downstream answered, but the call could not be metered: its effect happened and no usage row counts it; check the downstream and the meter, then reconcile"
	if herr := iv.journal.Hold(context.WithoutCancel(ctx), c.claim, reason, c.auditNow(string(toolplane.CodeInternalError))); herr != nil {
		c.audited = false
		return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, herr), true
	}
	if iv.notice != nil {
		iv.notice.CallUncertain(context.WithoutCancel(ctx), c.claim)
	}
	return r, nil, true
}

// needsRelease reports whether the call runs on a connection the broker
// must release: a tool one of the platform's runtimes runs, or a remote
// tool whose server takes a connection's token (its definition declares
// the provider), which the call presents as its own.
func (c *call) needsRelease() bool {
	d := &c.tool.Def
	b := &d.Binding
	return b.Platform() || b.Remote != nil && d.Connection != ""
}

// releaseConnection asks the broker for the call's connection, after the
// claim and before dispatch: nothing was sent yet, so a call refused here
// releases its claim. It reports done with the call's answer when the
// call ends here.
func (c *call) releaseConnection(ctx context.Context) (toolplane.Result, error, bool) {
	rel, err := c.iv.cfg.Broker.Release(ctx, Release{Invocation: c.inv, Tool: &c.tool.Def, Arguments: c.args})
	var ce *toolplane.ConnectionError
	switch {
	case errors.As(err, &ce):
		if err := c.release(ctx); err != nil {
			return toolplane.Result{}, err, true
		}
		res := toolplane.Fail(ce.Code, ce.Message)
		res.Error.AuthorizationURL = ce.AuthorizationURL
		return res, nil, true
	case err != nil:
		if rerr := c.release(ctx); rerr != nil {
			return toolplane.Result{}, rerr, true
		}
		return toolplane.Result{}, fmt.Errorf("%w: release a connection for %s: %v", ErrFault, c.tool.Def.Name, err), true
	}
	c.released = rel
	c.audit.ConnectionID = rel.Connection.ID
	return toolplane.Result{}, nil, false
}

// refused tells the broker of a credential the downstream refused, when
// the handler says so of the connection released for the call (after the
// broker renewed it, if it did), and takes its answer (where the person
// connects again) for the call's. A renewal the broker could not make
// answers the call instead: the refused credential's connection is not
// marked, since the provider, not the person, is what failed.
func (c *call) refused(ctx context.Context, o *handler.Outcome, r ret) {
	var cr *handler.CredentialRefused
	if c.released == nil || !errors.As(r.err, &cr) {
		return
	}
	ce := r.renewal
	if ce == nil {
		rb, ok := c.iv.cfg.Broker.(Refusals)
		if !ok {
			return
		}
		rel := c.released
		if r.released != nil {
			rel = r.released
		}
		ce = rb.Refused(context.WithoutCancel(ctx), Release{Invocation: c.inv, Tool: &c.tool.Def, Arguments: c.args}, rel.Connection)
		if ce == nil {
			return
		}
	}
	res := toolplane.Fail(ce.Code, ce.Message)
	res.Error.AuthorizationURL = ce.AuthorizationURL
	o.Result, o.Quoted = res, false
}

// invokeHere runs the handler on this goroutine, a panic included in its
// answer as on a goroutine of its own.
func (c *call) invokeHere(ctx context.Context, b *handler.Binding, attempt int) (r ret) {
	defer func() {
		if p := recover(); p != nil {
			r = ret{panic: p}
		}
	}()
	return c.runHandler(ctx, b, attempt)
}

// runHandler calls the handler and, when the downstream refused the
// credential released for the call, asks the broker to renew it and calls
// the handler once more with the renewed one. The retry is safe for a
// write too: a refused credential is the downstream's answer before it
// acted (handler.CredentialRefused), so the first call made no effect,
// and the second carries the same key. A second refusal stands.
func (c *call) runHandler(ctx context.Context, b *handler.Binding, attempt int) ret {
	out, err := c.invokeBinding(ctx, b, c.handlerCall(attempt))
	var cr *handler.CredentialRefused
	rb, ok := c.iv.cfg.Broker.(Renewals)
	if err == nil || !ok || c.released == nil || !errors.As(err, &cr) {
		return ret{out: out, err: err}
	}
	rel, rerr := rb.Renew(ctx, Release{Invocation: c.inv, Tool: &c.tool.Def, Arguments: c.args}, c.released)
	var ce *toolplane.ConnectionError
	switch {
	case errors.As(rerr, &ce):
		return ret{err: err, renewal: ce}
	case rerr != nil:
		c.iv.log.WarnContext(ctx, "refused credential not renewed", "tool", c.tool.Def.Name, "connection", c.released.Connection.ID, "err", rerr)
		return ret{out: out, err: err}
	case rel == nil:
		return ret{out: out, err: err}
	}
	call := c.handlerCall(attempt)
	call.Released = rel
	out, err = c.invokeBinding(ctx, b, call)
	return ret{out: out, err: err, released: rel}
}

// invokeBinding runs one attempt of the handler and counts its ending
// against the breaker of its tool and target.
func (c *call) invokeBinding(ctx context.Context, b *handler.Binding, call handler.Call) (any, error) {
	out, err := b.Invoke(ctx, call, c.args)
	c.observe(ctx, b, err)
	return out, err
}

// ended ends a call whose handler answered an error.
func (c *call) ended(ctx context.Context, o handler.Outcome, cause error) (toolplane.Result, error) {
	o.Result = quoting(c.tool, o.Result, o.Quoted)
	if o.Detail != "" {
		// What the model is not told is the operator's: in the log, and
		// as the reason of the call's audit event.
		c.audit.Reason = o.Detail
		conn := ""
		if c.released != nil {
			conn = c.released.Connection.ID
		}
		c.iv.log.WarnContext(ctx, "destination refused by egress", "tool", c.tool.Def.Name, "connection", conn,
			"run", c.inv.RunID, "detail", o.Detail)
	}
	switch o.Kind {
	case handler.Definite:
		if err := c.complete(ctx, o.Result); err != nil {
			return toolplane.Result{}, err
		}
		return o.Result, nil
	case handler.Release:
		if err := c.release(ctx); err != nil {
			return toolplane.Result{}, err
		}
		return o.Result, nil
	case handler.Held:
		if c.claim == nil { // a read takes no claim: nothing to hold
			res := toolplane.Fail(toolplane.CodeUncertain, fmt.Sprintf("%s could not tell whether its call took effect: %s", c.tool.Model, o.Reason))
			return quoting(c.tool, res, o.Quoted), nil
		}
		if err := c.hold(ctx, o.Reason); err != nil {
			return toolplane.Result{}, err
		}
		return uncertainResult(c.tool, o.Reason), nil
	}
	if err := c.release(ctx); err != nil {
		return toolplane.Result{}, err
	}
	return toolplane.Result{}, fmt.Errorf("%w: %s: %w", ErrFault, c.tool.Def.Name, cause)
}

// timedOut ends a call whose handler ran past its time, or past within,
// the bound of its last attempt. A read answers timeout. A write may have
// acted: it becomes an uncertain action, unless the tool is safe to
// replay and has attempts left, in which case its lease is ended so the
// next identical call runs it again.
func (c *call) timedOut(ctx context.Context, b *handler.Binding, done <-chan ret, within time.Duration) (toolplane.Result, error) {
	iv, d := c.iv, &c.tool.Def
	if c.claim == nil {
		return toolplane.Fail(toolplane.CodeTimeout, fmt.Sprintf("%s did not answer in time; try again, perhaps with a narrower request", c.tool.Model)), nil
	}
	bg := context.WithoutCancel(ctx)
	if d.Replay != nil && c.claim.Attempts < d.Replay.MaxAttempts {
		if err := iv.journal.Expire(bg, c.claim, c.auditNow(string(toolplane.CodeTimeout))); err != nil {
			c.audited = false
			return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, err)
		}
		return toolplane.Fail(toolplane.CodeTimeout, fmt.Sprintf("%s did not answer in time; it is safe to call again with the same arguments", c.tool.Model)), nil
	}
	reason := fmt.Sprintf("the call was sent and did not answer within %v", within.Round(time.Millisecond))
	if err := c.hold(bg, reason); err != nil {
		return toolplane.Result{}, err
	}
	if w := b.SettleWithin(); w > 0 {
		iv.settling.Add(1)
		go c.settleLate(bg, b, done, w)
	}
	return uncertainResult(c.tool, reason), nil
}

// settleLate waits for a stopped handler that may still settle its call.
func (c *call) settleLate(ctx context.Context, b *handler.Binding, done <-chan ret, within time.Duration) {
	defer c.iv.settling.Done()
	timer := time.NewTimer(within)
	defer timer.Stop()
	var r ret
	select {
	case r = <-done:
	case <-timer.C:
		c.iv.log.WarnContext(ctx, "stopped handler did not settle; the action stays uncertain", "tool", c.tool.Def.Name, "key", c.key)
		return
	}
	var res toolplane.Result
	switch {
	case r.panic != nil:
		return
	case r.err != nil:
		o := b.Classify(r.err)
		switch o.Kind {
		case handler.Definite:
			res = quoting(c.tool, o.Result, o.Quoted)
		case handler.Release:
			// It made no effect: like a retryable failure in time, it is not
			// remembered, and the next identical call runs afresh.
			ev := c.iv.settlementEvent(c.inv.OrganizationID, c.tool, "settled_released", toolplane.SourceSettlement, "settlement")
			ev.Reason = "the handler stopped at its timeout later failed without effect"
			if err := c.iv.journal.Drop(ctx, c.inv.OrganizationID, c.tool.Def.Name, c.key, ev); err != nil {
				c.iv.log.ErrorContext(ctx, "late settlement refused", "tool", c.tool.Def.Name, "key", c.key, "err", err)
			}
			return
		default:
			return // still uncertain, or a fault: a person reconciles
		}
	default:
		res, _ = c.tool.Output(r.out)
	}
	const note = "settled by the handler after it was stopped"
	ev := c.iv.settlementEvent(c.inv.OrganizationID, c.tool, "settled", toolplane.SourceSettlement, "settlement")
	ev.Reason = note
	if res.OK && c.readUsage != nil {
		cents, counted := c.lateUsage(ctx)
		if !counted {
			// Settled, its answer would be handed to the next identical
			// call uncounted: it stays uncertain, for a person.
			return
		}
		ev.CostCents = cents
	}
	rendered := boundary.Render(res)
	ev.OutputHash = outputHash(rendered)
	if _, err := c.iv.journal.Settle(ctx, c.inv.OrganizationID, c.tool.Def.Name, c.key, rendered, "settlement", note, ev); err != nil {
		c.iv.log.ErrorContext(ctx, "late settlement refused", "tool", c.tool.Def.Name, "key", c.key, "err", err)
	}
}

// lateUsage writes the usage row of a metered call whose handler answered
// after its timeout, as meter does for one in time, and answers its cost
// and whether the call is counted: an answer its handler could not price,
// or whose row could not be written, is not (the fault reported as
// meter's is).
func (c *call) lateUsage(ctx context.Context) (int64, bool) {
	iv, d := c.iv, &c.tool.Def
	m := c.readUsage()
	var cause string
	var err error
	switch {
	case m.Fault != nil:
		cause, err = "a metered call could not be priced", m.Fault
	case !m.Reported:
		iv.log.WarnContext(ctx, "metered tool reported no usage", "tool", d.Name)
		return 0, true
	default:
		u := &toolplane.Usage{ID: toolplane.NewID("use_"), OrganizationID: c.inv.OrganizationID, RunID: c.inv.RunID,
			RootRunID: c.inv.EffectiveRootRunID(), AgentID: c.inv.AgentID, Tool: d.Name,
			CostCents: m.Cents, Units: m.Units, CreatedAt: iv.now()}
		if err = iv.cfg.Store.InsertUsage(context.WithoutCancel(ctx), u); err == nil {
			return u.CostCents, true
		}
		cause = "a usage row was not written"
	}
	iv.faultErr(ctx, cause, d.Name, err)
	return 0, false
}

// quoting labels res untrusted when its message quotes the handler
// (quoted) of a tool whose answers come from outside the platform: the
// text of a remote server's error is as much outside content as its
// answers, and the model must read it as such.
func quoting(t *registry.Tool, res toolplane.Result, quoted bool) toolplane.Result {
	if quoted && t.Def.Untrusted() {
		res.Meta.Untrusted = true
	}
	return res
}

// settlementEvent answers the audit event of how an uncertain action
// ended (a reconciliation): who settled it (a person, or the handler
// itself) and with what. The journal stores it with the settlement,
// filling in what the claim knows of the call (run, key, arguments hash,
// agent, tenant, step). Its subject is the tool whose action it settles.
func (iv *Invoker) settlementEvent(org string, t *registry.Tool, outcome string, source toolplane.Source, by string) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{
		ID: toolplane.NewID("aud_"), OrganizationID: org, Kind: toolplane.AuditReconciliation, Subject: t.Def.Name,
		Tool: t.Def.Name, ToolVersion: t.Def.Version, Effect: t.Def.Effect, Destructive: t.Def.Annotations.Destructive,
		Source: source, Outcome: outcome, PrincipalID: by, CreatedAt: iv.now(),
	}
}

// complete stores a stable answer on the claim, with the call's audit
// event in the same transaction.
func (c *call) complete(ctx context.Context, res toolplane.Result) error {
	if c.claim == nil {
		return nil
	}
	c.mark(ctx, stageComplete)
	rendered := boundary.Render(res)
	c.audit.OutputHash = outputHash(rendered)
	if err := c.iv.journal.Complete(context.WithoutCancel(ctx), c.claim, rendered, c.auditNow(outcomeOf(res))); err != nil {
		c.audited = false
		return fmt.Errorf("%w: %v", ErrFault, err)
	}
	return nil
}

// hold makes the claim an uncertain action, with the call's audit event in
// the same transaction.
func (c *call) hold(ctx context.Context, reason string) error {
	if err := c.iv.journal.Hold(context.WithoutCancel(ctx), c.claim, reason, c.auditNow(string(toolplane.CodeUncertain))); err != nil {
		c.audited = false
		return fmt.Errorf("%w: %v", ErrFault, err)
	}
	if c.iv.notice != nil {
		c.iv.notice.CallUncertain(context.WithoutCancel(ctx), c.claim)
	}
	return nil
}

func outcomeOf(res toolplane.Result) string {
	if !res.OK && res.Error != nil {
		return string(res.Error.Code)
	}
	return "ok"
}

// release drops the claim: nothing happened.
func (c *call) release(ctx context.Context) error {
	if c.claim == nil {
		return nil
	}
	if err := c.iv.journal.Release(context.WithoutCancel(ctx), c.claim); err != nil && !errors.Is(err, journal.ErrLeaseLost) {
		return fmt.Errorf("%w: %v", ErrFault, err)
	}
	return nil
}
