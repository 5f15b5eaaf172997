package invoke_test

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/tracectx"
)

// callSpans answers the spans of calls ("tool <name>"), without their
// stages'.
func callSpans(spans []sdktrace.ReadOnlySpan) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if strings.HasPrefix(s.Name(), "tool ") {
			out = append(out, s)
		}
	}
	return out
}

// children answers the names of the spans whose parent is parent, in the
// order they started.
func children(spans []sdktrace.ReadOnlySpan, parent trace.SpanContext) []string {
	var kids []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Parent().SpanID() == parent.SpanID() && s.Parent().IsValid() {
			kids = append(kids, s)
		}
	}
	slices.SortFunc(kids, func(a, b sdktrace.ReadOnlySpan) int { return a.StartTime().Compare(b.StartTime()) })
	names := make([]string, len(kids))
	for i, s := range kids {
		names[i] = s.Name()
	}
	return names
}

// refusalCode answers the toolplane.code of span s's refusal event, "" for
// none.
func refusalCode(s sdktrace.ReadOnlySpan) string {
	for _, ev := range s.Events() {
		if ev.Name != "toolplane.refusal" {
			continue
		}
		for _, kv := range ev.Attributes {
			if kv.Key == "toolplane.code" {
				return kv.Value.AsString()
			}
		}
	}
	return ""
}

func named(spans []sdktrace.ReadOnlySpan, name string) sdktrace.ReadOnlySpan {
	for _, s := range spans {
		if s.Name() == name {
			return s
		}
	}
	return nil
}

// A call's stages are its span's children, in the path's order, one
// handler span per attempt; all in the call's trace.
func TestStageSpansAreTheCallsChildren(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e, rec := tracedEnv(t, &logs,
		tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})},
		tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1"})})
	in := inv("crm.update", "crm.get")
	tests := []struct {
		tool string
		want []string
	}{
		{"crm.update", []string{"validate", "journal", "limit", "policy", "traffic", "claim", "handler", "boundary", "audit"}},
		{"crm.get", []string{"validate", "limit", "policy", "traffic", "handler", "boundary", "audit"}},
	}
	for _, tc := range tests {
		rec.Reset()
		must(t).OK(e.iv.Invoke(context.Background(), tc.tool, args("to", "a"), in))
		spans := rec.Ended()
		calls := callSpans(spans)
		if len(calls) != 1 {
			t.Fatalf("%s: %d call spans", tc.tool, len(calls))
		}
		call := calls[0].SpanContext()
		if got := children(spans, call); !slices.Equal(got, tc.want) {
			t.Errorf("%s: stages %v, want %v", tc.tool, got, tc.want)
		}
		for _, s := range spans {
			if s.SpanContext().TraceID() != call.TraceID() {
				t.Errorf("%s: span %s in another trace", tc.tool, s.Name())
			}
			if s.Status().Code == codes.Error {
				t.Errorf("%s: span %s closed in error: %v", tc.tool, s.Name(), s.Status())
			}
		}
		if h := named(spans, "handler"); h == nil || h.SpanKind() != trace.SpanKindInternal {
			t.Errorf("%s: handler span %v", tc.tool, h)
		}
	}
}

// A refusal is an event carrying its code on the stage that refused and
// on the call's span, whose status is an error with the code.
func TestRefusalIsASpanEventWithItsCode(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e, rec := tracedEnv(t, &logs, tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})})
	tests := []struct {
		name  string
		args  map[string]any
		inv   *toolplane.Invocation
		code  toolplane.Code
		stage string
	}{
		{"denied by policy", args("to", "a"), inv(), toolplane.CodeDenied, "policy"},
		{"invalid arguments", map[string]any{"to": 7}, inv("crm.update"), toolplane.CodeInvalidInput, "validate"},
	}
	for _, tc := range tests {
		rec.Reset()
		r, err := e.iv.Invoke(context.Background(), "crm.update", tc.args, tc.inv)
		code(t, r, err, tc.code)
		spans := rec.Ended()
		call := callSpans(spans)[0]
		if got := refusalCode(call); got != string(tc.code) || call.Status().Code != codes.Error || call.Status().Description != string(tc.code) {
			t.Errorf("%s: call span event %q status %v", tc.name, got, call.Status())
		}
		st := named(spans, tc.stage)
		if st == nil {
			t.Fatalf("%s: no %s span", tc.name, tc.stage)
		}
		if got := refusalCode(st); got != string(tc.code) || st.Status().Code != codes.Error {
			t.Errorf("%s: %s span event %q status %v", tc.name, tc.stage, got, st.Status())
		}
		if n := len(children(spans, call.SpanContext())); named(spans, "handler") != nil || n == 0 {
			t.Errorf("%s: %d stages, handler ran: %v", tc.name, n, named(spans, "handler") != nil)
		}
	}
}

// A stored invocation's trace context is the parent of its call's span
// when the call runs with a context that carries none (an asynchronous
// call on a worker); a malformed one is ignored.
func TestStoredTraceContextIsTheParent(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e, rec := tracedEnv(t, &logs, tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1"})})
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	tests := []struct {
		name, parent string
		continues    bool
	}{
		{"stored", parent, true},
		{"malformed", "00-zzzz-00f067aa0ba902b7-01", false},
		{"all zero", "00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
	}
	for _, tc := range tests {
		rec.Reset()
		in := inv("crm.get")
		in.TraceParent = tc.parent
		must(t).OK(e.iv.Invoke(context.Background(), "crm.get", args("to", "a"), in))
		call := callSpans(rec.Ended())[0]
		got := call.Parent()
		if tc.continues {
			if got.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" || got.SpanID().String() != "00f067aa0ba902b7" || !got.IsRemote() {
				t.Errorf("%s: parent %v", tc.name, got)
			}
		} else if got.IsValid() {
			t.Errorf("%s: a malformed traceparent became the parent %v", tc.name, got)
		}
	}
	// A context that carries a trace of its own keeps it.
	rec.Reset()
	in := inv("crm.get")
	in.TraceParent = parent
	ctx := tracectx.FromStrings(context.Background(), "00-11111111111111111111111111111111-2222222222222222-01", "")
	must(t).OK(e.iv.Invoke(ctx, "crm.get", args("to", "a"), in))
	if got := callSpans(rec.Ended())[0].Parent().TraceID().String(); got != "11111111111111111111111111111111" {
		t.Errorf("the context's trace was replaced by the stored one: %s", got)
	}
}

// BenchmarkReadCallTraced is BenchmarkReadCallNoop with every call's span
// recorded (the SDK, sampling every call, exporting nowhere): what the
// call's and its stages' spans cost.
func BenchmarkReadCallTraced(b *testing.B) {
	benchTraced(b, sdktrace.AlwaysSample())
}

// BenchmarkReadCallSampledOut is BenchmarkReadCallNoop under the SDK with
// a sampler that leaves every call out: the stages must cost nothing.
func BenchmarkReadCallSampledOut(b *testing.B) {
	benchTraced(b, sdktrace.NeverSample())
}

func benchTraced(b *testing.B, sampler sdktrace.Sampler) {
	store := newStore(b)
	audited := withAudit(b, store)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sampler))
	e := newEnvWith(b, store, func(c *invoke.Config) {
		audited(c)
		c.Tracer = tp.Tracer("bench")
	}, tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1", "name": "Ada"})})
	in := inv("crm.get")
	a := args("to", "p1")
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		if r, err := e.iv.Invoke(ctx, "crm.get", a, in); err != nil || !r.OK {
			b.Fatal(r, err)
		}
	}
}

// observations keeps what the Observer is told.
type observations struct {
	mu  sync.Mutex
	all []invoke.Observation
}

func (o *observations) ObserveCall(ob *invoke.Observation) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.all = append(o.all, *ob)
}

// One marker feeds the stage spans and the Observer's stage times: a
// call traced and observed opens its stage spans, and is told with the
// coarser stages it reached (a call that needed no approval did not reach
// the approval's), whose times add up to its latency.
func TestOneMarkerFeedsSpansAndStageTimes(t *testing.T) {
	t.Parallel()
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	obs := &observations{}
	var tick atomic.Int64
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	store := newStore(t)
	e := newEnvWith(t, store, func(c *invoke.Config) {
		c.Tracer, c.Observer = tp.Tracer("test"), obs
		// Each reading of the clock a millisecond on: every stage takes time.
		c.Now = func() time.Time { return start.Add(time.Duration(tick.Add(1)) * time.Millisecond) }
	}, tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})},
		tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"id": "p1"})})
	in := inv("crm.update", "crm.get")
	reached := func(ss ...invoke.PathStage) uint16 {
		var m uint16
		for _, s := range ss {
			m |= 1 << s
		}
		return m
	}
	tests := []struct {
		tool  string
		spans []string
		want  uint16
	}{
		{"crm.update", []string{"validate", "journal", "limit", "policy", "traffic", "claim", "handler", "boundary", "audit"},
			reached(invoke.StageValidate, invoke.StagePolicy, invoke.StageClaim, invoke.StageHandler, invoke.StageBoundary, invoke.StageAudit)},
		{"crm.get", []string{"validate", "limit", "policy", "traffic", "handler", "boundary", "audit"},
			reached(invoke.StageValidate, invoke.StagePolicy, invoke.StageClaim, invoke.StageHandler, invoke.StageBoundary, invoke.StageAudit)},
	}
	for i, tc := range tests {
		rec.Reset()
		must(t).OK(e.iv.Invoke(context.Background(), tc.tool, args("to", "a"), in))
		spans := rec.Ended()
		calls := callSpans(spans)
		if len(calls) != 1 {
			t.Fatalf("%s: %d call spans", tc.tool, len(calls))
		}
		if got := children(spans, calls[0].SpanContext()); !slices.Equal(got, tc.spans) {
			t.Errorf("%s: stages %v, want %v", tc.tool, got, tc.spans)
		}
		obs.mu.Lock()
		if len(obs.all) != i+1 {
			t.Fatalf("%s: %d observations", tc.tool, len(obs.all))
		}
		o := obs.all[i]
		obs.mu.Unlock()
		if o.Reached != tc.want {
			t.Errorf("%s: reached %b, want %b", tc.tool, o.Reached, tc.want)
		}
		var sum time.Duration
		for s := range invoke.StageCount {
			if o.Reached&(1<<s) == 0 && o.Stages[s] != 0 {
				t.Errorf("%s: stage %s not reached but timed %v", tc.tool, s, o.Stages[s])
			}
			if o.Reached&(1<<s) != 0 && s != invoke.StageAudit && o.Stages[s] <= 0 {
				t.Errorf("%s: stage %s reached but took %v", tc.tool, s, o.Stages[s])
			}
			sum += o.Stages[s]
		}
		if sum != o.Took || o.Took <= 0 {
			t.Errorf("%s: stages add up to %v, the call took %v", tc.tool, sum, o.Took)
		}
	}
}
