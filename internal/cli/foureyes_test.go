package cli

import (
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/backend"
)

// The approval service's rule of who answers an approval holds on a served
// node through the command line too: a person outside the approval's group
// and the person the call was asked for are refused, in the service's
// words, and another approver of the group answers.
func TestApprovalsAnsweredThroughTheCommandLineByAnotherPersonOfTheGroup(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	ctx := context.Background()
	// A front desk deployment of the demo agent asks for people.
	body, _ := json.Marshal(map[string]any{"kind": "agent", "subject": "demo-agent", "roles": []string{"act_for_users"}})
	req, _ := http.NewRequest("POST", r.base+"/v1/keys", strings.NewReader(string(body)))
	req.Header.Set("Authorization", "Bearer "+r.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var minted struct {
		Key string `json:"key"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&minted); err != nil || minted.Key == "" {
		t.Fatalf("the front desk key: %d %v", resp.StatusCode, err)
	}
	resp.Body.Close()
	// An agent acting for ada may do only what ada may: she is granted
	// the demo's tools.
	req, _ = http.NewRequest("POST", r.base+"/v1/grants", strings.NewReader(`{"user_id":"ada","pattern":"demo.*"}`))
	req.Header.Set("Authorization", "Bearer "+r.admin)
	if resp, err = http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("granting ada: %v %v", resp, err)
	}
	resp.Body.Close()
	file := func(key, run, forWhom string) string {
		t.Helper()
		call := `{"arguments":{"order_id":"o-601","amount_cents":900,"reason":"late"},"run_id":"` + run + `","on_behalf_of":"` + forWhom + `"}`
		req, _ := http.NewRequest("POST", r.base+"/v1/tools/demo.refund_order/invoke", strings.NewReader(call))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var v struct {
			Approval struct {
				ID string `json:"id"`
			} `json:"approval"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil || resp.StatusCode != http.StatusAccepted {
			t.Fatalf("refund in %s: %d %v", run, resp.StatusCode, err)
		}
		return v.Approval.ID
	}
	forAda := file(minted.Key, "cli-4e-ada", "ada")
	forFinance := file(r.agent, "cli-4e-finance", "")
	// Routed to finance, as a tool's approval chain would route it.
	b, err := backend.Open(ctx, r.database)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	a, err := b.Store.GetApproval(ctx, DefaultOrganization, forFinance)
	if err != nil {
		t.Fatal(err)
	}
	a.ApproverGroup = "finance"
	if ok, err := b.Store.UpdateApproval(ctx, a); !ok || err != nil {
		t.Fatal(ok, err)
	}
	ada := mintPerson(t, r, "ada", "approver")
	member := mintPerson(t, r, "fin", "approver", "group:finance")

	steps := []struct {
		name     string
		key      string
		args     []string
		wantCode int
		want     string // a regexp, in stdout, or in stderr when the command fails
	}{
		{"an approver outside the group", ada, []string{"approvals", "approve", forFinance}, 1, `denied: this approval is for the group finance`},
		{"the person the call was asked for", ada, []string{"approvals", "approve", forAda}, 1, `denied: you may not answer this approval`},
		{"both still wait", ada, []string{"approvals", "list"}, 0, `(?s)(` + forAda + `.*` + forFinance + `|` + forFinance + `.*` + forAda + `)`},
		{"a member of the group", member, []string{"approvals", "reject", forFinance, "--reason", "not ours"}, 0, `status:\s+rejected`},
		{"another approver of the call asked for ada", member, []string{"approvals", "approve", forAda}, 0, `status:\s+approved`},
	}
	for _, st := range steps {
		args := append(append([]string{}, st.args...), "--server", r.base, "--key", st.key)
		code, out, errOut := runIn(nil, args...)
		text := out
		if st.wantCode != 0 {
			text = errOut
		}
		if code != st.wantCode || !regexp.MustCompile(st.want).MatchString(text) {
			t.Errorf("%s: exit %d, want %d and %s\nstdout: %s\nstderr: %s", st.name, code, st.wantCode, st.want, out, errOut)
		}
	}
}
