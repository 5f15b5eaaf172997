package invoke

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/canonical"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/resilience"
	"github.com/toolplane/toolplane/schema"
	"github.com/toolplane/toolplane/tracectx"
)

// call is the state of one invocation on its way down the path.
type call struct {
	// readUsage reads what a metered call's handler reported of its cost
	// (nil for a tool not metered), also after a late settlement.
	readUsage func() handler.Metering
	iv        *Invoker
	start     time.Time
	span      trace.Span
	name      string
	inv       *toolplane.Invocation
	tool      *registry.Tool
	// argsIn are the model's arguments; args the validated, coerced ones
	// every later step sees and hashes.
	argsIn any
	args   any
	hash   string
	key    string
	claim  *toolplane.Claim
	// bound is the binding of a tool served by a remote server, or run by
	// one of the platform's runtimes, found when the call resolved the
	// tool.
	bound *handler.Binding
	// released is the connection the broker released for the call.
	released *toolplane.Released
	audit    toolplane.AuditEvent
	// audited is set once the audit event was stored with the claim's
	// answer, in one transaction.
	audited bool
	// argsAudited is set once the event says what it keeps of the
	// arguments (auditInput).
	argsAudited bool
	// ignored says why the call's authorized_by did not authorize it, for
	// the approval-required answer.
	ignored string
	// asked holds the one tool a fresh call from a door asks for: the
	// principal's Tools, without an allocation of their own.
	asked [1]string
	// decision is the policy's answer: its rule and approval route reach
	// the approval filed.
	decision policy.Decision
	// ticket is the call's hold on the node's traffic protections (nil
	// when they are off). holds counts what keeps the downstream's part
	// of it: the call itself until it answers, and each handler goroutine
	// still running (an attempt left past its bound included); the part
	// is given back when the last of them ends.
	ticket *resilience.Ticket
	holds  atomic.Int32

	// stageSpan is the span of the stage the call is in (see mark), nil
	// when none is open or the call is not recorded.
	stageSpan trace.Span
	// obs is what the Observer is told of the call, its stage times
	// gathered by lap: in is the stage the call is in since lapped.
	obs    Observation
	lapped time.Time
	in     PathStage
}

// Invoke runs one call of the tool named name (its platform name) with the
// model's arguments (plain JSON values, as decoded with json.Number).
//
// An identifier past its bound (toolplane.Invocation.Check) answers an
// error wrapping a *toolplane.TooLongError, before anything is recorded: a
// door translates it as the caller's bad request.
//
// Made with the context a handler was given (a tool calling another tool),
// the call is the handler's call's child, and inv may be nil: see
// Invoker.nested.
func (iv *Invoker) Invoke(ctx context.Context, name string, args any, inv *toolplane.Invocation) (toolplane.Result, error) {
	ctx, inv, err := iv.nested(ctx, name, inv)
	if err != nil {
		return toolplane.Result{}, err
	}
	if err := inv.Check(name); err != nil {
		return toolplane.Result{}, fmt.Errorf("invoke: %w", err)
	}
	return iv.invoke(ctx, name, args, inv)
}

// invoke runs a call whose invocation passed its Check.
func (iv *Invoker) invoke(ctx context.Context, name string, args any, inv *toolplane.Invocation) (toolplane.Result, error) {
	ctx, c := iv.begin(ctx, name, args, inv)
	res, err := c.run(ctx)
	c.finish(ctx, res, err)
	return res, err
}

// InvokeJSON decodes a JSON argument text and runs the call; text that is
// not JSON answers invalid_input like any other bad argument, with its own
// span and audit event.
func (iv *Invoker) InvokeJSON(ctx context.Context, name string, raw []byte, inv *toolplane.Invocation) (toolplane.Result, error) {
	ctx, inv, err := iv.nested(ctx, name, inv)
	if err != nil {
		return toolplane.Result{}, err
	}
	if err := inv.Check(name); err != nil {
		return toolplane.Result{}, fmt.Errorf("invoke: %w", err)
	}
	args, refusal := registry.DecodeArguments(raw)
	if refusal != nil {
		ctx, c := iv.begin(ctx, name, nil, inv)
		c.finish(ctx, *refusal, nil)
		return *refusal, nil
	}
	return iv.invoke(ctx, name, args, inv)
}

// internalSpan is the option every call's span starts with, made once
// rather than boxed anew on every call.
var internalSpan = trace.WithSpanKind(trace.SpanKindInternal)

// begin opens the call's span, before any checkpoint so a refused call is
// in the tree, and starts its audit event.
func (iv *Invoker) begin(ctx context.Context, name string, args any, inv *toolplane.Invocation) (context.Context, *call) {
	c := &call{iv: iv, start: iv.now(), name: name, inv: inv, argsIn: args}
	ctx = storedTrace(ctx, inv)
	spanName := ""
	if !iv.untraced {
		// Made only for a tracer that may keep it: a call's name is
		// otherwise one allocation of every call read by nobody.
		spanName = "tool " + name
	}
	ctx, c.span = iv.tracer.Start(ctx, spanName, internalSpan)
	if c.span.IsRecording() {
		c.span.SetAttributes(
			attribute.String("tool.name", name),
			attribute.String("toolplane.organization", inv.OrganizationID),
			attribute.String("toolplane.run", inv.RunID),
			attribute.String("toolplane.step_path", inv.StepPath),
			attribute.String("toolplane.source", string(inv.Source)),
		)
	}
	c.audit = toolplane.AuditEvent{
		OrganizationID: inv.OrganizationID, RunID: inv.RunID, AgentID: inv.AgentID,
		PrincipalID: inv.Principal.ID, UserID: inv.UserID, Tool: name,
		Source: inv.Source, AuthorizedBy: inv.AuthorizedBy, ParentID: inv.ParentID,
		TenantID: inv.TenantID, StepPath: inv.StepPath, KeyID: inv.CredentialID,
		// Known from the start: a tool this call's handler calls names
		// it as its parent.
		ID: toolplane.NewID("aud_"),
	}
	return ctx, c
}

// spanArgs marks the span with the hash of the validated arguments, the
// one the audit event names for a write: a trace and the audit trail meet
// on it. The arguments themselves are never on a span. Redaction finds a
// credential by its key's name or its shape, and an argument may hold one
// that has neither (a connection's password pasted into a free-text
// field); the audit trail keeps only the hash for the same reason.
func (c *call) spanArgs(args any) {
	if !c.span.IsRecording() {
		// Hashing walks the arguments; a span nobody records (no tracer,
		// or one that sampled this call out) would discard it.
		return
	}
	h := c.hash
	if h == "" {
		var err error
		if h, err = canonical.Hash(args); err != nil {
			return
		}
	}
	c.span.SetAttributes(attribute.String("tool.arguments_hash", h))
}

// resolvers answers the resolvers of a tool's facts: the invoker's own
// (Config.Facts) and those the compiled-in handlers registered with them.
func (iv *Invoker) resolvers(d *toolplane.Definition) policy.Facts {
	if len(d.PolicyFacts) == 0 {
		return nil
	}
	out := iv.cfg.Handlers.Facts()
	for name, r := range iv.cfg.Facts {
		out[name] = r
	}
	return out
}

// maxSpanFacts bounds the facts a span carries.
const maxSpanFacts = 4 << 10

// spanFacts renders the resolved facts for the span: redacted by the
// credential rule, and with every value the tool's input schema marks
// x-sensitive (which a resolver may have echoed) replaced, then bounded.
func spanFacts(facts map[string]any, tool *registry.Tool, args any) string {
	v := boundary.Redact(boundary.Normalize(facts))
	v = boundary.Hide(v, schema.SensitiveValues(args, tool.Input().Sensitive()))
	v, _ = boundary.Bound(v, maxSpanFacts)
	return string(boundary.Encode(nil, v))
}

// run runs the call and, when the version called is deprecated, says so
// on its answer.
func (c *call) run(ctx context.Context) (toolplane.Result, error) {
	res, err := c.runVersion(ctx)
	if t := c.tool; err == nil && t != nil && t.State == toolplane.StateDeprecated {
		res.Meta.DeprecationWarning = t.DeprecationWarning()
	}
	return res, err
}

// resolve answers the version of the tool the call names that the caller
// is given, of those its organization is served: the one its grant pins it
// to, or the default one.
func (c *call) resolve() (*registry.Tool, *toolplane.Result) {
	reg, inv := c.iv.cfg.Registry, c.inv
	org := inv.OrganizationID
	if rng, pinned := inv.Principal.Pins[c.name]; pinned {
		if t, ok := reg.Resolve(org, c.name, rng); ok {
			return t, nil
		}
		if _, exists := reg.Get(org, c.name); exists {
			r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("no version of %s within %s, the range you were granted, can be called now; use only the tools you were given", c.name, rng))
			return nil, &r
		}
	} else if t, ok := reg.Get(org, c.name); ok {
		return t, nil
	}
	r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("no tool named %s is available; use only the tools you were given", c.name))
	return nil, &r
}

// admit runs the checks that need nothing recorded: the caller's live
// principal, the tool at the version it is given, run or key, the
// binding's presence, the frozen contract, and the arguments against the
// schema. It leaves c.tool and c.args set when the call may go on; a
// refusal is the call's answer, an error the door's.
func (c *call) admit(ctx context.Context) (*toolplane.Result, error) {
	iv, inv := c.iv, c.inv
	if inv.Credential != nil {
		c.asked[0] = c.name
		if err := iv.callerPrincipal(ctx, c.asked[:], inv); err != nil {
			return nil, err
		}
	}
	tool, refusal := c.resolve()
	if refusal != nil {
		return refusal, nil
	}
	c.tool = tool
	d := &tool.Def
	if inv.RunID == "" && (d.Metered || (d.Writes() && inv.IdempotencyKey == "")) {
		err := &RunRequiredError{Tool: d.Name, Metered: d.Metered}
		if inv.Credential != nil {
			// A caller from outside sent a malformed request: its door
			// tells it which field to add.
			return nil, err
		}
		// An in-process call site that names no run is a defect of the
		// code making the call, reported as one.
		r := iv.fault(ctx, err.Error(), d.Name)
		return &r, nil
	}
	// What the version declared when the call was decided: the trail
	// answers "destructive calls" whatever the catalogue says later.
	c.audit.ToolVersion, c.audit.Effect, c.audit.Destructive = d.Version, d.Effect, d.Annotations.Destructive
	c.span.SetAttributes(attribute.String("tool.version", d.Version), attribute.String("tool.model_name", tool.Model))
	if rb := d.Binding.Remote; rb != nil {
		if refusal := c.resolveRemote(rb); refusal != nil {
			return refusal, nil
		}
	}
	if d.Binding.Platform() {
		if refusal := c.resolveRuntime(); refusal != nil {
			return refusal, nil
		}
	}
	if want, frozen := inv.Contracts[d.Name]; frozen && want != d.SchemaHash {
		r := toolplane.Fail(toolplane.CodeToolChanged, fmt.Sprintf("%s changed after this run was shown its contract; the call was not sent. Finish without it, or start a new run to use the new contract.", tool.Model))
		return &r, nil
	}
	args, _, refusal := tool.Arguments(c.argsIn)
	if refusal != nil {
		return refusal, nil
	}
	if refusal := tool.CheckBatch(args); refusal != nil {
		return refusal, nil
	}
	c.args = args
	c.spanArgs(args)
	return nil, nil
}

func (c *call) runVersion(ctx context.Context) (toolplane.Result, error) {
	if refusal := c.hops(); refusal != nil {
		return *refusal, nil
	}
	iv, inv := c.iv, c.inv
	c.mark(ctx, stageValidate)
	if refusal, err := c.admit(ctx); refusal != nil || err != nil {
		if refusal != nil {
			return *refusal, nil
		}
		return toolplane.Result{}, err
	}
	tool, d, args := c.tool, &c.tool.Def, c.args

	if d.Writes() {
		if iv.journal == nil {
			return iv.fault(ctx, "a write or send tool reached no idempotency journal", d.Name), nil
		}
		if err := c.identify(); err != nil {
			return toolplane.Result{}, err
		}
		c.mark(ctx, stageJournal)
		out, cl, err := iv.journal.Read(ctx, c.request(""))
		if err != nil {
			return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, err)
		}
		if r, err, done := c.answerExisting(ctx, out, cl); done {
			return r, err
		}
	}
	// After the journal: a client repeating a write already answered
	// (after a crash, a lost answer) is answered from the journal and
	// spends no rate, as it spends no request budget at the door.
	c.mark(ctx, stageLimit)
	if refusal := c.limit(ctx); refusal != nil {
		return *refusal, nil
	}
	if refusal := c.inTime(); refusal != nil {
		return *refusal, nil
	}

	// authorized_by: an approval covering this call decides the approval
	// step only; so does an approval of the same call by the same agent in
	// another run (a session per call), which the call then becomes. One
	// covering another call is ignored, and the answer says why.
	approved := false
	if inv.AuthorizedBy != "" && iv.cfg.Approvals != nil {
		c.mark(ctx, stageApproval)
		// A read has no key yet; an approval of it names one all the same.
		if err := c.identify(); err != nil {
			return toolplane.Result{}, err
		}
		a, err := iv.cfg.Approvals.Find(ctx, inv.OrganizationID, inv.AuthorizedBy)
		switch {
		case errors.Is(err, toolplane.ErrNotFound):
			c.ignored = fmt.Sprintf("no approval %s exists in this organization", inv.AuthorizedBy)
		case err != nil:
			return toolplane.Result{}, fmt.Errorf("%w: read approval %s: %v", ErrFault, inv.AuthorizedBy, err)
		case approval.Covers(a, inv.OrganizationID, d.Name, c.hash, c.key):
			switch a.Status {
			case toolplane.ApprovalApproved:
				c.approvedBy(a)
				if r := approvedElsewhere(tool, a); r != nil {
					return *r, nil
				}
				approved = true
			case toolplane.ApprovalRejected:
				c.audit.ApprovalID = a.ID
				return rejected(tool, a), nil
			case toolplane.ApprovalExpired:
				_, c.ignored = iv.cfg.Approvals.Offered(a)
			}
		default:
			if why := approval.Mismatch(a, inv, d.Name, c.hash); why != "" {
				c.ignored = why
				break
			}
			if ok, why := iv.cfg.Approvals.Offered(a); !ok {
				c.ignored = why
				break
			}
			if a.Status == toolplane.ApprovalPending {
				// The same call waits for that approval: it is not filed
				// again under this run.
				c.audit.ApprovalID = a.ID
				return toolplane.Result{}, &ApprovalRequired{ID: a.ID, ExpiresAt: a.ExpiresAt, Preview: a.Preview, Existing: true}
			}
			if r := approvedElsewhere(tool, a); r != nil && a.Status == toolplane.ApprovalApproved {
				c.approvedBy(a)
				return *r, nil
			}
			if r, err, done := c.adopt(ctx, a); done {
				return r, err
			}
			approved = true
		}
	}

	c.mark(ctx, stagePolicy)
	facts, err := iv.resolvers(d).ResolveWithin(ctx, iv.cfg.FactTimeout, inv, d, args)
	if err != nil {
		// Neither an allow nor a denial: the call is not decided, and
		// nothing (no claim, no approval, no effect) is left behind.
		iv.log.ErrorContext(ctx, "policy fact could not be resolved", "tool", d.Name, "err", err)
		c.span.RecordError(err)
		r := toolplane.Fail(toolplane.CodeInternalError, "the platform could not establish what it needs to decide this call; nothing was done, and it has been reported")
		r.Stop = toolplane.StopFault
		return r, nil
	}
	if len(facts) > 0 && c.span.IsRecording() {
		c.span.SetAttributes(attribute.String("policy.facts", spanFacts(facts, tool, args)))
	}
	dec, err := iv.cfg.Policy.Decide(ctx, policy.Input{Invocation: inv, Tool: d, Arguments: args, Facts: facts, Sensitive: tool.Input().Sensitive()})
	if err != nil {
		iv.log.ErrorContext(ctx, "policy could not decide", "tool", d.Name, "err", err)
		r := toolplane.Fail(toolplane.CodeInternalError, "the platform could not decide this call; it has been reported")
		r.Stop = toolplane.StopFault
		return r, nil
	}
	if reason := movesTheToolsApproval(d, dec); reason != "" {
		dec.Effect, dec.Reason, dec.Approval = policy.Deny, reason, nil
	}
	c.decision = dec
	c.audit.PolicyDecision, c.audit.PolicyBundle, c.audit.PolicyRule, c.audit.PolicyDegraded = dec.Effect.String(), dec.Bundle, dec.Rule, dec.Degraded
	if dec.Input != "" {
		c.audit.PolicyInput = json.RawMessage(dec.Input)
	}
	c.span.SetAttributes(attribute.String("policy.decision", dec.Effect.String()), attribute.String("policy.reason", dec.Reason))
	if dec.Bundle > 0 || dec.Degraded {
		c.span.SetAttributes(attribute.Int64("policy.bundle", dec.Bundle), attribute.String("policy.rule", dec.Rule), attribute.Bool("policy.degraded", dec.Degraded))
	}
	switch dec.Effect {
	case policy.Deny:
		return toolplane.Fail(toolplane.CodeDenied, fmt.Sprintf("%s is not allowed for this caller: %s. Do not retry it; choose another way or tell the user.", tool.Model, dec.Reason)), nil
	case policy.RequireApproval:
		if !approved {
			c.mark(ctx, stageApproval)
			if r, proceed, err := c.fileApproval(ctx); !proceed {
				return r, err
			}
		}
	}
	if d.Metered {
		c.mark(ctx, stageMeter)
		if r, stop := c.accrue(ctx); stop {
			return r, nil
		}
	}
	if refusal := c.inTime(); refusal != nil {
		return *refusal, nil
	}
	return c.execute(ctx)
}

// approvedElsewhere answers tool_changed when approval a was given for
// another version of the tool than the one the call resolved to (a version
// published, or a pin moved, while the approval waited): a person approved
// that version's call, not this one's, which may differ in handler,
// meaning or effect. nil when a approves this version, or names none (an
// approval filed before versions were recorded).
func approvedElsewhere(tool *registry.Tool, a *toolplane.Approval) *toolplane.Result {
	if a.ToolVersion == "" || a.ToolVersion == tool.Def.Version {
		return nil
	}
	r := toolplane.Fail(toolplane.CodeToolChanged, fmt.Sprintf("%s was approved at version %s, and %s is what would run now; the call was not sent. Ask again without authorized_by to have this version approved.",
		tool.Model, a.ToolVersion, tool.Def.Version))
	return &r
}

// request answers the journal request of the call.
func (c *call) request(owner string) journal.Request {
	d := &c.tool.Def
	max := 1
	if d.Replay != nil {
		max = d.Replay.MaxAttempts
	}
	req := journal.Request{
		OrganizationID: c.inv.OrganizationID, Tool: d.Name, Key: c.key, RequestHash: c.hash,
		MaxAttempts: max, Owner: owner, Lease: c.timeout() + c.iv.cfg.LeaseMargin,
		RunID: c.inv.RunID, StepPath: c.inv.StepPath, Node: c.iv.cfg.Node,
	}
	if owner != "" { // a claim is taken: record what a replay needs
		req.Arguments, _ = canonical.Marshal(c.args)
		if d.Replay != nil {
			req.Invocation, _ = json.Marshal(c.inv)
		} else {
			// Only who called: what the audit event of a state reached
			// without the caller (a sweep, a takeover) says of the call.
			req.Invocation, _ = json.Marshal(toolplane.Invocation{
				OrganizationID: c.inv.OrganizationID, UserID: c.inv.UserID, RunID: c.inv.RunID,
				AgentID: c.inv.AgentID, StepPath: c.inv.StepPath, Principal: toolplane.Principal{ID: c.inv.Principal.ID},
				Source: c.inv.Source, TenantID: c.inv.TenantID, CredentialID: c.inv.CredentialID,
			})
		}
	}
	return req
}

// answerExisting answers a call whose key the journal already holds.
func (c *call) answerExisting(ctx context.Context, out journal.Outcome, cl *toolplane.Claim) (toolplane.Result, error, bool) {
	switch out {
	case journal.Completed:
		r, err := decodeResult(cl.Result)
		if err != nil {
			return toolplane.Result{}, fmt.Errorf("%w: stored result of %s: %v", ErrFault, c.key, err), true
		}
		r.Meta.Replayed, r.Meta.Repeat = true, true
		return r, nil, true
	case journal.Processing:
		h := c.iv.journal.Holder(ctx, cl)
		return toolplane.Result{}, &InFlightError{Tool: c.tool.Def.Name, Key: c.key, SilentSince: h.SilentSince, DecidedBy: h.DecidedBy, Now: c.iv.now()}, true
	case journal.Conflict:
		return toolplane.Fail(toolplane.CodeConflict, "this idempotency key was already used with different arguments; use a new key for a different request"), nil, true
	case journal.Uncertain:
		r := uncertainResult(c.tool, cl.Reason)
		r.Meta.Repeat = true
		return r, nil, true
	}
	return toolplane.Result{}, nil, false
}

func uncertainResult(t *registry.Tool, reason string) toolplane.Result {
	msg := fmt.Sprintf("an earlier identical call of %s may or may not have taken effect", t.Model)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	msg += "; it is waiting for a person to confirm what happened. Do not repeat it, and do not report it as done or as failed."
	// The reason may be the handler's, and so the remote server's: a
	// stored one cannot say whose it was, so it is labelled whenever
	// the tool's answers come from outside.
	return quoting(t, toolplane.Fail(toolplane.CodeUncertain, msg), reason != "")
}

func rejected(t *registry.Tool, a *toolplane.Approval) toolplane.Result {
	msg := fmt.Sprintf("a person rejected this %s call", t.Model)
	if a.Reason != "" {
		msg += ": " + a.Reason
	}
	return toolplane.Fail(toolplane.CodeRejected, msg+". Do not retry it; continue without it or ask the user.")
}

// identify derives, once, the arguments hash and the idempotency key that
// the journal read, the approval and the claim all name.
func (c *call) identify() error {
	if c.hash != "" {
		return nil
	}
	h, err := canonical.Hash(c.args)
	if err != nil {
		return fmt.Errorf("%w: hash arguments of %s: %v", ErrFault, c.tool.Def.Name, err)
	}
	c.hash, c.key = h, Key(c.inv, h)
	c.audit.ArgumentsHash, c.audit.Key = h, c.key
	c.span.SetAttributes(attribute.String("toolplane.idempotency_key", c.key))
	return nil
}

// Key answers the call's idempotency key: the caller's own key when it gave
// one, otherwise one derived from run, step and arguments hash. Both are
// encoded with unambiguous part boundaries, and the two never collide.
//
// The principal is part of the key: two agents naming the same run id or
// the same caller key are two actions, and one never reads back (or
// pre-empts) the other's effect. So are the person the call acts for and
// the tenant, when set: the same arguments for another person (through
// that person's own connection) or on another tenant's data are another
// effect, and one person's result is never answered to a call made for
// another. A call naming neither keeps the key it always had; one naming
// either has more parts, so the two never collide.
func Key(inv *toolplane.Invocation, argsHash string) string {
	var who []string
	if inv.UserID != "" || inv.TenantID != "" {
		who = []string{"for", inv.UserID, inv.TenantID}
	}
	if inv.IdempotencyKey != "" {
		return canonical.Key(append(append([]string{"caller", inv.Principal.ID}, who...), inv.IdempotencyKey)...)
	}
	step := inv.StepPath
	if step == "" {
		step = "agent"
	}
	return canonical.Key(append(append([]string{"run", inv.Principal.ID}, who...), inv.RunID, step, argsHash)...)
}

// timeout answers how long the handler may run: the tool's timeout, cut to
// the run's deadline.
func (c *call) timeout() time.Duration {
	t := c.tool.Def.Timeout.Std()
	if t <= 0 {
		t = registry.DefaultTimeout
	}
	if !c.inv.Deadline.IsZero() {
		if left := c.inv.Deadline.Sub(c.iv.now()); left < t {
			t = left
		}
	}
	return t
}

// accrue checks a metered call against the run tree's cost ceiling.
func (c *call) accrue(ctx context.Context) (toolplane.Result, bool) {
	iv, inv, d := c.iv, c.inv, &c.tool.Def
	if iv.cfg.Store == nil {
		return iv.fault(ctx, "a metered tool reached no meter", d.Name), true
	}
	if r, stop := c.accrueDay(ctx); stop {
		return r, true
	}
	if inv.Ceilings.MaxCostCents <= 0 {
		return toolplane.Result{}, false
	}
	spent, err := iv.cfg.Store.RunTreeCost(ctx, inv.OrganizationID, inv.EffectiveRootRunID())
	if err != nil {
		iv.log.ErrorContext(ctx, "meter read failed", "tool", d.Name, "err", err)
		return iv.fault(ctx, "the meter did not answer", d.Name), true
	}
	if spent >= inv.Ceilings.MaxCostCents {
		r := toolplane.Fail(toolplane.CodeBudgetExhausted, fmt.Sprintf("this run has spent its budget (%d of %d cents); %s was not called. Finish with what you have.", spent, inv.Ceilings.MaxCostCents, c.tool.Model))
		r.Stop = toolplane.StopBudgetExhausted
		return r, true
	}
	return toolplane.Result{}, false
}

// accrueDay checks a metered call against its organization's daily
// ceiling, read from the store, so every node reads the same counter: it
// is written with each usage row, in the row's transaction. As for the
// run's ceiling, a call is let through while the day's spend is below the
// ceiling, and what it costs is known only once it answered; so the
// organization's day can end past its ceiling by at most the calls that
// were in flight when it was reached, one per call, never more.
//
// An organization without a ceiling (as DailyCeilings knows, when set)
// has nothing to check, and its counter is not read; when DailyCeilings
// cannot say, the counter is.
func (c *call) accrueDay(ctx context.Context) (toolplane.Result, bool) {
	iv, inv, d := c.iv, c.inv, &c.tool.Def
	if k := iv.cfg.DailyCeilings; k != nil {
		has, err := k.HasCeiling(ctx, inv.OrganizationID)
		if err == nil && !has {
			return toolplane.Result{}, false
		}
	}
	day, err := iv.cfg.Store.DaySpend(ctx, inv.OrganizationID, toolplane.SpendDay(iv.now()))
	if err != nil {
		iv.log.ErrorContext(ctx, "meter read failed", "tool", d.Name, "err", err)
		return iv.fault(ctx, "the meter did not answer", d.Name), true
	}
	if day.CeilingCents > 0 && day.SpentCents >= day.CeilingCents {
		r := toolplane.Fail(toolplane.CodeBudgetExhausted, fmt.Sprintf("the organization's daily spend ceiling of %d cents is reached (%d cents spent today, UTC); %s was not called. Finish with what you have, or ask an administrator to raise the ceiling.",
			day.CeilingCents, day.SpentCents, c.tool.Model))
		r.Stop = toolplane.StopBudgetExhausted
		return r, true
	}
	return toolplane.Result{}, false
}

// movesTheToolsApproval answers why dec cannot stand, or "": a rule that
// routes its approval to a group other than the one the tool's own
// approval chain names would take the call away from the people the
// tool's definition (reviewed, and held by its binding's floor) requires.
// A rule may only add to a tool's approval (more people, the manager, a
// group where the tool names none), so such a call is denied, loudly,
// rather than given to either group alone.
func movesTheToolsApproval(d *toolplane.Definition, dec policy.Decision) string {
	if dec.Effect != policy.RequireApproval || dec.Approval == nil || dec.Approval.Group == "" ||
		d.Approval == nil || len(d.Approval.Chain) == 0 || dec.Approval.Group == d.Approval.Chain[0] {
		return ""
	}
	return fmt.Sprintf("rule %s routes the approval to the group %s, but the tool's approval is the group %s's; a rule cannot move a tool's approval to other people (change the rule or the tool's approval chain)",
		dec.Rule, dec.Approval.Group, d.Approval.Chain[0])
}

// fileApproval files the approval of the call, or finds the one filed
// before: a prior rejection answers it, a pending approval (or a new one)
// answers ApprovalRequired, and a person's approval of this exact call
// lets it proceed.
func (c *call) fileApproval(ctx context.Context) (r toolplane.Result, proceed bool, err error) {
	iv, inv, d := c.iv, c.inv, &c.tool.Def
	if iv.cfg.Approvals == nil {
		return iv.fault(ctx, "policy asked for an approval and no approval service is wired", d.Name), false, nil
	}
	if inv.RunID == "" && inv.IdempotencyKey == "" {
		// The approval is scoped by the call's key: one derived from no
		// run would make every later identical call the approved one.
		err := &RunRequiredError{Tool: d.Name, Approval: true}
		if inv.Credential != nil {
			return toolplane.Result{}, false, err
		}
		return iv.fault(ctx, err.Error(), d.Name), false, nil
	}
	if err := c.identify(); err != nil {
		return toolplane.Result{}, false, err
	}
	// The key names the call: a caller's key finds the approval filed in
	// another run or session, and a derived one holds its run.
	prior, err := iv.cfg.Approvals.Prior(ctx, inv.OrganizationID, c.key, d.Name, c.hash)
	if err != nil {
		return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
	}
	rej, pending := prior.Rejected, prior.Pending
	if rej != nil {
		c.audit.ApprovalID = rej.ID
		return rejected(c.tool, rej), false, nil
	}
	if o := prior.Reused; o != nil && pending == nil && prior.Approved == nil {
		c.audit.ApprovalID = o.ID
		return keyReused(c.tool, o.ID), false, nil
	}
	if prior.Approved == nil && pending == nil && inv.SessionRun {
		// Nothing in this session, which the caller did not name as its
		// run: the same agent's approval of the same call from another
		// session is offered.
		open, err := iv.cfg.Approvals.Open(ctx, inv, d.Name, c.hash)
		if err != nil {
			return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
		}
		switch {
		case open == nil:
		case open.Status == toolplane.ApprovalApproved:
			if r, err, done := c.adopt(ctx, open); done {
				return r, false, err
			}
			return toolplane.Result{}, true, nil
		default:
			pending = open
		}
	}
	if a := prior.Approved; a != nil {
		// The same call, asked again after a person approved it (before
		// or after the approval's own execution): it is that call.
		c.approvedBy(a)
		return toolplane.Result{}, true, nil
	}
	if pending != nil {
		c.audit.ApprovalID = pending.ID
		// Scheduling is idempotent (one job per approval and expiry), and
		// this heals a filing whose scheduling failed.
		if iv.sched != nil {
			if err := iv.sched.ApprovalFiled(ctx, pending); err != nil {
				return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
			}
		}
		return toolplane.Result{}, false, &ApprovalRequired{ID: pending.ID, ExpiresAt: pending.ExpiresAt, Preview: pending.Preview, Existing: true, Ignored: c.ignored}
	}
	argsJSON, err := canonical.Marshal(c.args)
	if err != nil {
		return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
	}
	stored := *inv
	stored.AuthorizedBy = ""
	// The approved call, run when a person answers, continues this one's
	// trace.
	stored.TraceParent, stored.TraceState = tracectx.Strings(ctx)
	// The deadline bounded the request that asked; the approved call runs
	// when a person answers, under the tool's own timeout.
	stored.Deadline = time.Time{}
	invJSON, err := approval.EncodeInvocation(&stored)
	if err != nil {
		return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
	}
	line, refused := c.preview(ctx)
	if refused != nil {
		// Arguments the tool cannot read: the model's to fix, and
		// nothing is filed.
		return *refused, false, nil
	}
	a := &toolplane.Approval{
		OrganizationID: inv.OrganizationID, RunID: inv.RunID, StepPath: inv.StepPath,
		Tool: d.Name, ToolVersion: d.Version, Key: c.key, ArgumentsHash: c.hash,
		Arguments: argsJSON, Invocation: invJSON, PrincipalID: inv.Principal.ID,
		Preview: line,
	}
	if p := d.Approval; p != nil {
		if len(p.Chain) > 0 {
			a.ApproverGroup = p.Chain[0]
		}
		a.DefaultOnTimeout = p.OnTimeout
		if p.TTL > 0 {
			a.ExpiresAt = iv.now().Add(p.TTL.Std())
		}
	}
	// A rule that asked for the approval routes it: its group where the
	// tool names none (movesTheToolsApproval denied any other), how many
	// distinct people, the one person named.
	a.Rule = c.decision.Rule
	if r := c.decision.Approval; r != nil {
		if r.Group != "" {
			a.ApproverGroup = r.Group
		}
		a.Approvers, a.Approver = r.Approvers, r.Person
	}
	// The store holds one call to one pending approval: an identical call
	// that filed first (at the same moment, or in another session under
	// the same key) is answered here instead of a second one.
	existing, err := iv.cfg.Approvals.File(ctx, a)
	if errors.Is(err, approval.ErrKeyReused) {
		return keyReused(c.tool, ""), false, nil
	}
	if err != nil {
		return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
	}
	c.audit.ApprovalID = a.ID
	if iv.sched != nil {
		// Idempotent for an existing one, as above.
		if err := iv.sched.ApprovalFiled(ctx, a); err != nil {
			return toolplane.Result{}, false, fmt.Errorf("%w: %v", ErrFault, err)
		}
	}
	return toolplane.Result{}, false, &ApprovalRequired{ID: a.ID, ExpiresAt: a.ExpiresAt, Preview: a.Preview, Existing: existing, Ignored: c.ignored}
}

// keyReused answers a call whose idempotency key already names another
// call of the tool, with other arguments, that waits for a person
// (approval id, when known): a key is one call, so this one is a
// conflict, and nothing is filed.
func keyReused(t *registry.Tool, id string) toolplane.Result {
	waits := "waits for a person's approval"
	if id != "" {
		waits = "waits for approval " + id
	}
	return toolplane.Fail(toolplane.CodeConflict, fmt.Sprintf("this idempotency key already names another %s call, with other arguments, that %s; nothing was filed. Use a new key for a new call, or repeat that call with its own arguments.", t.Model, waits))
}

// adopt makes the call the one approval a holds, the same call filed by
// the same agent in another run: it takes that call's run, step and key
// (keeping its own run tree for the meter), so the journal makes the
// approved effect once whichever session asks, the approval's own
// background execution included. A write whose key the journal already
// holds answers that (the stored result, replayed; in flight; uncertain),
// with done set.
func (c *call) adopt(ctx context.Context, a *toolplane.Approval) (toolplane.Result, error, bool) {
	stored, err := approval.DecodeInvocation(a.Invocation)
	if err != nil {
		return toolplane.Result{}, fmt.Errorf("%w: approval %s: %v", ErrFault, a.ID, err), true
	}
	inv := *c.inv
	inv.RootRunID = c.inv.EffectiveRootRunID()
	inv.RunID, inv.StepPath, inv.IdempotencyKey = stored.RunID, stored.StepPath, stored.IdempotencyKey
	c.inv, c.key = &inv, a.Key
	c.audit.Key = a.Key
	c.approvedBy(a)
	c.span.SetAttributes(attribute.String("toolplane.idempotency_key", c.key), attribute.String("toolplane.approval_id", a.ID))
	if !c.tool.Def.Writes() {
		return toolplane.Result{}, nil, false
	}
	out, cl, err := c.iv.journal.Read(ctx, c.request(""))
	if err != nil {
		return toolplane.Result{}, fmt.Errorf("%w: %v", ErrFault, err), true
	}
	return c.answerExisting(ctx, out, cl)
}

// resolveRemote checks that the server behind a remote tool still
// publishes it, before the call is decided: a tool dropped upstream is
// unavailable, not a call that fails after a person approved it.
func (c *call) resolveRemote(rb *toolplane.RemoteBinding) *toolplane.Result {
	model := c.tool.Model
	if c.iv.cfg.Remotes == nil {
		r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("%s is served by a remote server this deployment does not connect to", model))
		return &r
	}
	if c.tool.Def.Connection != "" && c.iv.cfg.Broker == nil {
		// Its calls carry a connection's token, and nothing here
		// releases one.
		r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("%s needs a connection this deployment does not release", model))
		return &r
	}
	b, err := c.iv.cfg.Remotes.Binding(rb)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("%s is no longer published by its server; the call was not sent. Finish without it.", model))
		return &r
	case err != nil:
		c.iv.log.Warn("remote server unreachable", "tool", c.tool.Def.Name, "connection", rb.ConnectionID, "err", err)
		r := toolplane.Fail(toolplane.CodeUnavailable, fmt.Sprintf("the server behind %s cannot be reached now; nothing was done. Try again later or use another tool.", model))
		return &r
	}
	c.bound = b
	return nil
}

// resolveRuntime builds the binding of a tool one of the platform's
// runtimes runs (an HTTP request, a SQL statement).
func (c *call) resolveRuntime() *toolplane.Result {
	model := c.tool.Model
	if c.iv.cfg.Runtimes == nil || c.iv.cfg.Broker == nil {
		r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("%s runs on a runtime this deployment does not provide", model))
		return &r
	}
	b, err := c.iv.cfg.Runtimes.Binding(&c.tool.Def)
	if err != nil {
		c.iv.log.Warn("runtime cannot run tool", "tool", c.tool.Def.Name, "err", err)
		r := toolplane.Fail(toolplane.CodeToolUnavailable, fmt.Sprintf("%s cannot be run by this deployment now; nothing was done. Finish without it.", model))
		return &r
	}
	c.bound = b
	return nil
}

// maxPreview bounds the approval line, in UTF-8 bytes.
const maxPreview = 512

// The reasons an approval line says the tool's own preview is unavailable.
// They are the platform's words, short and stable: never the preview's
// error, which may quote a provider's exception or a secret it was given.
const (
	previewFailed  = "the tool's preview failed"
	previewLate    = "the tool's preview did not answer in time"
	previewEmpty   = "the tool's preview was empty"
	previewTooLong = "the tool's preview was longer than 512 bytes"
)

// preview renders the approval line under the preview rules: it runs under
// the call's timeout, on the coerced arguments the handler will receive,
// and its answer is folded to one line of at most 512 bytes. A preview that
// fails (an error, a panic, a timeout, an empty or over-long line) does not
// stop the approval: the person still decides, from the generic render of
// the arguments under a "preview unavailable: REASON" line (see
// unavailablePreview). Only arguments the preview cannot read answer a
// refusal (invalid_input at the field, nothing filed): the handler would
// refuse them the same way once approved, so a person is not asked to
// approve a call that cannot run.
func (c *call) preview(ctx context.Context) (string, *toolplane.Result) {
	d := &c.tool.Def
	if r := d.Binding.Remote; r != nil {
		return genericPreview(r.RemoteName, c.args, c.tool.Input().Sensitive()), nil
	}
	if !d.ApprovalPreview || d.Binding.Handler == nil {
		return "", nil
	}
	b, ok := c.iv.cfg.Handlers.Get(d.Binding.Handler.Key)
	if !ok {
		return "", nil
	}
	pctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	type answer struct {
		s   string
		err error
	}
	ch := make(chan answer, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ch <- answer{err: fmt.Errorf("preview panicked: %v", p)}
			}
		}()
		s, _, err := b.Preview(pctx, c.handlerCall(0), c.args)
		ch <- answer{s, err}
	}()
	var a answer
	late := false
	select {
	case a = <-ch:
	case <-pctx.Done():
		a.err, late = pctx.Err(), true
	}
	line := strings.Join(strings.FieldsFunc(a.s, unicode.IsSpace), " ")
	var bad *handler.Invalid
	reason := ""
	switch {
	case errors.As(a.err, &bad):
		r := b.Classify(bad).Result // invalid_input at the field, its message cleaned
		return "", &r
	case a.err != nil && (late || errors.Is(a.err, context.DeadlineExceeded)):
		reason = previewLate
	case a.err != nil:
		reason = previewFailed
	case line == "":
		reason = previewEmpty
	case len(line) > maxPreview:
		reason = previewTooLong
	default:
		return line, nil
	}
	// The operator reads what failed, with anything shaped like a secret
	// redacted: a preview's error may quote a provider's exception.
	errText := ""
	if a.err != nil {
		errText, _ = boundary.RedactSecrets(a.err.Error())
	}
	c.iv.log.WarnContext(ctx, "approval preview unavailable; filing the approval with the generic render", "tool", d.Name, "reason", reason, "err", errText, "bytes", len(line))
	return c.unavailablePreview(reason), nil
}

// unavailablePreview is the approval line of a call whose tool's preview
// failed for reason: "preview unavailable: REASON", then the generic
// render of the arguments (the tool's name and its arguments as compact
// JSON, credentials redacted and the values the input schema marks
// x-sensitive masked), within the line's bound. The person reads what the
// call would do, in the platform's words, and still decides.
func (c *call) unavailablePreview(reason string) string {
	return genericPreview("preview unavailable: "+reason+"; "+c.tool.Def.Name, c.args, c.tool.Input().Sensitive())
}

// genericPreview renders an approval line from the arguments alone, for a
// call whose tool offers no preview of its own (a remote MCP tool) or
// whose preview failed: head, then the arguments as compact JSON with
// credentials redacted by the boundary's rule and every value at the
// pointers sensitive (the input schema's x-sensitive) masked (the person
// reads it; the stored arguments stay whole for the call), cut to
// maxPreview bytes on a character boundary, and folded to one line.
func genericPreview(head string, args any, sensitive []string) string {
	shown := schema.Mask(boundary.Redact(args), sensitive, boundary.Redacted)
	// Folded as a handler's preview is: JSON escapes control characters,
	// not the other separators (U+2028, say) a reader would break on.
	line := strings.Join(strings.FieldsFunc(head+" "+string(boundary.Encode(nil, shown)), unicode.IsSpace), " ")
	if len(line) <= maxPreview {
		return line
	}
	const more = "…"
	n := maxPreview - len(more)
	for n > 0 && !utf8.RuneStart(line[n]) {
		n--
	}
	return line[:n] + more
}

func (c *call) handlerCall(attempt int) handler.Call {
	return handler.Call{Invocation: c.inv, Tool: c.tool.Def.Name, Version: c.tool.Def.Version, Key: c.key, Attempt: attempt, Released: c.released}
}

// finish records the call: the audit event and the span's end.
func (c *call) finish(ctx context.Context, res toolplane.Result, err error) {
	iv := c.iv
	outcome := "ok"
	switch ar := approvalOf(err); {
	case ar != nil:
		outcome = "approval_required"
		c.audit.ApprovalID = ar.ID
		// A pause is not a failure: the span closes ok, carrying the id.
		c.span.SetAttributes(attribute.String("toolplane.approval_id", ar.ID))
		c.span.SetStatus(codes.Ok, "")
	case errors.Is(err, ErrInFlight):
		outcome = "in_flight"
		c.span.SetStatus(codes.Error, "in_flight")
	case err != nil && errors.As(err, new(*RunRequiredError)):
		// The caller's malformed request, not a fault.
		outcome = string(toolplane.CodeInvalidInput)
		c.span.SetStatus(codes.Error, outcome)
	case err != nil:
		outcome = "fault"
		c.span.RecordError(err)
		c.span.SetStatus(codes.Error, "fault")
	case !res.OK && res.Error != nil:
		outcome = string(res.Error.Code)
		c.span.SetAttributes(attribute.String("tool.error_code", outcome))
		if c.span.IsRecording() {
			refusal(c.span, res.Error.Code)
		}
	default:
		c.span.SetStatus(codes.Ok, "")
	}
	if c.span.IsRecording() {
		// A span nobody records drops its attributes; the list would
		// be made for nothing on every call sampled out.
		c.span.SetAttributes(attribute.Bool("toolplane.replayed", res.Meta.Replayed), attribute.String("toolplane.outcome", outcome))
	}
	if res.Meta.UsageID != "" {
		c.span.SetAttributes(attribute.String("toolplane.usage_id", res.Meta.UsageID))
	}
	c.endStages(ctx, &res, outcome, err)
	// The call's span ends after its audit event is appended (a child
	// stage of it), and the Observer is told after that append too, whose
	// time is the audit stage's.
	defer c.span.End()
	defer c.observed(outcome)
	if iv.cfg.Store == nil || c.audited {
		return
	}
	if err == nil {
		c.audit.OutputHash = resultHash(res)
	}
	c.auditNow(outcome)
	c.audit.Replayed = res.Meta.Replayed
	c.mark(ctx, stageAudit)
	defer c.mark(ctx, stageEnd)
	var aerr error
	if iv.cfg.Audit != nil {
		// A call that may have made an effect stored its event with its
		// claim; what is left changed nothing, so it is only queued.
		aerr = iv.cfg.Audit.Append(context.WithoutCancel(ctx), &c.audit, false)
	} else {
		aerr = iv.cfg.Store.AppendAudit(context.WithoutCancel(ctx), &c.audit)
	}
	if aerr != nil {
		iv.log.ErrorContext(ctx, "audit append failed", "tool", c.name, "outcome", outcome, "err", aerr)
	}
}

// approvalOf answers the approval err asks for, or nil. A call that
// succeeded pays nothing for the question (errors.As needs its target on
// the heap).
func approvalOf(err error) *ApprovalRequired {
	if err == nil {
		return nil
	}
	var ar *ApprovalRequired
	if errors.As(err, &ar) {
		return ar
	}
	return nil
}

// auditNow completes the call's audit event with its outcome and answers it.
func (c *call) auditNow(outcome string) *toolplane.AuditEvent {
	c.audit.Outcome = outcome
	c.audit.CreatedAt = c.iv.now()
	c.audit.LatencyMicros = c.audit.CreatedAt.Sub(c.start).Microseconds()
	if c.audit.ID == "" {
		c.audit.ID = toolplane.NewID("aud_")
	}
	c.auditInput()
	c.auditSpan()
	c.audited = true
	return &c.audit
}

// decodeResult reads a stored, rendered result back.
func decodeResult(b []byte) (toolplane.Result, error) {
	var r toolplane.Result
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.UseNumber()
	if err := dec.Decode(&r); err != nil {
		return r, err
	}
	return r, nil
}
