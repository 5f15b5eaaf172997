package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// TestOverview: an auditor's overview counts the organization's calls
// (made through the API, so through the invoker and its audit events),
// draws its charts as SVG without a style attribute or a script, toggles
// between the hour and the day by link, and never counts another
// organization's calls; a person who may not read the audit trail is
// refused, and a tool's page shows its own panel to the auditor alone.
func TestOverview(t *testing.T) {
	t.Parallel()
	for _, backend := range backends() {
		t.Run(backend, func(t *testing.T) {
			t.Parallel()
			w := newWorldOn(t, backend)
			for i := range 3 {
				call := fmt.Sprintf(`{"arguments":{"account":%q,"note":"n"},"run_id":"run-ov-%d"}`, account, i)
				if status, body := w.api("POST", "/v1/tools/xss.meter/invoke", w.keys["agent"], call); status != http.StatusOK {
					t.Fatalf("xss.meter: %d %v", status, body)
				}
			}
			// The other organization: many failing, dear calls of a tool
			// and an agent of its own, now.
			for i := range 20 {
				ev := &toolplane.AuditEvent{ID: fmt.Sprintf("aud_theirs_%d", i), OrganizationID: other, RunID: "run-theirs", AgentID: "agent-theirs",
					Tool: "theirs.secret_tool", Source: toolplane.SourceREST, Outcome: "internal_error", LatencyMicros: 9_000_000, CostCents: 99_999,
					CreatedAt: time.Now()}
				if err := w.store.AppendAudit(context.Background(), ev); err != nil {
					t.Fatal(err)
				}
			}
			grace := w.browser()
			grace.signIn("grace")
			var p page
			// The calls' events may be written by the audit writer a
			// moment after their answers.
			for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				p = grace.get("/console/overview")
				if p.status != http.StatusOK {
					t.Fatalf("overview: %d\n%s", p.status, p.body)
				}
				if strings.Contains(p.body, "<dt>Calls</dt><dd>3") || time.Now().After(deadline) {
					break
				}
			}
			for _, want := range []string{"<dt>Calls</dt><dd>3", "$0.09", "<svg", "<rect", "xss.meter", htmlEscape(xssAgent), `aria-current="page">Last hour`, `href="/console/overview?window=day"`} {
				if !strings.Contains(p.body, want) {
					t.Errorf("the overview lacks %q\n%s", want, p.body)
				}
			}
			for _, never := range []string{"theirs.secret_tool", "agent-theirs", "$999", "style=", "<script>alert"} {
				if strings.Contains(p.body, never) {
					t.Errorf("the overview shows %q", never)
				}
			}
			if strings.Contains(p.body, "<script") && !strings.Contains(p.body, `<script src="/console/assets/console.js"`) {
				t.Errorf("the overview runs a script of its own")
			}
			day := grace.get("/console/overview?window=day")
			if day.status != http.StatusOK || !strings.Contains(day.body, `aria-current="page">Last day`) || !strings.Contains(day.body, "<dt>Calls</dt><dd>3") {
				t.Errorf("the day: %d\n%s", day.status, day.body)
			}
			if bad := grace.get("/console/overview?window=week"); bad.status != http.StatusBadRequest {
				t.Errorf("a week: %d, want 400", bad.status)
			}

			tool := grace.get("/console/catalog/xss.meter/1.0.0")
			if tool.status != http.StatusOK || !strings.Contains(tool.body, "Latency p50") || !strings.Contains(tool.body, `href="/console/catalog/xss.meter/1.0.0?window=hour"`) {
				t.Errorf("xss.meter's page has no traffic panel: %d\n%s", tool.status, tool.body)
			}
			other := grace.get("/console/catalog/xss.pay/1.2.0")
			if !strings.Contains(other.body, "Latency p50") || !strings.Contains(other.body, "<dt>Calls</dt><dd>0") {
				t.Errorf("xss.pay's panel counts calls of another tool:\n%s", other.body)
			}

			fin := w.browser()
			fin.signIn("fin")
			if p := fin.get("/console/overview"); p.status != http.StatusForbidden || strings.Contains(p.body, "xss.meter") {
				t.Errorf("an approver's overview: %d, want 403 without the traffic\n%s", p.status, p.body)
			}
			if p := fin.get("/console/catalog/xss.meter/1.0.0"); p.status != http.StatusOK || strings.Contains(p.body, "Latency p50") {
				t.Errorf("an approver's tool page: %d, want it without the traffic panel", p.status)
			}
		})
	}
}

func htmlEscape(s string) string {
	r := strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&#34;", "'", "&#39;")
	return r.Replace(s)
}
