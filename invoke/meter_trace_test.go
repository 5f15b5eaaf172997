package invoke_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

func metered() toolplane.Definition {
	return def("research.search", toolplane.EffectRead, func(d *toolplane.Definition) {
		d.Kind, d.Metered, d.Connection = toolplane.KindVendor, true, "search"
	})
}

func TestMeteredCallWritesOneUsageRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: metered(), fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		if err := handler.ReportUsage(ctx, 12, 1); err != nil {
			return nil, err
		}
		return map[string]any{"hits": 3}, nil
	}})
	in := inv("research.search")
	in.Ceilings.MaxCostCents = 100
	r := must(t).OK(e.iv.Invoke(context.Background(), "research.search", args("to", "q"), in))
	if r.Meta.UsageID == "" || !r.Meta.Untrusted {
		t.Fatalf("meta = %+v", r.Meta)
	}
	if cost, _ := e.store.RunTreeCost(context.Background(), "org-1", "run-1"); cost != 12 {
		t.Fatalf("cost = %d", cost)
	}
}

func TestRetryableFailureWritesNoUsageRow(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: metered(), fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		_ = handler.ReportUsage(ctx, 12, 1)
		return nil, &handler.RetryableUpstream{Err: errors.New("429")}
	}})
	in := inv("research.search")
	in.Ceilings.MaxCostCents = 100
	r, err := e.iv.Invoke(context.Background(), "research.search", args("to", "q"), in)
	code(t, r, err, toolplane.CodeRetryableUpstream)
	if cost, _ := e.store.RunTreeCost(context.Background(), "org-1", "run-1"); cost != 0 {
		t.Fatalf("cost = %d", cost)
	}
}

func TestMeteredCallRefusedOverTheRunTreeCeiling(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: metered(), fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		_ = handler.ReportUsage(ctx, 60, 1)
		return map[string]any{}, nil
	}})
	root := inv("research.search")
	root.Ceilings.MaxCostCents = 100
	must(t).OK(e.iv.Invoke(context.Background(), "research.search", args("to", "a"), root))
	// A child run spends against the same tree.
	child := *root
	child.RunID, child.RootRunID = "run-1-child", "run-1"
	must(t).OK(e.iv.Invoke(context.Background(), "research.search", args("to", "b"), &child))
	r, err := e.iv.Invoke(context.Background(), "research.search", args("to", "c"), root)
	code(t, r, err, toolplane.CodeBudgetExhausted)
	if r.Stop != toolplane.StopBudgetExhausted || e.count("research.search") != 2 {
		t.Fatalf("stop=%q runs=%d", r.Stop, e.count("research.search"))
	}
}

func TestWiringFaultReportedOncePerCauseAndLoggedEveryTime(t *testing.T) {
	t.Parallel()
	e := newEnv(t, newStore(t), tool{def: metered(), fn: ok(map[string]any{})})
	in := inv("research.search")
	in.RunID = "" // a metered call outside any run: a defect of the call site
	for range 5 {
		r, err := e.iv.Invoke(context.Background(), "research.search", args("to", "q"), in)
		code(t, r, err, toolplane.CodeInternalError)
		if r.Stop != toolplane.StopFault {
			t.Fatalf("stop = %q", r.Stop)
		}
	}
	if e.reporter.n.Load() != 1 || e.count("research.search") != 0 {
		t.Fatalf("reports=%d runs=%d", e.reporter.n.Load(), e.count("research.search"))
	}
}

// tracedEnv answers an invoker whose spans go to an in-memory recorder
// of the real OpenTelemetry SDK, and whose logs go to buf.
func tracedEnv(t *testing.T, buf *bytes.Buffer, tools ...tool) (*env, *tracetest.SpanRecorder) {
	e := newEnv(t, newStore(t), tools...)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	hs := handler.NewRegistry()
	var defs []toolplane.Definition
	for _, tl := range tools {
		b, _ := handler.BindFunc(tl.def.Binding.Handler.Key, tl.fn, tl.classify, tl.opts...)
		_ = hs.Register(b)
		defs = append(defs, tl.def)
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	e.iv, err = invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: e.store, Policy: policy.Grants{}, Approvals: e.approvals,
		Tracer: tp.Tracer("test"), Logger: slog.New(slog.NewTextHandler(buf, nil)), Now: e.clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e, rec
}

func TestSpans(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	e, rec := tracedEnv(t, &logs,
		tool{def: def("crm.update", toolplane.EffectWrite), fn: ok(map[string]any{})},
		tool{def: gated("email.send"), fn: ok(map[string]any{})})
	in := inv("crm.update", "email.send")
	ctx := context.Background()
	must(t).OK(e.iv.Invoke(ctx, "crm.update", map[string]any{"to": "a", "password": "hunter2"}, in))
	must(t).OK(e.iv.Invoke(ctx, "crm.update", map[string]any{"to": "a", "password": "hunter2"}, in))
	r, err := e.iv.Invoke(ctx, "crm.update", args("to", "b"), inv())
	code(t, r, err, toolplane.CodeDenied)
	_, err = e.iv.Invoke(ctx, "email.send", args("to", "jo"), in)
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatal(err)
	}
	spans := callSpans(rec.Ended())
	if len(spans) != 4 {
		t.Fatalf("%d spans", len(spans))
	}
	attr := func(i int, key string) string {
		for _, kv := range spans[i].Attributes() {
			if string(kv.Key) == key {
				return kv.Value.Emit()
			}
		}
		return ""
	}
	// The arguments are not on the span, redacted or not: their hash is,
	// the same for the same arguments.
	for i, sp := range spans {
		for _, kv := range sp.Attributes() {
			if strings.Contains(kv.Value.Emit(), "hunter2") {
				t.Errorf("span %d carries an argument's value in %s: %s", i, kv.Key, kv.Value.Emit())
			}
		}
	}
	if h := attr(0, "tool.arguments_hash"); h == "" || attr(1, "tool.arguments_hash") != h || attr(3, "tool.arguments_hash") == h {
		t.Errorf("arguments hashes %q %q %q: the same arguments must hash the same, others not", h, attr(1, "tool.arguments_hash"), attr(3, "tool.arguments_hash"))
	}
	if spans[0].Status().Code != codes.Ok || attr(0, "toolplane.replayed") != "false" || attr(1, "toolplane.replayed") != "true" {
		t.Errorf("replay tagging: %v %s %s", spans[0].Status(), attr(0, "toolplane.replayed"), attr(1, "toolplane.replayed"))
	}
	if spans[2].Status().Code != codes.Error || spans[2].Status().Description != "denied" || attr(2, "tool.error_code") != "denied" {
		t.Errorf("a refusal closes error with its code: %+v", spans[2].Status())
	}
	if spans[3].Status().Code != codes.Ok || attr(3, "toolplane.approval_id") != ar.ID {
		t.Errorf("an approval closes ok carrying its id: %+v %s", spans[3].Status(), attr(3, "toolplane.approval_id"))
	}
	if strings.Contains(logs.String(), "hunter2") {
		t.Error("a credential reached the logs")
	}
}
