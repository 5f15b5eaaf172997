package httpapi_test

import (
	"net/http"
	"reflect"
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
