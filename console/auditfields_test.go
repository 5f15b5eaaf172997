package console_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// An event's page shows what seed 003's event carries (kind, tenant,
// approver, cost, attempts, output hash, classifications, trace), and the
// list keeps its columns: none of it widens the table.
func TestAuditEventPageShowsTheEventsFields(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ev := &toolplane.AuditEvent{ID: "aud_fields", OrganizationID: org, RunID: "run-f", StepPath: "plan/2", AgentID: "agent-f",
		PrincipalID: "agent-f", KeyID: "key_f1", TenantID: "tenant-acme", Tool: "payments.refund", ToolVersion: "1.0.0",
		Effect: toolplane.EffectWrite, Destructive: true, Source: toolplane.SourceREST, Outcome: "ok",
		ApprovalID: "apr_f", ApproverID: "person-jane", TraceID: "4bf92f3577b34da6a3ce929d0e0e4736", SpanID: "00f067aa0ba902b7",
		Arguments: []byte(`{"amount_cents":500,"card":"[redacted]"}`), PIIFields: []string{"/email"}, Classifications: []string{"pii"},
		OutputHash: "sha256:9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", CostCents: 42, Attempts: 2,
		CreatedAt: time.Now()}
	if err := w.store.AppendAudit(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	root := w.browser()
	root.signIn("root")
	p := root.get("/console/audit/aud_fields")
	for _, want := range []string{"Kind", "call", "tenant-acme", "person-jane", "42¢", "<dt>Attempts</dt><dd>2</dd>", ev.OutputHash,
		"pii", "/email", ev.TraceID, ev.SpanID, "key_f1", "plan/2", "destructive", "[redacted]"} {
		if !strings.Contains(p.body, want) {
			t.Errorf("the event page lacks %q: %s", want, p.body)
		}
	}
	list := root.get("/console/audit")
	if strings.Contains(list.body, ev.OutputHash) || strings.Contains(list.body, "tenant-acme") {
		t.Errorf("the list shows an event's detail: %s", list.body)
	}
	row := list.body[strings.Index(list.body, "/audit/aud_fields"):]
	row = row[:strings.Index(row, "</tr>")]
	if n := strings.Count(row, "<td"); n != 5 {
		t.Errorf("the event's row has %d more cells after its first, want 5: %s", n, row)
	}

	// A control-plane event names its kind and subject.
	cp := &toolplane.AuditEvent{ID: "aud_cp", OrganizationID: org, Kind: toolplane.AuditKey, Subject: "key_new", PrincipalID: "root",
		Source: toolplane.SourceControl, Outcome: "created", CreatedAt: time.Now()}
	if err := w.store.AppendAudit(context.Background(), cp); err != nil {
		t.Fatal(err)
	}
	if p := root.get("/console/audit/aud_cp"); !strings.Contains(p.body, "<dd>key, about <code>key_new</code></dd>") {
		t.Errorf("the control-plane event's page does not name its kind and subject: %s", p.body)
	}
}
