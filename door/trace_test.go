package door_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane/door"
)

// A request's caller's traceparent is the parent of the door's span, a
// malformed one starts a trace of its own, and an authentication refused
// is an event carrying its code on the authenticate span.
func TestTracedRequestAndAuthentication(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	d := &door.Door{Tracer: tp.Tracer("test")}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/things/{id}", func(w http.ResponseWriter, r *http.Request) {
		if _, err := d.Authenticate(r.Context(), "", "127.0.0.1", w.Header()); err == nil {
			t.Error("no bearer token authenticated")
		}
	})
	h := d.Traced("rest", mux)
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, tc := range []struct {
		name, traceparent string
		continues         bool
	}{
		{"valid", parent, true},
		{"malformed", "00-4bf92f3577b34da6a3ce929d0e0e4736-xyz-01", false},
		{"none", "", false},
	} {
		rec.Reset()
		r := httptest.NewRequest("POST", "/v1/things/7", nil)
		if tc.traceparent != "" {
			r.Header.Set("Traceparent", tc.traceparent)
		}
		h.ServeHTTP(httptest.NewRecorder(), r)
		spans := rec.Ended()
		if len(spans) != 2 {
			t.Fatalf("%s: %d spans", tc.name, len(spans))
		}
		auth, req := spans[0], spans[1]
		if req.Name() != "POST /v1/things/{id}" || req.SpanKind() != trace.SpanKindServer {
			t.Errorf("%s: the request's span is %q (%v)", tc.name, req.Name(), req.SpanKind())
		}
		if got := req.Parent(); tc.continues != (got.IsValid() && got.SpanID().String() == "00f067aa0ba902b7" && got.TraceID() == req.SpanContext().TraceID()) {
			t.Errorf("%s: the request's parent is %v", tc.name, got)
		}
		if auth.Name() != "authenticate" || auth.Parent().SpanID() != req.SpanContext().SpanID() {
			t.Errorf("%s: %q under %v", tc.name, auth.Name(), auth.Parent())
		}
		code := ""
		for _, ev := range auth.Events() {
			for _, kv := range ev.Attributes {
				if ev.Name == "toolplane.refusal" && kv.Key == "toolplane.code" {
					code = kv.Value.AsString()
				}
			}
		}
		if code != "unauthenticated" || auth.Status().Code != codes.Error {
			t.Errorf("%s: the refusal's event code %q, status %v", tc.name, code, auth.Status())
		}
	}
}
