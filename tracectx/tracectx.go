// Package tracectx carries W3C trace context (traceparent, tracestate)
// across toolplane's edges: taken from a caller (HTTP headers, an MCP
// request's _meta, an invocation stored to run later) and handed on to
// what a call reaches (an upstream MCP server, an HTTP runtime's request,
// a SQL statement's comment).
//
// It is the one place the wire form is read and written, with the
// OpenTelemetry propagator, so every door and every runtime agree on it.
// A traceparent that does not parse is ignored (the call starts a trace
// of its own): trace context is advice from the caller, never a reason to
// refuse a call. Nothing is allocated for a request that carries none, or
// for a context without a span context to send.
package tracectx

import (
	"context"
	"net/http"
	"strings"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The keys trace context travels under: HTTP headers (canonical form) and
// an MCP request's _meta, as the MCP community's convention names them.
const (
	Parent = "traceparent"
	State  = "tracestate"
)

// prop reads and writes the W3C form; it is a zero-size value.
var prop propagation.TraceContext

// FromHeader answers ctx with the remote span context h's traceparent and
// tracestate name as its parent; without a traceparent, or with one that
// does not parse, ctx as it was.
func FromHeader(ctx context.Context, h http.Header) context.Context {
	if len(h["Traceparent"]) == 0 {
		return ctx
	}
	return prop.Extract(ctx, propagation.HeaderCarrier(h))
}

// FromMeta answers ctx with the remote span context an MCP request's
// _meta names (string values under Parent and State) as its parent;
// without a traceparent there, or with one that does not parse, ctx as it
// was.
func FromMeta(ctx context.Context, meta map[string]any) context.Context {
	p, _ := meta[Parent].(string)
	if p == "" {
		return ctx
	}
	s, _ := meta[State].(string)
	return FromStrings(ctx, p, s)
}

// FromStrings answers ctx with the remote span context parent and state
// (a traceparent and tracestate value) name as its parent; ctx as it was
// when parent is empty or does not parse.
func FromStrings(ctx context.Context, parent, state string) context.Context {
	if parent == "" {
		return ctx
	}
	return prop.Extract(ctx, &pair{parent: parent, state: state})
}

// Strings answers the traceparent and tracestate of ctx's span context,
// "" when it holds none: what an invocation stored to run later keeps,
// and what a request's _meta carries.
func Strings(ctx context.Context) (parent, state string) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return "", ""
	}
	var p pair
	prop.Inject(ctx, &p)
	return p.parent, p.state
}

// ToHeader sets traceparent (and tracestate, when there is one) on h from
// ctx's span context; h is left alone when ctx holds none.
func ToHeader(ctx context.Context, h http.Header) {
	if !trace.SpanContextFromContext(ctx).IsValid() {
		return
	}
	prop.Inject(ctx, propagation.HeaderCarrier(h))
}

// SQLComment answers the comment that names ctx's span context on a SQL
// statement, in the sqlcommenter form (/*traceparent='00-…'*/), or ""
// when ctx holds none. Only the traceparent is carried: it is made of hex
// digits and dashes, written here from the span context's ids rather than
// copied from a caller, so nothing a caller sent reaches the statement's
// text. A tracestate (vendors' free-form entries) is left out.
func SQLComment(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	var b strings.Builder
	b.Grow(len("/*traceparent='00-") + 32 + 1 + 16 + 1 + 2 + len("'*/"))
	b.WriteString("/*traceparent='00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	b.WriteString(tid.String())
	b.WriteByte('-')
	b.WriteString(sid.String())
	b.WriteByte('-')
	b.WriteString(sc.TraceFlags().String())
	b.WriteString("'*/")
	return b.String()
}

// pair is a carrier of one traceparent and tracestate.
type pair struct{ parent, state string }

func (p *pair) Get(key string) string {
	switch key {
	case Parent:
		return p.parent
	case State:
		return p.state
	}
	return ""
}

func (p *pair) Set(key, value string) {
	switch key {
	case Parent:
		p.parent = value
	case State:
		p.state = value
	}
}

func (p *pair) Keys() []string { return []string{Parent, State} }
