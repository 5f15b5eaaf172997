package invoke_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/journal"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
)

// The secrets a call's arguments carry in the audit tests: one the input
// schema marks x-sensitive, one recognised by its shape, one by the name of
// its field. None may reach a stored event.
const (
	sensitiveCard = "4000056655665556"
	shapedSecret  = "sk_live_51HqLyjWDarjtT1zdp7dcXYZabc"
	namedSecret   = "hunter2-correct-horse"
)

const auditedIn = `{"type":"object","additionalProperties":false,"required":["amount_cents"],"properties":{
	"amount_cents":{"type":"integer"},
	"card":{"type":"string","x-sensitive":true},
	"email":{"type":"string","x-classification":"pii"},
	"iban":{"type":"string","x-classification":["financial","pii"]},
	"note":{"type":"string"},
	"api_token":{"type":"string"}}}`

// refundTool is a destructive, metered write whose every call needs a
// person's approval, retried when its downstream fails transiently.
func refundTool() toolplane.Definition {
	return def("payments.refund", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.InputSchema = json.RawMessage(auditedIn)
		d.Kind, d.Metered, d.Connection = toolplane.KindVendor, true, "payments"
		d.Annotations.Destructive, d.Annotations.RequiresApproval = true, true
		d.Execution = &toolplane.Execution{MaxAttempts: 2, Backoff: toolplane.Duration(time.Millisecond)}
	})
}

// auditedInvoker is an invoker on store with a tracer, approvals and the
// given tools, each bound to its function with the options given.
func auditedInvoker(t *testing.T, store toolplane.Store, fns map[string]handler.Func, opts []handler.Option, defs ...toolplane.Definition) (*invoke.Invoker, *approval.Service, *tracetest.SpanRecorder) {
	t.Helper()
	hs := handler.NewRegistry()
	for _, d := range defs {
		b, err := handler.BindFunc(d.Binding.Handler.Key, fns[d.Name], nil, opts...)
		if err != nil {
			t.Fatal(err)
		}
		if err := hs.Register(b); err != nil {
			t.Fatal(err)
		}
	}
	reg, _, err := registry.Build(defs, registry.Options{Bindings: bindings{hs}})
	if err != nil {
		t.Fatal(err)
	}
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals,
		Tracer: tp.Tracer("test"), Node: "test", LeaseMargin: time.Second, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return iv, approvals, rec
}

// events answers every audit event of org stored, newest first.
func events(t *testing.T, store toolplane.Store, org string) []toolplane.AuditEvent {
	t.Helper()
	var out []toolplane.AuditEvent
	after := ""
	for {
		evs, next, err := store.ListAudit(context.Background(), org, toolplane.AuditFilter{}, after, 100)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, evs...)
		if next == "" {
			return out
		}
		after = next
	}
}

// noSecretStored fails when any stored event of org, as JSON, holds one
// of the call's secrets.
func noSecretStored(t *testing.T, store toolplane.Store, org string) {
	t.Helper()
	for _, ev := range events(t, store, org) {
		b, err := json.Marshal(ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{sensitiveCard, shapedSecret, namedSecret} {
			if strings.Contains(string(b), s) {
				t.Errorf("event %s (%s) holds the secret %q: %s", ev.ID, ev.Outcome, s, b)
			}
		}
	}
}

func sha256Of(b []byte) string {
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:])
}

// TestCallEventCarriesEveryField: a destructive, metered write, approved
// by a person and retried once after a transient failure, is audited with
// its tenant, key, step, effect, destructiveness, trace and span, approver,
// arguments redacted (no x-sensitive value, no credential), classified
// fields, the hash of the result its caller was answered, its cost and
// its two attempts; the person's decision is one approval event however
// often it is repeated; no stored event holds a secret. On SQLite and
// PostgreSQL.
func TestCallEventCarriesEveryField(t *testing.T) {
	t.Parallel()
	for name, store := range claimStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			h := &attempts{script: []error{err503, nil}}
			metered := func(ctx context.Context, c handler.Call, a any) (any, error) {
				out, err := h.fn(ctx, c, a)
				if err == nil {
					if err := handler.ReportUsage(ctx, 37, 1); err != nil {
						return nil, err
					}
				}
				return out, err
			}
			iv, approvals, rec := auditedInvoker(t, store, map[string]handler.Func{"payments.refund": metered},
				[]handler.Option{handler.WithKeyedDownstream()}, refundTool())
			in := inv("payments.refund")
			in.OrganizationID, in.RunID = toolplane.NewID("org_"), toolplane.NewID("run_")
			in.TenantID, in.CredentialID, in.StepPath = "tenant-acme", "key_agent1", "plan/refund"
			a := map[string]any{"amount_cents": json.Number("5000"), "card": sensitiveCard, "email": "jo@acme.test",
				"note": "charged with " + shapedSecret + " and " + sensitiveCard, "api_token": namedSecret}

			ar := must(t).Approval(iv.Invoke(ctx, "payments.refund", a, in))
			jane := &toolplane.Credential{ID: "key_jane", OrganizationID: in.OrganizationID, Kind: toolplane.CredentialPerson,
				Subject: "person-jane", Roles: []string{toolplane.RoleApprover}}
			if _, err := approvals.Resolve(ctx, ar.ID, approval.Decision{Approve: true, Reason: "checked"}, jane, iv.CheckApproval); err != nil {
				t.Fatal(err)
			}
			// The same person answering again decides nothing, and records
			// nothing.
			if _, err := approvals.Resolve(ctx, ar.ID, approval.Decision{Approve: true}, jane, iv.CheckApproval); !errors.Is(err, approval.ErrNotPending) {
				t.Fatalf("a repeated decision: %v, want ErrNotPending", err)
			}
			r := must(t).OK(iv.ExecuteApproved(ctx, in.OrganizationID, ar.ID))
			if got := h.n.Load(); got != 2 {
				t.Fatalf("%d attempts, want 2", got)
			}

			var call *toolplane.AuditEvent
			var decided []toolplane.AuditEvent
			for _, ev := range events(t, store, in.OrganizationID) {
				switch {
				case ev.Kind == toolplane.AuditCall && ev.Outcome == "ok":
					if call != nil {
						t.Fatalf("two ok events: %s, %s", call.ID, ev.ID)
					}
					call = &ev
				case ev.Kind == toolplane.AuditApproval:
					decided = append(decided, ev)
				}
			}
			if call == nil {
				t.Fatal("no event of the approved call")
			}
			want := toolplane.AuditEvent{TenantID: "tenant-acme", KeyID: "key_agent1", StepPath: "plan/refund", Effect: toolplane.EffectWrite,
				Destructive: true, ApproverID: "person-jane", ApprovalID: ar.ID, CostCents: 37, Attempts: 2,
				PIIFields: []string{"/email"}, Classifications: []string{"pii"}, OutputHash: sha256Of(boundary.Render(r))}
			got := toolplane.AuditEvent{TenantID: call.TenantID, KeyID: call.KeyID, StepPath: call.StepPath, Effect: call.Effect,
				Destructive: call.Destructive, ApproverID: call.ApproverID, ApprovalID: call.ApprovalID, CostCents: call.CostCents,
				Attempts: call.Attempts, PIIFields: call.PIIFields, Classifications: call.Classifications, OutputHash: call.OutputHash}
			gb, _ := json.Marshal(got)
			wb, _ := json.Marshal(want)
			if string(gb) != string(wb) {
				t.Errorf("call event\n got %s\nwant %s", gb, wb)
			}
			// Its trace and span are the recorded span of the call.
			found := false
			for _, s := range rec.Ended() {
				sc := s.SpanContext()
				if sc.TraceID().String() == call.TraceID && sc.SpanID().String() == call.SpanID && s.Name() == "tool payments.refund" {
					found = true
				}
			}
			if call.TraceID == "" || call.SpanID == "" || !found {
				t.Errorf("trace %q span %q: not a recorded span of the call", call.TraceID, call.SpanID)
			}
			// Arguments: kept, redacted, the amount still readable.
			var kept map[string]any
			if err := json.Unmarshal(call.Arguments, &kept); err != nil {
				t.Fatalf("arguments %s: %v", call.Arguments, err)
			}
			if kept["card"] != boundary.Redacted || kept["api_token"] != boundary.Redacted || kept["amount_cents"] != float64(5000) || kept["email"] != "jo@acme.test" {
				t.Errorf("arguments kept = %s", call.Arguments)
			}

			// One decision, one event: kind approval, the person as
			// principal and approver, the approval as subject.
			var approved []toolplane.AuditEvent
			for _, ev := range decided {
				if ev.Outcome == approval.ApprovedOutcome {
					approved = append(approved, ev)
				}
			}
			if len(approved) != 1 {
				t.Fatalf("%d approved events, want 1: %+v", len(approved), decided)
			}
			d := approved[0]
			if d.PrincipalID != "person-jane" || d.ApproverID != "person-jane" || d.KeyID != "key_jane" || d.Subject != ar.ID ||
				d.ApprovalID != ar.ID || d.Source != toolplane.SourceControl || d.Tool != "payments.refund" || d.TenantID != "tenant-acme" {
				t.Errorf("decision event = %+v", d)
			}
			noSecretStored(t, store, in.OrganizationID)
		})
	}
}

// TestReadCallEventKeepsNoArgumentsUnlessClassified: a read of a tool
// that classifies nothing keeps no arguments; one that carried a
// classified field keeps them, redacted, with the field and its classes.
// A read answers its output hash too, and its one attempt.
func TestReadCallEventKeepsNoArgumentsUnlessClassified(t *testing.T) {
	t.Parallel()
	store := claimStores(t)["sqlite"]
	plain := def("crm.find", toolplane.EffectRead)
	classified := def("crm.lookup", toolplane.EffectRead, func(d *toolplane.Definition) { d.InputSchema = json.RawMessage(auditedIn) })
	iv, _, _ := auditedInvoker(t, store, map[string]handler.Func{"crm.find": ok(map[string]any{"n": 1}), "crm.lookup": ok(map[string]any{"n": 2})}, nil, plain, classified)
	ctx := context.Background()
	in := inv("crm.find", "crm.lookup")
	in.OrganizationID = toolplane.NewID("org_")
	r1 := must(t).OK(iv.Invoke(ctx, "crm.find", args("to", "jo"), in))
	r2 := must(t).OK(iv.Invoke(ctx, "crm.lookup", map[string]any{"amount_cents": json.Number("1"), "iban": "DE89370400440532013000", "card": sensitiveCard}, in))
	for _, ev := range events(t, store, in.OrganizationID) {
		switch ev.Tool {
		case "crm.find":
			if len(ev.Arguments) != 0 || ev.PIIFields != nil || ev.OutputHash != sha256Of(boundary.Render(r1)) || ev.Attempts != 1 || ev.Effect != toolplane.EffectRead {
				t.Errorf("plain read event = %+v", ev)
			}
		case "crm.lookup":
			if !slices.Equal(ev.PIIFields, []string{"/iban"}) || !slices.Equal(ev.Classifications, []string{"financial", "pii"}) ||
				!strings.Contains(string(ev.Arguments), "DE89370400440532013000") || strings.Contains(string(ev.Arguments), sensitiveCard) ||
				ev.OutputHash != sha256Of(boundary.Render(r2)) {
				t.Errorf("classified read event = %+v (arguments %s)", ev, ev.Arguments)
			}
		}
	}
}

// TestReconciliationIsOneAuditEvent: a person settling an uncertain
// action writes one event of kind reconciliation naming them as its
// principal and approver, with the hash of the result it settles on; a
// second settlement is refused and writes nothing. On both stores.
func TestReconciliationIsOneAuditEvent(t *testing.T) {
	t.Parallel()
	for name, store := range claimStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			d := def("crm.update", toolplane.EffectWrite)
			iv, _, _ := auditedInvoker(t, store, map[string]handler.Func{"crm.update": func(context.Context, handler.Call, any) (any, error) {
				return nil, mayHaveActed
			}}, nil, d)
			in := inv("crm.update")
			in.OrganizationID, in.RunID, in.TenantID = toolplane.NewID("org_"), toolplane.NewID("run_"), "tenant-b"
			a := args("to", "p1", "password", namedSecret)
			r, err := iv.Invoke(ctx, "crm.update", a, in)
			code(t, r, err, toolplane.CodeUncertain)
			key := invoke.Key(in, hashOf(t, a))
			ada := &toolplane.Credential{ID: "key_ada", OrganizationID: in.OrganizationID, Kind: toolplane.CredentialPerson, Subject: "person-ada",
				Roles: []string{toolplane.RoleApprover}}
			rec := invoke.Reconciliation{Output: map[string]any{"done": true}}
			res, err := iv.Reconcile(ctx, "crm.update", key, rec, ada)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := iv.Reconcile(ctx, "crm.update", key, rec, ada); !errors.Is(err, journal.ErrNotUncertain) {
				t.Fatalf("a second reconciliation: %v, want ErrNotUncertain", err)
			}
			var recs []toolplane.AuditEvent
			for _, ev := range events(t, store, in.OrganizationID) {
				if ev.Kind == toolplane.AuditReconciliation {
					recs = append(recs, ev)
				}
			}
			if len(recs) != 1 {
				t.Fatalf("%d reconciliation events, want 1", len(recs))
			}
			e := recs[0]
			if e.Outcome != "reconciled" || e.PrincipalID != "person-ada" || e.ApproverID != "person-ada" || e.KeyID != "key_ada" ||
				e.Subject != "crm.update" || e.Key != key || e.TenantID != "tenant-b" || e.OutputHash != sha256Of(boundary.Render(res)) || e.Attempts != 1 {
				t.Errorf("reconciliation event = %+v", e)
			}
			noSecretStored(t, store, in.OrganizationID)
		})
	}
}
