package httpapi_test

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// Who answers an approval is the approval service's rule, and the REST door
// applies it as every other door does: a person outside the approval's
// group, the person a call was asked on behalf of, and a person holding the
// requesting principal's name are each refused, and the approval stays
// pending for someone who may answer it.
func TestApprovalsAreAnsweredByAnotherPersonOfTheirGroup(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	admin := f.mintAdmin(t)
	status, body := f.do(t, "POST", "/v1/keys", admin, `{"kind":"agent","subject":"agent-support","roles":["act_for_users"],"tools":["demo.*"]}`)
	if status != http.StatusCreated {
		t.Fatalf("an agent key acting for users: %d %v", status, body)
	}
	frontDesk := body["key"].(string)
	// file has key ask for a refund in run, on behalf of the person
	// forWhom names ("" for none), and answers the approval it waits for.
	file := func(key, run, forWhom string) string {
		t.Helper()
		call := `{"arguments":{"order_id":"o-502","amount_cents":1250,"reason":"charged twice"},"run_id":"` + run + `","on_behalf_of":"` + forWhom + `"}`
		status, body := f.do(t, "POST", "/v1/tools/demo.refund_order/invoke", key, call)
		if status != http.StatusAccepted {
			t.Fatalf("refund: %d %v", status, body)
		}
		return body["approval"].(map[string]any)["id"].(string)
	}
	forAda := file(frontDesk, "run-ada", "ada")
	forFinance := file(f.agent, "run-finance", "")
	// The tool's approval chain would route it to finance; here the stored
	// approval is routed by hand.
	a, err := f.store.GetApproval(ctx, "org-1", forFinance)
	if err != nil {
		t.Fatal(err)
	}
	a.ApproverGroup = "finance"
	if ok, err := f.store.UpdateApproval(ctx, a); !ok || err != nil {
		t.Fatal(ok, err)
	}
	member := mint(t, f.store, toolplane.CredentialPerson, "fin", []string{"approver", "group:finance"}, nil, false)
	principal := mint(t, f.store, toolplane.CredentialPerson, "agent-support", []string{"approver"}, nil, false)

	tests := []struct {
		name, key, id string
		want          int
		// says is in the refusal's message.
		says string
	}{
		{"an approver outside the group", f.person, forFinance, http.StatusForbidden, "this approval is for the group finance"},
		{"the person the call was asked for", f.person, forAda, http.StatusForbidden, "you may not answer this approval"},
		{"a person named as the requesting principal", principal, forAda, http.StatusForbidden, "you may not answer this approval"},
		{"a member of the group", member, forFinance, http.StatusOK, ""},
		{"another approver of the call asked for ada", member, forAda, http.StatusOK, ""},
	}
	for _, tt := range tests {
		status, body := f.do(t, "POST", "/v1/approvals/"+tt.id+"/reject", tt.key, `{"reason":"no"}`)
		if status != tt.want {
			t.Fatalf("%s: %d %v; want %d", tt.name, status, body, tt.want)
		}
		if tt.want == http.StatusForbidden {
			e, _ := body["error"].(map[string]any)
			if errCode(body) != "denied" || !strings.Contains(e["message"].(string), tt.says) {
				t.Fatalf("%s: %v; want denied saying %q", tt.name, body, tt.says)
			}
			if a, err := f.store.GetApproval(ctx, "org-1", tt.id); err != nil || a.Status != toolplane.ApprovalPending {
				t.Fatalf("%s: the refused answer changed the approval: %+v %v", tt.name, a, err)
			}
			continue
		}
		if body["status"] != "rejected" || body["resolved_by"] != "fin" {
			t.Fatalf("%s: %v", tt.name, body)
		}
	}
}
