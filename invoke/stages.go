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

// A stage is a part of the invocation path as the call marks it (see
// mark): each opens a span of its own, a child of the call's span, and
// counts its time to one of the stages the Observer is told of
// (PathStage, coarser: the journal's read, the rate limits, the meter,
// the traffic admission and the claim are all the claim's). A trace
// reads where a call spent its time and where it stopped: the stage open
// when a call is refused carries the refusal as an event (eventRefusal,
// its code under attrCode) and the span's status, and so does the call's
// span.
type stage uint8

// The stages, in the order of the invocation path.
const (
	stageValidate stage = iota
	stageJournal
	stageLimit
	stageApproval
	stagePolicy
	stageMeter
	stageTraffic
	stageClaim
	stageCredential
	// stageDispatch is the handler's: each attempt has a span of its own
	// (attemptSpan), so the stage opens none.
	stageDispatch
	stageBoundary
	// stageComplete is a write's completion, which stores its audit event
	// in the same transaction: the audit span, the claim's time.
	stageComplete
	stageAudit
	// stageEnd closes the last stage; the time after it is the audit's.
	stageEnd
)

// stages names each stage's span ("": none) and the Observer's stage its
// time counts to.
var stages = [...]struct {
	span string
	path PathStage
}{
	stageValidate:   {"validate", StageValidate},
	stageJournal:    {"journal", StageClaim},
	stageLimit:      {"limit", StageClaim},
	stageApproval:   {"approval", StageApproval},
	stagePolicy:     {"policy", StagePolicy},
	stageMeter:      {"meter", StageClaim},
	stageTraffic:    {"traffic", StageClaim},
	stageClaim:      {"claim", StageClaim},
	stageCredential: {"credential", StageHandler},
	stageDispatch:   {"", StageHandler},
	stageBoundary:   {"boundary", StageBoundary},
	stageComplete:   {"audit", StageClaim},
	stageAudit:      {"audit", StageAudit},
	stageEnd:        {"", StageAudit},
}

// The span of a handler's attempt, and what the stage spans carry.
const (
	spanAttempt = "handler"

	eventRefusal = "toolplane.refusal"
	attrCode     = "toolplane.code"
	attrAttempt  = "toolplane.attempt"
)

// noSpan is the span of a stage nobody records: it records nothing, and
// handing it out allocates nothing.
var noSpan = trace.SpanFromContext(context.Background())

// mark ends the stage the call is in (as passed: a stage a later one
// follows went through) and enters st: the one marker of the path, for
// the stage spans and the Observer's stage times alike. The time since
// the last mark counts to the stage ended (lap); st's span is opened when
// the call's span is recording. A call neither observed nor recorded (no
// Observer, no tracer or a sampler that left it out) pays a field read
// and an interface call per stage, and allocates nothing.
func (c *call) mark(ctx context.Context, st stage) {
	c.lap(stages[st].path)
	if !c.span.IsRecording() {
		return
	}
	if c.stageSpan != nil {
		c.stageSpan.End()
		c.stageSpan = nil
	}
	if name := stages[st].span; name != "" {
		_, c.stageSpan = c.iv.tracer.Start(ctx, name)
	}
}

// endStages ends the stage the call stopped in with the call's outcome
// (a refusal's code as an event and the status, a fault or a malformed
// request as an error status), and marks the path's end: what follows is
// the audit's time.
func (c *call) endStages(ctx context.Context, res *toolplane.Result, outcome string, err error) {
	if sp := c.stageSpan; sp != nil {
		ended(sp, res, outcome, err)
	}
	c.mark(ctx, stageEnd)
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
	ctx, sp := c.iv.tracer.Start(ctx, spanAttempt, trace.WithSpanKind(kind))
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
