package compat

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

func ptr[T any](v T) *T { return &v }

// refundOrder is a realistic published definition the cases below edit.
func refundOrder() *toolplane.Definition {
	return &toolplane.Definition{
		Name:         "payments.refund_order",
		Version:      "2.1.0",
		Description:  "Refund part or all of an order.",
		InputSchema:  json.RawMessage(obj([]string{"order_id", "amount"}, `"order_id":{"type":"string","pattern":"^ord_"}`, `"amount":{"type":"integer","minimum":1,"maximum":100}`, `"reason":{"type":"string","enum":["defective","other"]}`)),
		OutputSchema: json.RawMessage(obj([]string{"refund_id", "status"}, `"refund_id":{"type":"string"}`, `"status":{"type":"string","enum":["pending","done"]}`, `"note":{"type":"string"}`)),
		Kind:         toolplane.KindInternal,
		Binding:      toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "payments.refund_order"}},
		Effect:       toolplane.EffectWrite,
		Annotations:  toolplane.Annotations{Idempotent: true},
		Connection:   "stripe",
		Timeout:      toolplane.Duration(10 * time.Second),
		Repeatable:   ptr(false),
		Tags:         []string{"finance", "support"},
		Owner:        "payments",
	}
}

func TestClassifyMetadata(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		before func(d *toolplane.Definition)
		after  func(d *toolplane.Definition)
		want   []string
	}{
		{"nothing", nil, func(d *toolplane.Definition) { d.Version = "2.1.1" }, nil},
		{"description", nil, func(d *toolplane.Definition) { d.Description = "Refund an order." }, []string{"description_changed description PATCH"}},
		{"tags reordered", nil, func(d *toolplane.Definition) { d.Tags = []string{"support", "finance"} }, nil},
		{"tags changed", nil, func(d *toolplane.Definition) { d.Tags = []string{"finance"} }, []string{"metadata_changed tags PATCH"}},
		{"owner, on-call, cost centre", nil, func(d *toolplane.Definition) { d.Owner, d.OnCall, d.CostCenter = "billing", "pager", "cc-1" },
			[]string{"metadata_changed cost_center PATCH", "metadata_changed on_call PATCH", "metadata_changed owner PATCH"}},
		{"approval preview", nil, func(d *toolplane.Definition) { d.ApprovalPreview = true }, []string{"metadata_changed approval_preview PATCH"}},
		{"schema hash is derived", nil, func(d *toolplane.Definition) { d.SchemaHash = "sha256:abc" }, nil},

		{"kind", nil, func(d *toolplane.Definition) { d.Kind = toolplane.KindVendor }, []string{"behaviour_changed kind MAJOR"}},
		{"handler key", nil, func(d *toolplane.Definition) {
			d.Binding.Handler = &toolplane.HandlerBinding{Key: "payments.refund_v2"}
		}, []string{"behaviour_changed binding.handler.key MINOR"}},
		{"handler to remote", nil, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "c1", RemoteName: "refund"}}
		}, []string{"behaviour_changed binding MAJOR"}},
		{"remote server", func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "c1", RemoteName: "refund"}}
		}, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "c2", RemoteName: "refund"}}
		}, []string{"behaviour_changed binding.remote MAJOR"}},

		{"handler to http", nil, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://pay.example/refunds"}}
		}, []string{"behaviour_changed binding MAJOR"}},
		{"http to sql", func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://pay.example/refunds"}}
		}, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: "INSERT INTO refunds VALUES (:order_id)"}}
		}, []string{"behaviour_changed binding MAJOR"}},
		{"http host", func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://pay.example/refunds"}}
		}, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://PAY.other.example/refunds"}}
		}, []string{"behaviour_changed binding.http.url MAJOR"}},
		{"http method", func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://pay.example/refunds"}}
		}, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "PUT", URL: "https://pay.example/refunds"}}
		}, []string{"behaviour_changed binding.http.method MAJOR"}},
		{"http path and header", func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "POST", URL: "https://pay.example/refunds"}}
		}, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "post", URL: "https://Pay.Example/v2/refunds", Headers: map[string]string{"X-Team": "support"}}}
		}, []string{"behaviour_changed binding.http MINOR"}},
		{"sql statement", func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: "UPDATE orders SET refunded = true WHERE id = :order_id"}}
		}, func(d *toolplane.Definition) {
			d.Binding = toolplane.Binding{SQL: &toolplane.SQLBinding{Statement: "UPDATE orders SET refunded = true WHERE id = :order_id", MaxRows: 5}}
		}, []string{"behaviour_changed binding.sql MINOR"}},

		{"read to write", func(d *toolplane.Definition) { d.Effect = toolplane.EffectRead }, nil, []string{"behaviour_changed effect MAJOR"}},
		{"write to read", nil, func(d *toolplane.Definition) { d.Effect = toolplane.EffectRead }, []string{"behaviour_changed effect MAJOR"}},
		{"write to send", nil, func(d *toolplane.Definition) { d.Effect = toolplane.EffectSend }, []string{"behaviour_changed effect MAJOR"}},
		{"destructive on", nil, func(d *toolplane.Definition) { d.Annotations.Destructive = true }, []string{"behaviour_changed annotations.destructive MAJOR"}},
		{"destructive off", func(d *toolplane.Definition) { d.Annotations.Destructive = true }, nil, []string{"behaviour_changed annotations.destructive MAJOR"}},
		{"requires approval on", nil, func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true }, []string{"behaviour_changed annotations.requires_approval MAJOR"}},
		{"requires approval off", func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true }, nil, []string{"behaviour_changed annotations.requires_approval MAJOR"}},
		{"long running", nil, func(d *toolplane.Definition) { d.Annotations.LongRunning, d.Mode = true, toolplane.ModeAsync },
			[]string{"behaviour_changed annotations.long_running MAJOR", "behaviour_changed mode MAJOR"}},
		{"open world on", nil, func(d *toolplane.Definition) { d.Annotations.OpenWorld = true }, []string{"behaviour_changed annotations.open_world MAJOR"}},
		{"open world off", func(d *toolplane.Definition) { d.Annotations.OpenWorld = true }, nil, []string{"behaviour_changed annotations.open_world MINOR"}},
		{"idempotent", nil, func(d *toolplane.Definition) { d.Annotations.Idempotent = false }, []string{"behaviour_changed annotations.idempotent MINOR"}},
		{"mode stated sync", nil, func(d *toolplane.Definition) { d.Mode = toolplane.ModeSync }, nil},

		{"timeout lowered", nil, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(5 * time.Second) }, []string{"behaviour_changed timeout MINOR"}},
		{"timeout raised", nil, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(20 * time.Second) }, []string{"metadata_changed timeout PATCH"}},
		{"timeout default stated", func(d *toolplane.Definition) { d.Timeout = 0 }, func(d *toolplane.Definition) { d.Timeout = toolplane.Duration(30 * time.Second) }, nil},
		{"retry stated none", nil, func(d *toolplane.Definition) { d.Retry = toolplane.RetryNone }, nil},
		{"retry safe", func(d *toolplane.Definition) { d.Effect, d.Repeatable = toolplane.EffectRead, nil }, func(d *toolplane.Definition) {
			d.Effect, d.Repeatable, d.Retry = toolplane.EffectRead, nil, toolplane.RetrySafe
		}, []string{"behaviour_changed retry MINOR"}},
		{"replay enabled", nil, func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 3} }, []string{"behaviour_changed replay MAJOR"}},
		{"replay raised", func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 2} }, func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 3} }, []string{"behaviour_changed replay MAJOR"}},
		{"price added", nil, func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 5} }, []string{"behaviour_changed price MINOR"}},
		{"price raised", func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 5} }, func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 6} }, []string{"behaviour_changed price MINOR"}},
		{"price lowered", func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 5} }, func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 2} }, []string{"behaviour_changed price PATCH"}},
		{"price read from another field", func(d *toolplane.Definition) { d.Price = &toolplane.Price{Field: "/a", MaxCents: 9} },
			func(d *toolplane.Definition) { d.Price = &toolplane.Price{Field: "/b", MaxCents: 9} }, []string{"behaviour_changed price MINOR"}},
		{"price unchanged", func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 5} }, func(d *toolplane.Definition) { d.Price = &toolplane.Price{Cents: 5} }, nil},
		{"replay lowered", func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 3} }, func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 1} }, []string{"behaviour_changed replay MINOR"}},
		{"replay disabled", func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 3} }, nil, []string{"behaviour_changed replay MINOR"}},
		// Attempts inside the call are operational: a second attempt is
		// made only where it cannot be a second effect.
		{"attempts raised", nil, func(d *toolplane.Definition) { d.Execution = &toolplane.Execution{MaxAttempts: 5} }, []string{"behaviour_changed execution.max_attempts MINOR"}},
		{"the default attempts stated", nil, func(d *toolplane.Definition) {
			d.Execution = &toolplane.Execution{MaxAttempts: toolplane.DefaultMaxAttempts}
		}, nil},
		{"attempt bound and pauses", func(d *toolplane.Definition) {
			d.Execution = &toolplane.Execution{AttemptTimeout: toolplane.Duration(time.Second)}
		}, func(d *toolplane.Definition) {
			d.Execution = &toolplane.Execution{AttemptTimeout: toolplane.Duration(2 * time.Second), Backoff: toolplane.Duration(time.Second), MaxBackoff: toolplane.Duration(time.Minute)}
		}, []string{"behaviour_changed execution.attempt_timeout MINOR", "behaviour_changed execution.backoff MINOR", "behaviour_changed execution.max_backoff MINOR"}},
		{"traffic fields", nil, func(d *toolplane.Definition) {
			d.Execution = &toolplane.Execution{MaxInFlight: 5, RatePerMinute: 60, Priority: toolplane.PriorityCritical}
		}, []string{"behaviour_changed execution.max_in_flight MINOR", "behaviour_changed execution.priority MINOR", "behaviour_changed execution.rate_per_minute MINOR"}},
		{"metered on", nil, func(d *toolplane.Definition) { d.Metered = true }, []string{"behaviour_changed metered MAJOR"}},
		{"metered off", func(d *toolplane.Definition) { d.Metered = true }, nil, []string{"behaviour_changed metered MINOR"}},
		{"repeatable unset", nil, func(d *toolplane.Definition) { d.Repeatable = nil }, []string{"behaviour_changed repeatable MAJOR"}},
		{"connection removed", nil, func(d *toolplane.Definition) { d.Connection = "" }, []string{"behaviour_changed connection MINOR"}},
		{"connection added", func(d *toolplane.Definition) { d.Connection = "" }, nil, []string{"behaviour_changed connection MAJOR"}},
		{"connection changed", nil, func(d *toolplane.Definition) { d.Connection = "adyen" }, []string{"behaviour_changed connection MAJOR"}},

		{"approval default stated", nil, func(d *toolplane.Definition) {
			d.Approval = &toolplane.ApprovalPolicy{OnTimeout: toolplane.OnTimeoutDeny}
		}, nil},
		{"approvers", nil, func(d *toolplane.Definition) { d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"finance"}} }, []string{"behaviour_changed approval.chain MAJOR"}},
		{"escalate on timeout", func(d *toolplane.Definition) { d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"a", "b"}} }, func(d *toolplane.Definition) {
			d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"a", "b"}, OnTimeout: toolplane.OnTimeoutEscalate}
		}, []string{"behaviour_changed approval.on_timeout MAJOR"}},
		{"approval wait", nil, func(d *toolplane.Definition) {
			d.Approval = &toolplane.ApprovalPolicy{TTL: toolplane.Duration(time.Hour)}
		}, []string{"behaviour_changed approval.ttl MINOR"}},

		{"policy fact added", nil, func(d *toolplane.Definition) { d.PolicyFacts = []string{"order_total"} }, []string{"behaviour_changed policy_facts MINOR"}},
		{"policy fact removed", func(d *toolplane.Definition) { d.PolicyFacts = []string{"order_total"} }, nil, []string{"behaviour_changed policy_facts MAJOR"}},
		{"batch bound added", nil, func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 10 }, []string{"behaviour_changed max_batch_size MAJOR"}},
		{"batch bound removed", func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 10 }, nil, []string{"behaviour_changed max_batch_size MINOR"}},
		{"batch bound lowered", func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 10 }, func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 5 }, []string{"behaviour_changed max_batch_size MAJOR"}},
		{"batch bound raised", func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 10 }, func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 50 }, []string{"behaviour_changed max_batch_size MINOR"}},
		{"batch argument moved", func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "orders", 10 }, func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "lines", 10 }, []string{"behaviour_changed batch_argument MAJOR"}},
		{"max results", nil, func(d *toolplane.Definition) { d.MaxResults = 50 }, []string{"behaviour_changed max_results MINOR"}},
		{"max output bytes", nil, func(d *toolplane.Definition) { d.MaxOutputBytes = 1024 }, []string{"behaviour_changed max_output_bytes MINOR"}},
		{"item kind added", nil, func(d *toolplane.Definition) { d.ItemKind = "payments.refund" }, []string{"behaviour_changed item_kind MINOR"}},
		{"item kind changed", func(d *toolplane.Definition) { d.ItemKind = "payments.refund" }, func(d *toolplane.Definition) { d.ItemKind = "payments.credit" }, []string{"behaviour_changed item_kind MAJOR"}},

		{"error schema declared", nil, func(d *toolplane.Definition) { d.ErrorSchema = json.RawMessage(`{"type":"object"}`) }, []string{"constraint_narrowed (root) MINOR"}},
		{"error schema withdrawn", func(d *toolplane.Definition) { d.ErrorSchema = json.RawMessage(`{"type":"object"}`) }, nil, []string{"constraint_widened (root) MAJOR"}},
		{"error codes added", func(d *toolplane.Definition) {
			d.ErrorSchema = json.RawMessage(`{"properties":{"code":{"enum":["not_found"]}}}`)
		}, func(d *toolplane.Definition) {
			d.ErrorSchema = json.RawMessage(`{"properties":{"code":{"enum":["not_found","expired"]}}}`)
		}, []string{"enum_values_added code MAJOR"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			old, next := refundOrder(), refundOrder()
			if tc.before != nil {
				tc.before(old)
				tc.before(next)
			}
			if tc.after != nil {
				tc.after(next)
			} else {
				next = refundOrder()
			}
			rep, err := Classify(old, next)
			if err != nil {
				t.Fatalf("Classify: %v", err)
			}
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if s := summary(rep.Changes); !slices.Equal(s, want) {
				t.Fatalf("changes:\n got %q\nwant %q\n%v", s, want, rep.Changes)
			}
			if rep.Required != maxBump(rep.Changes) {
				t.Errorf("required %v, changes need %v", rep.Required, maxBump(rep.Changes))
			}
		})
	}
}

func TestClassifySchemas(t *testing.T) {
	t.Parallel()
	old, next := refundOrder(), refundOrder()
	next.InputSchema = json.RawMessage(obj([]string{"order_id", "amount"}, `"order_id":{"type":"string","pattern":"^ord_"}`, `"amount":{"type":"integer","minimum":1,"maximum":500}`, `"reason":{"type":"string","enum":["defective","other"]}`))
	next.OutputSchema = json.RawMessage(obj([]string{"refund_id", "status"}, `"refund_id":{"type":"string"}`, `"status":{"type":"string","enum":["pending","done","failed"]}`, `"note":{"type":"string"}`))
	next.Description = "Refund an order."
	rep, err := Classify(old, next)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"input amount: maximum raised from 100 to 500 — needs MINOR", `output status: enum values added: "failed" — needs MAJOR`, "definition description: changed — needs PATCH"}
	var got []string
	for _, c := range rep.Changes {
		got = append(got, c.String())
	}
	if !slices.Equal(got, want) {
		t.Fatalf("changes:\n got %q\nwant %q", got, want)
	}
	if rep.Required != Major {
		t.Errorf("required %v, want MAJOR", rep.Required)
	}
}

func TestClassifyErrors(t *testing.T) {
	t.Parallel()
	renamed := refundOrder()
	renamed.Name = "payments.refund"
	broken := refundOrder()
	broken.OutputSchema = json.RawMessage(`{"type":`)
	brokenErr := refundOrder()
	brokenErr.ErrorSchema = json.RawMessage(`[1]`)
	cases := []struct {
		name      string
		old, next *toolplane.Definition
		want      string
	}{
		{"nil", nil, refundOrder(), "both"},
		{"renamed", refundOrder(), renamed, "different tools"},
		{"broken output", refundOrder(), broken, "new output schema: not JSON"},
		{"broken error schema", refundOrder(), brokenErr, "new error schema: not a JSON Schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := Classify(tc.old, tc.next)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestUnknownFields stands in for a Definition field added after the rules
// were written: it must need MAJOR until someone classifies it.
func TestUnknownFields(t *testing.T) {
	t.Parallel()
	a := map[string]any{"name": "x", "sla": "gold", "annotations": map[string]any{"destructive": true, "sandboxed": true}}
	b := map[string]any{"name": "y", "sla": "silver", "annotations": map[string]any{"destructive": false}, "region": "eu"}
	got := residueDiff(a, b, knownFields)
	want := []string{"annotations.sandboxed", "region", "sla"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	// Every field Definition has today is known: a definition with all of
	// them set leaves no residue.
	full := refundOrder()
	full.Binding.Remote = &toolplane.RemoteBinding{ConnectionID: "c", RemoteName: "r"}
	full.ErrorSchema = json.RawMessage(`{}`)
	full.SchemaHash, full.Retry, full.Mode = "h", toolplane.RetryNone, toolplane.ModeSync
	full.Replay = &toolplane.Replay{MaxAttempts: 1}
	full.Metered, full.ApprovalPreview = true, true
	full.Approval = &toolplane.ApprovalPolicy{Chain: []string{"a"}, OnTimeout: "deny", TTL: toolplane.Duration(time.Minute)}
	full.PolicyFacts, full.BatchArgument, full.MaxBatchSize = []string{"f"}, "a", 1
	full.MaxResults, full.MaxOutputBytes, full.ItemKind = 1, 2, "k.k"
	full.OnCall, full.CostCenter = "o", "c"
	full.Annotations = toolplane.Annotations{Destructive: true, Idempotent: true, RequiresApproval: true, LongRunning: true, OpenWorld: true}
	fullRaw, err := asJSON(full)
	if err != nil {
		t.Fatal(err)
	}
	left := map[string]any{}
	residue(fullRaw, knownFields, "", left)
	if len(left) != 0 {
		t.Fatalf("fields the gate does not classify: %v", left)
	}
}
