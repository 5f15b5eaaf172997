package door

import (
	"context"
	"errors"
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/tracectx"
)

// The names the doors' spans and their refusal events use; the invoker's
// spans use the same event and code key (see invoke's stages).
const (
	spanAuthenticate = "authenticate"
	eventRefusal     = "toolplane.refusal"
	attrCode         = "toolplane.code"
)

// Traced serves next with the caller's W3C trace context (the traceparent
// and tracestate headers) as the request's parent, and, when the Door has
// a Tracer, inside a server span of the request named name (renamed to the
// route's pattern once a ServeMux under it has matched one). A
// traceparent that does not parse is ignored: the request starts a trace
// of its own, and nothing is refused for it.
func (d *Door) Traced(name string, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := tracectx.FromHeader(r.Context(), r.Header)
		if d.Tracer == nil {
			if ctx != r.Context() {
				r = r.WithContext(ctx)
			}
			next.ServeHTTP(w, r)
			return
		}
		ctx, sp := d.Tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
		if sp.IsRecording() {
			sp.SetAttributes(attribute.String("http.request.method", r.Method), attribute.String("url.path", r.URL.Path))
		}
		r = r.WithContext(ctx)
		next.ServeHTTP(w, r)
		if r.Pattern != "" && sp.IsRecording() {
			sp.SetName(r.Pattern)
		}
		sp.End()
	})
}

// TraceMeta answers ctx continuing the trace an MCP request's _meta names
// (traceparent, tracestate: the MCP community's convention for a call's
// own trace context, which may differ from its HTTP request's), with the
// server span of the tools/call of the tool name, a child of that trace
// linked to the HTTP request's span; ctx as it was and a span that records
// nothing when _meta names none, one that does not parse, or the trace
// the request's span is in. The caller ends the span.
func (d *Door) TraceMeta(ctx context.Context, meta map[string]any, name string) (context.Context, trace.Span) {
	in := tracectx.FromMeta(ctx, meta)
	if in == ctx || trace.SpanContextFromContext(in).TraceID() == trace.SpanContextFromContext(ctx).TraceID() {
		// None named, or the trace the request's own span continues
		// already (a client sending both, as toolplane does upstream):
		// the call stays under the request's span.
		return ctx, trace.SpanFromContext(context.Background())
	}
	if d.Tracer == nil {
		return in, trace.SpanFromContext(context.Background())
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindServer)}
	if req := trace.SpanContextFromContext(ctx); req.IsValid() {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: req}))
	}
	return d.Tracer.Start(in, "tools/call "+name, opts...)
}

// traceAuthenticate runs authenticate inside the span of the door's
// authentication, when the request's span is recorded: a refusal is an
// event carrying its code, and the span's status.
func (d *Door) traceAuthenticate(ctx context.Context, authenticate func(context.Context) (Caller, error)) (Caller, error) {
	ctx, sp := d.Tracer.Start(ctx, spanAuthenticate)
	defer sp.End()
	c, err := authenticate(ctx)
	var refusal *Refusal
	switch {
	case errors.As(err, &refusal):
		code := refusal.code()
		sp.AddEvent(eventRefusal, trace.WithAttributes(attribute.String(attrCode, code)))
		sp.SetStatus(codes.Error, code)
	case err != nil:
		sp.SetStatus(codes.Error, "fault")
	default:
		sp.SetAttributes(attribute.String("toolplane.organization", c.Credential.OrganizationID), attribute.String("toolplane.credential", c.Credential.ID))
	}
	return c, err
}

// code answers the stable code of a refusal's class, as a span names it.
func (r *Refusal) code() string {
	switch r.Kind {
	case Unauthenticated:
		return "unauthenticated"
	case RateLimited:
		return "rate_limited"
	}
	return "unavailable"
}
