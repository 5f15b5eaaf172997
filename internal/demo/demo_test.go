package demo_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func setup(t *testing.T) (*invoke.Invoker, *approval.Service, *sqlite.Store) {
	t.Helper()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return iv, approvals, store
}

func call() *toolplane.Invocation {
	return &toolplane.Invocation{OrganizationID: "org-1", RunID: "run-1", StepPath: "agent",
		Principal: toolplane.Principal{ID: "agent-1", Tools: []string{"demo.search_tickets", "demo.add_note", "demo.refund_order", "demo.analyze_text"}},
		Ceilings:  toolplane.Ceilings{MaxCostCents: 100}}
}

func TestDemoCatalogueShowsTheProduct(t *testing.T) {
	t.Parallel()
	iv, approvals, store := setup(t)
	ctx := context.Background()

	// A read, with its arguments trimmed and validated.
	r, err := iv.InvokeJSON(ctx, "demo.search_tickets", []byte(`{"query":"  cracked "}`), call())
	if err != nil || !r.OK || *r.Meta.Count != 1 || r.Data.([]any)[0].(map[string]any)["id"] != "t-1001" {
		t.Fatalf("search: %+v %v", r, err)
	}
	// A validation refusal names the field.
	r, _ = iv.InvokeJSON(ctx, "demo.add_note", []byte(`{"ticket_id":"t-1001"}`), call())
	if r.OK || r.Error.Code != toolplane.CodeInvalidInput || r.Error.FieldPath != "/text" {
		t.Fatalf("validation: %+v", r.Error)
	}
	// A write called twice: one note, the second answer replayed.
	args := []byte(`{"ticket_id":"t-1001","text":"Replacement shipped."}`)
	first, err := iv.InvokeJSON(ctx, "demo.add_note", args, call())
	second, err2 := iv.InvokeJSON(ctx, "demo.add_note", args, call())
	if err != nil || err2 != nil || !first.OK || !second.Meta.Replayed || first.Data.(map[string]any)["note_id"] != second.Data.(map[string]any)["note_id"] {
		t.Fatalf("write twice: %+v %+v", first, second)
	}
	// A business failure is a value.
	r, _ = iv.InvokeJSON(ctx, "demo.add_note", []byte(`{"ticket_id":"t-9","text":"x"}`), call())
	if r.OK || r.Error.Code != toolplane.CodeNotFound {
		t.Fatalf("missing ticket: %+v", r)
	}
	// A destructive write waits for a person, with a preview.
	_, err = iv.InvokeJSON(ctx, "demo.refund_order", []byte(`{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"}`), call())
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) || ar.Preview != "Refund 12.50 on order o-502 (charged twice)" {
		t.Fatalf("refund: %v", err)
	}
	if _, err := iv.Resolve(ctx, ar.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	r, err = iv.ExecuteApproved(ctx, "org-1", ar.ID)
	if err != nil || !r.OK || r.Data.(map[string]any)["remaining_cents"].(interface{ String() string }).String() != "0" {
		t.Fatalf("approved refund: %+v %v", r, err)
	}
	_ = approvals
	// A metered tool writes its usage.
	r, err = iv.InvokeJSON(ctx, "demo.analyze_text", []byte(`{"text":"Tools act. Skills teach. Tools act again!"}`), call())
	if err != nil || !r.OK || r.Meta.UsageID == "" || !strings.Contains(strings.Join(toStrings(r.Data.(map[string]any)["top_words"]), ","), "tools") {
		t.Fatalf("analyze: %+v %v", r, err)
	}
	if cost, _ := store.RunTreeCost(ctx, "org-1", "run-1"); cost != 1 {
		t.Fatalf("cost = %d", cost)
	}
}

func toStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}

// A refund is at least one cent: a zero or negative amount (a charge, in
// effect) is invalid_input at the field, before any approval is filed,
// and the handler refuses it too, whatever its schema says.
func TestRefundRefusesNonPositiveAmounts(t *testing.T) {
	t.Parallel()
	iv, _, store := setup(t)
	ctx := context.Background()
	for _, amount := range []string{"-40000", "-1", "0", "-0.0", "-1e2"} {
		r, err := iv.InvokeJSON(ctx, "demo.refund_order", []byte(`{"order_id":"o-502","amount_cents":`+amount+`,"reason":"goodwill"}`), call())
		if err != nil || r.OK || r.Error.Code != toolplane.CodeInvalidInput || r.Error.FieldPath != "/amount_cents" {
			t.Fatalf("amount %s: %+v %v", amount, r, err)
		}
	}
	pending, _, err := store.ListApprovals(ctx, "org-1", toolplane.ApprovalPending, "", 10)
	if err != nil || len(pending) != 0 {
		t.Fatalf("%d approvals filed (%v)", len(pending), err)
	}
	// The handler's own check, for a deployment whose schema was loosened.
	_, bs, err := demo.New().Catalogue()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range bs {
		if b.Key != "demo.refund_order" {
			continue
		}
		_, err := b.Invoke(ctx, handler.Call{Tool: "demo.refund_order"}, map[string]any{"order_id": "o-502", "amount_cents": json.Number("-500"), "reason": "x"})
		var inv *handler.Invalid
		if !errors.As(err, &inv) || inv.FieldPath != "/amount_cents" {
			t.Fatalf("handler: %v", err)
		}
	}
}
