package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

type refundIn struct {
	OrderID     string `json:"order_id" jsonschema:"the order to refund"`
	AmountCents int64  `json:"amount_cents"`
	Note        string `json:"note,omitempty"`
}

type refundOut struct {
	RefundID string `json:"refund_id"`
	Status   string `json:"status"`
}

var errVendorTimeout = errors.New("vendor read timed out after the request was sent")

func classify(err error) Ending {
	switch {
	case errors.Is(err, errVendorTimeout):
		return Uncertain("the vendor may have refunded")
	case strings.Contains(err.Error(), "insufficient"):
		return Explain(toolplane.CodeConflict, "the order has no refundable balance left")
	}
	return Raise()
}

func TestHandlerClassification(t *testing.T) {
	t.Parallel()
	b, err := BindFunc("payments.refund", func(context.Context, Call, any) (any, error) { return nil, nil }, classify)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		err  error
		kind OutcomeKind
		code toolplane.Code
	}{
		{"retryable upstream releases", &RetryableUpstream{Err: errors.New("429")}, Release, toolplane.CodeRetryableUpstream},
		{"wrapped retryable upstream releases", fmt.Errorf("call vendor: %w", &RetryableUpstream{}), Release, toolplane.CodeRetryableUpstream},
		{"unavailable releases", &Unavailable{Err: errors.New("503")}, Release, toolplane.CodeUnavailable},
		{"a destination refused by egress releases as unavailable", fmt.Errorf("dial: %w", &DestinationRefused{Host: "db.internal", Addr: "10.0.0.5", Rule: "private address"}), Release, toolplane.CodeUnavailable},
		{"a refused destination wrapped in a neutral error is still refused", &Unavailable{Err: &DestinationRefused{Host: "h", Rule: "r"}}, Release, toolplane.CodeUnavailable},
		{"a refused credential releases as connection_expired", fmt.Errorf("call: %w", &CredentialRefused{Err: errors.New("HTTP 401")}), Release, toolplane.CodeConnectionExpired},
		{"not found is a definite value", &NotFound{Message: "no order ord_1"}, Definite, toolplane.CodeNotFound},
		{"invalid is a definite value", &Invalid{Message: "amount above the order total", FieldPath: "/amount_cents"}, Definite, toolplane.CodeInvalidInput},
		{"conflict is a definite value", &Conflict{Message: "already refunded"}, Definite, toolplane.CodeConflict},
		{"classify explains", errors.New("insufficient balance"), Definite, toolplane.CodeConflict},
		{"classify holds as uncertain", fmt.Errorf("refund: %w", errVendorTimeout), Held, ""},
		{"anything else raises", errors.New("database connection refused"), Fault, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := b.Classify(tt.err)
			if o.Kind != tt.kind {
				t.Fatalf("kind = %v, want %v", o.Kind, tt.kind)
			}
			if tt.code != "" && (o.Result.Error == nil || o.Result.Error.Code != tt.code) {
				t.Fatalf("result = %+v, want code %s", o.Result, tt.code)
			}
		})
	}
}

// A destination refused by egress tells the model only that it is not
// allowed, in the platform's words, and the operator the host, address
// and rule.
func TestDestinationRefusedDetailIsTheOperators(t *testing.T) {
	t.Parallel()
	b, err := BindFunc("crm.lookup", func(context.Context, Call, any) (any, error) { return nil, nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	o := b.Classify(&Unavailable{Err: &DestinationRefused{Host: "crm.internal", Addr: "10.0.0.5", Rule: "private address 10.0.0.5 is refused"}})
	if o.Result.Error == nil || o.Result.Error.Message != DestinationNotAllowed || o.Quoted {
		t.Fatalf("outcome %+v, want only that the destination is not allowed", o)
	}
	if strings.Contains(o.Result.Error.Message, "crm.internal") || strings.Contains(o.Result.Error.Message, "10.0.0.5") {
		t.Errorf("the model reads where: %s", o.Result.Error.Message)
	}
	if o.Detail != "egress refused crm.internal at 10.0.0.5: private address 10.0.0.5 is refused" {
		t.Errorf("detail = %q", o.Detail)
	}
}

// A handler cannot produce a platform code: an Explain naming one is a
// fault, never a result the model reads.
func TestHandlerCannotProducePlatformCode(t *testing.T) {
	t.Parallel()
	for _, code := range toolplane.Codes {
		b, _ := BindFunc("x.y", func(context.Context, Call, any) (any, error) { return nil, nil }, func(error) Ending {
			return Explain(code, "whatever")
		})
		o := b.Classify(errors.New("boom"))
		if ToolCode(code) {
			if o.Kind == Fault || o.Result.Error.Code != code {
				t.Errorf("tool code %s: outcome %+v", code, o)
			}
			continue
		}
		if o.Kind != Fault {
			t.Errorf("platform code %s escaped from a handler as %+v", code, o)
		}
	}
	for _, code := range []toolplane.Code{toolplane.CodeDenied, toolplane.CodeBudgetExhausted, toolplane.CodeInternalError, toolplane.CodeUncertain, toolplane.CodeRejected} {
		if ToolCode(code) {
			t.Errorf("%s must be a platform code", code)
		}
	}
}

// An error carrying its Ending ends the call as the ending says, with no
// classify function and whatever the binding's own says, wrapped or not;
// it answers no platform code either.
func TestEndingErrorEndsTheCall(t *testing.T) {
	t.Parallel()
	fn := func(context.Context, Call, any) (any, error) { return nil, nil }
	none, _ := BindFunc("x.none", fn, nil)
	other, _ := BindFunc("x.other", fn, func(error) Ending { return Uncertain("the binding's own") })
	tests := []struct {
		name string
		err  error
		kind OutcomeKind
		code toolplane.Code
		text string
	}{
		{"explained", Explain(toolplane.CodeConflict, "the order is closed").Err(), Definite, toolplane.CodeConflict, "the order is closed"},
		{"explained retryable releases", Explain(toolplane.CodeUnavailable, "the database is read-only").Err(), Release, toolplane.CodeUnavailable, "the database is read-only"},
		{"wrapped", fmt.Errorf("run: %w", Explain(toolplane.CodeRetryableUpstream, "busy").Err()), Release, toolplane.CodeRetryableUpstream, "busy"},
		{"uncertain holds", Uncertain("the commit's answer was lost").Err(), Held, "", "the commit's answer was lost"},
		{"a platform code raises", Explain(toolplane.CodeDenied, "no").Err(), Fault, "", "no"},
		{"raise raises", Raise().Err(), Fault, "", "the call ended in a platform fault"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			for _, b := range []*Binding{none, other} {
				o := b.Classify(tt.err)
				if o.Kind != tt.kind {
					t.Fatalf("%s: kind = %v, want %v", b.Key, o.Kind, tt.kind)
				}
				if tt.code != "" && (o.Result.Error == nil || o.Result.Error.Code != tt.code || o.Result.Error.Message != tt.text) {
					t.Fatalf("%s: result = %+v, want %s %q", b.Key, o.Result, tt.code, tt.text)
				}
				if tt.kind == Held && o.Reason != tt.text {
					t.Fatalf("%s: reason = %q, want %q", b.Key, o.Reason, tt.text)
				}
			}
			var e *EndingError
			if !errors.As(tt.err, &e) || e.Error() != tt.text {
				t.Errorf("the error reads %q, want %q", tt.err, tt.text)
			}
		})
	}
}

func TestNilClassifyRaises(t *testing.T) {
	t.Parallel()
	b, _ := BindFunc("x.y", func(context.Context, Call, any) (any, error) { return nil, nil }, nil)
	if o := b.Classify(errors.New("boom")); o.Kind != Fault {
		t.Fatalf("outcome = %+v", o)
	}
}

func TestDefineDerivesSchemasFromTypes(t *testing.T) {
	t.Parallel()
	d, err := Define[refundIn, refundOut](toolplane.Definition{Name: "payments.refund"})
	if err != nil {
		t.Fatal(err)
	}
	var in map[string]any
	if err := json.Unmarshal(d.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	if in["type"] != "object" || in["additionalProperties"] != false {
		t.Fatalf("input schema = %s", d.InputSchema)
	}
	req := fmt.Sprint(in["required"])
	if !strings.Contains(req, "order_id") || !strings.Contains(req, "amount_cents") || strings.Contains(req, "note") {
		t.Fatalf("required = %v", req)
	}
	if !strings.Contains(string(d.InputSchema), "the order to refund") || !strings.Contains(string(d.OutputSchema), "refund_id") {
		t.Fatalf("schemas = %s %s", d.InputSchema, d.OutputSchema)
	}
	if _, err := Define[string, refundOut](toolplane.Definition{Name: "a.b"}); err == nil {
		t.Fatal("a non-struct input was accepted")
	}
	if _, err := Define[refundIn, refundOut](toolplane.Definition{Name: "a.b", InputSchema: json.RawMessage(`{}`)}); err == nil {
		t.Fatal("hand-written schemas beside derived ones were accepted")
	}
}

func TestBindDecodesTypedInput(t *testing.T) {
	t.Parallel()
	b, err := Bind("payments.refund", func(_ context.Context, call Call, in refundIn) (refundOut, error) {
		return refundOut{RefundID: "r-" + in.OrderID + "-" + fmt.Sprint(in.AmountCents), Status: "pending"}, nil
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := b.Invoke(context.Background(), Call{Tool: "payments.refund"}, map[string]any{"order_id": "o1", "amount_cents": json.Number("250")})
	if err != nil {
		t.Fatal(err)
	}
	if got := out.(refundOut); got.RefundID != "r-o1-250" {
		t.Fatalf("out = %+v", got)
	}
	if _, err := b.Invoke(context.Background(), Call{Tool: "payments.refund"}, map[string]any{"order_id": "o1", "surprise": 1}); err == nil {
		t.Fatal("a field outside the type decoded silently")
	}
}

func TestPreviewAndSettlementOptions(t *testing.T) {
	t.Parallel()
	b, err := Bind("a.b", func(context.Context, Call, refundIn) (refundOut, error) { return refundOut{}, nil }, nil,
		WithPreview(TypedPreview(func(_ context.Context, _ Call, in refundIn) (string, error) { return "refund " + in.OrderID, nil })),
		WithSettlement(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	s, ok, err := b.Preview(context.Background(), Call{}, map[string]any{"order_id": "o9", "amount_cents": json.Number("1")})
	if !ok || err != nil || s != "refund o9" || !b.HasPreview() || b.SettleWithin() != time.Second {
		t.Fatalf("preview %q %v %v", s, ok, err)
	}
	if _, err := BindFunc("a.b", func(context.Context, Call, any) (any, error) { return nil, nil }, nil, WithSettlement(time.Microsecond)); err == nil {
		t.Fatal("a settlement window under 1ms was accepted")
	}
}

func TestRegistry(t *testing.T) {
	t.Parallel()
	r := NewRegistry()
	a, _ := BindFunc("a.b", func(context.Context, Call, any) (any, error) { return nil, nil }, nil)
	p, _ := BindFunc("c.d", func(context.Context, Call, any) (any, error) { return nil, nil }, nil,
		WithPreview(func(context.Context, Call, any) (string, error) { return "x", nil }))
	if err := r.Register(a, p); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(a); err == nil {
		t.Fatal("a key registered twice")
	}
	if found, preview := r.Handler("a.b"); !found || preview {
		t.Fatal("a.b")
	}
	if found, preview := r.Handler("c.d"); !found || !preview {
		t.Fatal("c.d")
	}
	if found, _ := r.Handler("e.f"); found {
		t.Fatal("e.f")
	}
	if strings.Join(r.Keys(), ",") != "a.b,c.d" {
		t.Fatal(r.Keys())
	}
}

func TestReportUsage(t *testing.T) {
	t.Parallel()
	if err := ReportUsage(context.Background(), 5, 1); !errors.Is(err, ErrNotMetered) {
		t.Fatalf("err = %v", err)
	}
	ctx, read := WithUsage(context.Background())
	if m := read(); m.Reported {
		t.Fatal("reported before any report")
	}
	_ = ReportUsage(ctx, 5, 1)
	_ = ReportUsage(ctx, 7, 2)
	if m := read(); !m.Reported || m.Cents != 7 || m.Units != 2 || m.Fault != nil {
		t.Fatalf("usage = %+v", m)
	}
	first, second := errors.New("no price field"), errors.New("later")
	_ = ReportUsageFault(ctx, first)
	_ = ReportUsageFault(ctx, second)
	if m := read(); !errors.Is(m.Fault, first) {
		t.Fatalf("fault = %v, want the first one", m.Fault)
	}
	if err := ReportUsageFault(context.Background(), first); !errors.Is(err, ErrNotMetered) {
		t.Fatalf("err = %v", err)
	}
}

func TestHandlerMessagesAreCleanedForTheModel(t *testing.T) {
	t.Parallel()
	b, _ := BindFunc("x.y", func(context.Context, Call, any) (any, error) { return nil, nil }, func(err error) Ending {
		return Explain(toolplane.CodeConflict, err.Error())
	})
	for _, err := range []error{
		&NotFound{Message: "no row\x00\x1b[31m here"},
		errors.New(strings.Repeat("x", 5000) + "\x07"),
	} {
		o := b.Classify(err)
		msg := o.Result.Error.Message
		if strings.ContainsAny(msg, "\x00\x1b\x07") || len(msg) > 1100 {
			t.Errorf("message not cleaned: %q (%d bytes)", msg[:min(len(msg), 40)], len(msg))
		}
	}
}

// A handler's message reaches the model through the same redaction as its
// answers, and the outcome says whether its text is the handler's own.
func TestHandlerMessagesAreRedactedAndMarkedQuoted(t *testing.T) {
	t.Parallel()
	b, err := BindFunc("vendor.call", func(context.Context, Call, any) (any, error) { return nil, nil }, func(err error) Ending {
		return Uncertain("lost after sending Authorization: Bearer abcdef0123456789")
	})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		err    error
		quoted bool
		text   func(Outcome) string
	}{
		{"a business error quotes the handler", &Invalid{Message: "key ghp_0123456789abcdefghijABCDEFGHIJ012345 refused"}, true, func(o Outcome) string { return o.Result.Error.Message }},
		{"an uncertain reason quotes the handler", errors.New("boom"), true, func(o Outcome) string { return o.Reason }},
		{"a neutral upstream error is the platform's text", &Unavailable{Err: errors.New("token=abc")}, false, func(o Outcome) string { return o.Result.Error.Message }},
		{"credentials named in a quoted message", &Invalid{Message: "login failed: db_password=hunter2, dsn mongodb://admin:s3cretpw@db/x?token=supersecret123"}, true, func(o Outcome) string { return o.Result.Error.Message }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o := b.Classify(tt.err)
			if o.Quoted != tt.quoted {
				t.Fatalf("quoted = %v, want %v", o.Quoted, tt.quoted)
			}
			if text := tt.text(o); strings.Contains(text, "ghp_0123") || strings.Contains(text, "abcdef0123456789") ||
				strings.Contains(text, "hunter2") || strings.Contains(text, "s3cretpw") || strings.Contains(text, "supersecret123") {
				t.Fatalf("a credential reached the message: %s", text)
			}
		})
	}
}
