package invoke_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/handler"
)

type refundIn struct {
	OrderID     string `json:"order_id"`
	AmountCents int64  `json:"amount_cents"`
}

// typedRefund is a write tool over Go types: its schema is derived from
// refundIn (or, with wide, hand-written wider than the type), and it
// records the amounts its handler and its preview were given.
func typedRefund(t *testing.T, wide, gate bool, seen *sync.Map) tool {
	t.Helper()
	d, err := handler.Define[refundIn, map[string]any](toolplane.Definition{
		Name: "pay.refund", Version: "1.0.0", Description: "Refund an order.", Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "pay.refund"}}, Effect: toolplane.EffectWrite,
	})
	if err != nil {
		t.Fatal(err)
	}
	if wide {
		d.InputSchema = json.RawMessage(`{"type":"object","required":["order_id","amount_cents"],"properties":{"order_id":{"type":"string"},"amount_cents":{"type":"integer"}}}`)
	}
	no := false
	d.Repeatable = &no
	if gate {
		d.Annotations.RequiresApproval = true
		d.ApprovalPreview = true
	}
	b, err := handler.Bind("pay.refund", func(_ context.Context, _ handler.Call, in refundIn) (map[string]any, error) {
		seen.Store("handler", in.AmountCents)
		return map[string]any{"refunded": in.AmountCents}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	preview := handler.TypedPreview(func(_ context.Context, _ handler.Call, in refundIn) (string, error) {
		seen.Store("preview", in.AmountCents)
		return fmt.Sprintf("Refund %d cents on %s", in.AmountCents, in.OrderID), nil
	})
	return tool{def: d, fn: b.Invoke, opts: []handler.Option{handler.WithPreview(preview)}}
}

func refundArgs(t *testing.T, amount string) any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(`{"order_id":"o-1","amount_cents":` + amount + `}`))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatal(err)
	}
	return v
}

// An integer an int64 cannot hold is invalid_input at its field, before
// anything runs: through the derived schema's bounds, and, for a schema
// written wider than the type, through the handler's own decoding. Never
// a platform fault.
func TestIntegersTheHandlerCannotHoldAreInvalidInput(t *testing.T) {
	t.Parallel()
	for _, wide := range []bool{false, true} {
		for _, amount := range []string{"1e400", "18446744073709551617", "9223372036854775808", "-9223372036854775809", "1.5"} {
			t.Run(fmt.Sprintf("wide=%v/%s", wide, amount), func(t *testing.T) {
				t.Parallel()
				var seen sync.Map
				e := newEnv(t, newStore(t), typedRefund(t, wide, false, &seen))
				r, err := e.iv.Invoke(context.Background(), "pay.refund", refundArgs(t, amount), inv("pay.refund"))
				code(t, r, err, toolplane.CodeInvalidInput)
				if r.Error.FieldPath != "/amount_cents" {
					t.Fatalf("field_path = %q in %+v", r.Error.FieldPath, r.Error)
				}
				if _, ran := seen.Load("handler"); ran {
					t.Fatal("the handler ran")
				}
			})
		}
	}
}

// 1e2 is the integer 100: the preview a person reads and the handler that
// runs after the approval both see 100, and so does the stored call.
func TestPreviewAndHandlerSeeCanonicalIntegers(t *testing.T) {
	t.Parallel()
	for _, amount := range []string{"1e2", "100.0", "1.00e2"} {
		t.Run(amount, func(t *testing.T) {
			t.Parallel()
			var seen sync.Map
			e := newEnv(t, newStore(t), typedRefund(t, false, true, &seen))
			in := inv("pay.refund")
			ar := must(t).Approval(e.iv.Invoke(context.Background(), "pay.refund", refundArgs(t, amount), in))
			if ar.Preview != "Refund 100 cents on o-1" {
				t.Fatalf("preview = %q", ar.Preview)
			}
			stored, err := e.store.GetApproval(context.Background(), "org-1", ar.ID)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(stored.Arguments), `"amount_cents":100`) {
				t.Fatalf("stored arguments = %s", stored.Arguments)
			}
			e.resolve(ar.ID, true)
			r := must(t).OK(e.iv.ExecuteApproved(context.Background(), "org-1", ar.ID))
			if got, _ := seen.Load("handler"); got != int64(100) {
				t.Fatalf("handler got %v (result %+v)", got, r)
			}
		})
	}
}

// A gated tool whose preview cannot read the arguments files no approval:
// the call is invalid_input at the field, and no person is asked to
// approve a blank line.
func TestUnreadableArgumentsFileNoBlankApproval(t *testing.T) {
	t.Parallel()
	var seen sync.Map
	e := newEnv(t, newStore(t), typedRefund(t, true, true, &seen))
	r, err := e.iv.Invoke(context.Background(), "pay.refund", refundArgs(t, "1e400"), inv("pay.refund"))
	code(t, r, err, toolplane.CodeInvalidInput)
	if r.Error.FieldPath != "/amount_cents" {
		t.Fatalf("field_path = %q", r.Error.FieldPath)
	}
	pending, _, err := e.store.ListApprovals(context.Background(), "org-1", toolplane.ApprovalPending, "", 10)
	if err != nil || len(pending) != 0 {
		t.Fatalf("%d approvals filed (%v)", len(pending), err)
	}
}
