package invoke

import (
	"context"
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/tracectx"
)

// The spans of a call's stages, children of the call's span, in the order
// of the invocation path. A trace reads where a call spent its time and
// where it stopped: the stage open when a call is refused carries the
// refusal as an event (eventRefusal, its code under attrCode) and the
// span's status, and so does the call's span.
const (
	stageValidate   = "validate"
	stageJournal    = "journal"
	stageLimit      = "limit"
	stageApproval   = "approval"
	stagePolicy     = "policy"
	stageMeter      = "meter"
	stageTraffic    = "traffic"
	stageClaim      = "claim"
	stageCredential = "credential"
	stageHandler    = "handler"
	stageBoundary   = "boundary"
	stageAudit      = "audit"

	eventRefusal = "toolplane.refusal"
	attrCode     = "toolplane.code"
	attrAttempt  = "toolplane.attempt"
)

// noSpan is the span of a stage nobody records: it records nothing, and
// handing it out allocates nothing.
var noSpan = trace.SpanFromContext(context.Background())

// mark ends the stage the call is in (as passed: a stage a later one
// follows went through) and, unless name is "", opens the stage name.
// When the call's span is not recording (no tracer, or a sampler that
// left the call out) it does nothing and allocates nothing: the path pays
// one interface call per stage.
func (c *call) mark(ctx context.Context, name string) {
	if !c.span.IsRecording() {
		return
	}
	if c.stageSpan != nil {
		c.stageSpan.End()
		c.stageSpan = nil
	}
	if name != "" {
		_, c.stageSpan = c.iv.tracer.Start(ctx, name)
	}
}

// endStages ends the stage the call stopped in with the call's outcome:
// a refusal's code as an event and the status, a fault or a malformed
// request as an error status.
func (c *call) endStages(res *toolplane.Result, outcome string, err error) {
	sp := c.stageSpan
	if sp == nil {
		return
	}
	c.stageSpan = nil
	ended(sp, res, outcome, err)
	sp.End()
}

// ended sets sp's status for how the call ended (see endStages): only a
// refusal, a fault and a malformed request are errors; an answer, a pause
// for approval and a replay are not.
func ended(sp trace.Span, res *toolplane.Result, outcome string, err error) {
	var ar *ApprovalRequired
	switch {
	case errors.As(err, &ar):
		sp.SetStatus(codes.Ok, "")
	case err != nil:
		sp.SetStatus(codes.Error, outcome)
	case res != nil && !res.OK && res.Error != nil:
		refusal(sp, res.Error.Code)
	}
}

// refusal records the refusal of the call, with its stable code, on sp.
func refusal(sp trace.Span, code toolplane.Code) {
	sp.AddEvent(eventRefusal, trace.WithAttributes(attribute.String(attrCode, string(code))))
	sp.SetStatus(codes.Error, string(code))
}

// attemptSpan opens the span of the handler's attempt n, a child of the
// call's span, and answers ctx under it: what the attempt sends on (an
// upstream server's request, an HTTP runtime's, a SQL statement's
// comment) names it as its parent. A call nobody records gets ctx as it
// is and noSpan, with nothing allocated; ctx still carries the caller's
// trace context, if any, for the downstream to continue.
func (c *call) attemptSpan(ctx context.Context, n int) (context.Context, trace.Span) {
	if !c.span.IsRecording() {
		return ctx, noSpan
	}
	kind := trace.SpanKindInternal
	if c.bound != nil {
		// A remote server or a runtime's downstream: the attempt is a
		// request out of the platform.
		kind = trace.SpanKindClient
	}
	ctx, sp := c.iv.tracer.Start(ctx, stageHandler, trace.WithSpanKind(kind))
	sp.SetAttributes(attribute.Int(attrAttempt, n))
	return ctx, sp
}

// endAttempt ends the span of an attempt with how it ended. An error's
// text is not put on the span: it may quote a provider's exception, or a
// credential it was given.
func endAttempt(sp trace.Span, a *attempt) {
	if !sp.IsRecording() {
		return
	}
	switch {
	case a.r.panic != nil:
		sp.SetStatus(codes.Error, "panic")
	case a.expired:
		sp.SetStatus(codes.Error, "attempt_timeout")
	case a.late:
		sp.SetStatus(codes.Error, "timeout")
	case a.r.err != nil:
		sp.SetStatus(codes.Error, "error")
	}
	sp.End()
}

// storedTrace answers ctx continuing the trace a stored invocation names
// (one run later: an asynchronous call, an approved call's execution),
// when ctx holds no trace of its own.
func storedTrace(ctx context.Context, inv *toolplane.Invocation) context.Context {
	if inv == nil || inv.TraceParent == "" || trace.SpanContextFromContext(ctx).IsValid() {
		return ctx
	}
	return tracectx.FromStrings(ctx, inv.TraceParent, inv.TraceState)
}
