package httpapi_test

import (
	"net/http"
	"testing"

	"github.com/toolplane/toolplane"
)

// GET /v1/runs/{id} answers a run as its calls made it: in order, with
// the approval a person decided and the call the grants denied, to an
// auditor of its own organization; anyone else's run is not found.
func TestRunIsShownToAnAuditorOfItsOrganization(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	calls := []struct {
		tool, args string
		want       int
	}{
		{"demo.search_tickets", `{"query":"cracked"}`, http.StatusOK},
		{"demo.refund_order", `{"order_id":"o-77","amount_cents":900,"reason":"arrived broken"}`, http.StatusAccepted},
		{"demo.analyze_text", `{"text":"x"}`, http.StatusOK},
	}
	var approvalID string
	for _, c := range calls {
		status, body := f.do(t, "POST", "/v1/tools/"+c.tool+"/invoke", f.agent, `{"arguments":`+c.args+`,"run_id":"run-rest"}`)
		if status != c.want {
			t.Fatalf("%s: %d %v", c.tool, status, body)
		}
		if a, ok := body["approval"].(map[string]any); ok {
			approvalID = a["id"].(string)
		}
	}
	if status, body := f.do(t, "POST", "/v1/approvals/"+approvalID+"/approve", f.person, ""); status != http.StatusOK {
		t.Fatalf("approve: %d %v", status, body)
	}
	if status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, `{"arguments":{"query":"lid"},"run_id":"run-plain"}`); status != http.StatusOK {
		t.Fatalf("a run asking no approval: %d %v", status, body)
	}
	status, run := f.do(t, "GET", "/v1/runs/run-rest", f.auditor, "")
	if status != http.StatusOK {
		t.Fatalf("GET /v1/runs/run-rest = %d %v", status, run)
	}
	var got []string
	for _, c := range run["calls"].([]any) {
		c := c.(map[string]any)
		got = append(got, c["tool"].(string)+":"+c["outcome"].(string))
	}
	if want := []string{"demo.search_tickets:ok", "demo.refund_order:approval_required", "demo.analyze_text:denied"}; len(got) != len(want) ||
		got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("calls %v, want %v", got, want)
	}
	approvals := run["approvals"].([]any)
	if len(approvals) != 1 {
		t.Fatalf("approvals: %v", approvals)
	}
	if a := approvals[0].(map[string]any); a["id"] != approvalID || a["status"] != "approved" || a["decided_by"] != "ada" || a["decided_at"] == nil {
		t.Errorf("approval: %v", a)
	}
	timeline := run["timeline"].([]any)
	if last := timeline[len(timeline)-1].(map[string]any); last["kind"] != "approval" || last["by"] != "ada" || last["outcome"] != "approved" {
		t.Errorf("the timeline ends with %v, want ada's approval", last)
	}
	var denied bool
	for _, d := range run["decisions"].([]any) {
		d := d.(map[string]any)
		denied = denied || (d["tool"] == "demo.analyze_text" && d["decision"] == "deny")
	}
	if !denied || run["status"] != "failed" || run["agent_id"] != "agent-support" {
		t.Errorf("decisions %v, status %v, agent %v", run["decisions"], run["status"], run["agent_id"])
	}
	if sp := run["spend"].(map[string]any); sp["root_run_id"] != "run-rest" || sp["ceiling_known"] != true {
		t.Errorf("spend: %v", sp)
	}

	outsider := mintIn(t, f.store, "org-2", toolplane.CredentialPerson, "eve", []string{"auditor"}, nil, false)
	for _, tt := range []struct {
		name, key, id string
		want          int
		code          string
	}{
		{"another organization's auditor", outsider, "run-rest", http.StatusNotFound, "not_found"},
		{"a run nobody made", f.auditor, "run-nowhere", http.StatusNotFound, "not_found"},
		{"an approver, of a run that asked for an approval", f.person, "run-rest", http.StatusOK, ""},
		{"an approver, of a run that filed none", f.person, "run-plain", http.StatusNotFound, "not_found"},
		{"the agent", f.agent, "run-rest", http.StatusForbidden, "denied"},
		{"no key", "", "run-rest", http.StatusUnauthorized, "unauthenticated"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, body := f.do(t, "GET", "/v1/runs/"+tt.id, tt.key, "")
			if status != tt.want || errCode(body) != tt.code {
				t.Fatalf("GET /v1/runs/%s = %d %v, want %d %s", tt.id, status, body, tt.want, tt.code)
			}
		})
	}
}
