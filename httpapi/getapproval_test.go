package httpapi_test

import (
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// GET /v1/approvals/{id} answers one approval as the list shows it, to the
// roles the list answers and only within the caller's organization.
func TestOneApprovalIsShownAsTheListShowsIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/tools/demo.refund_order/invoke", f.agent,
		`{"arguments":{"order_id":"o-503","amount_cents":900,"reason":"card 4111 1111 1111 1111 charged twice"},"run_id":"run-get"}`)
	if status != http.StatusAccepted {
		t.Fatalf("refund: %d %v", status, body)
	}
	id := body["approval"].(map[string]any)["id"].(string)
	status, list := f.do(t, "GET", "/v1/approvals", f.person, "")
	items, _ := list["items"].([]any)
	if status != http.StatusOK || len(items) != 1 {
		t.Fatalf("approvals: %d %v", status, list)
	}
	outsider := mintIn(t, f.store, "org-2", toolplane.CredentialPerson, "eve", []string{"approver", "auditor"}, nil, false)

	tests := []struct {
		name, key, id string
		want          int
	}{
		{"an approver", f.person, id, http.StatusOK},
		{"an auditor", f.auditor, id, http.StatusOK},
		{"an agent's key", f.agent, id, http.StatusForbidden},
		{"another organization's approver", outsider, id, http.StatusNotFound},
		{"an unknown id", f.person, "apr_nope", http.StatusNotFound},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			status, got := f.do(t, "GET", "/v1/approvals/"+tt.id, tt.key, "")
			if status != tt.want {
				t.Fatalf("GET /v1/approvals/%s = %d %v, want %d", tt.id, status, got, tt.want)
			}
			if status == http.StatusOK && !reflect.DeepEqual(got, items[0]) {
				t.Fatalf("GET /v1/approvals/%s = %v, the list shows %v", tt.id, got, items[0])
			}
		})
	}
}

// GET /v1/approvals/{id} of an answered approval says who answered, when
// and why, the reason's credentials masked as the arguments' are.
func TestAnsweredApprovalSaysWhoAndWhy(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, body := f.do(t, "POST", "/v1/tools/demo.refund_order/invoke", f.agent,
		`{"arguments":{"order_id":"o-504","amount_cents":900,"reason":"charged twice"},"run_id":"run-why"}`)
	if status != http.StatusAccepted {
		t.Fatalf("refund: %d %v", status, body)
	}
	id := body["approval"].(map[string]any)["id"].(string)
	if status, got := f.do(t, "GET", "/v1/approvals/"+id, f.person, ""); status != http.StatusOK || got["resolved_by"] != nil || got["resolved_at"] != nil || got["reason"] != nil {
		t.Fatalf("pending: %d %v, want no answer yet", status, got)
	}
	if status, body := f.do(t, "POST", "/v1/approvals/"+id+"/reject", f.person, `{"reason":"duplicate of o-503; key sk_live_abcdefghijklmnop0123 was pasted"}`); status != http.StatusOK {
		t.Fatalf("reject: %d %v", status, body)
	}
	status, got := f.do(t, "GET", "/v1/approvals/"+id, f.person, "")
	if status != http.StatusOK || got["status"] != "rejected" || got["resolved_by"] == nil || got["resolved_by"] == "" || got["resolved_at"] == nil {
		t.Fatalf("rejected: %d %v, want who answered and when", status, got)
	}
	reason, _ := got["reason"].(string)
	if !strings.Contains(reason, "duplicate of o-503") || strings.Contains(reason, "sk_live_abcdefghijklmnop0123") {
		t.Errorf("reason %q, want the reason with its credential masked", reason)
	}
}
