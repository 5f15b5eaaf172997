package door_test

import (
	"context"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
)

// A token issued to an agent for a person makes every call for that
// person, with what their identity provider says of them, whether or not
// the call names them: the call is then decided on both the agent's and
// the person's grants, never on the agent's alone.
func TestInvocationOfATokenActingForAPerson(t *testing.T) {
	t.Parallel()
	claims := &toolplane.User{Groups: []string{"support"}}
	cred := &toolplane.Credential{ID: "tok_1", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", ActsFor: "ada", User: claims}
	d := &door.Door{}
	for _, named := range []string{"", "ada"} {
		inv := d.Invocation(cred, door.Call{Tool: "crm.lookup", OnBehalfOf: named})
		if inv.UserID != "ada" || inv.User != claims || inv.AgentID != "bot" || inv.Principal.ID != "bot" || inv.OrganizationID != "org-1" {
			t.Errorf("on_behalf_of %q: invocation %+v; want the agent bot acting for ada, with her claims", named, inv)
		}
	}
	// Another person is not the caller's to choose.
	a := d.Call(context.Background(), door.Caller{Credential: cred}, door.Call{Tool: "crm.lookup", OnBehalfOf: "bob"})
	if a.Kind != door.Denied || a.Field != "on_behalf_of" {
		t.Fatalf("a call naming bob on a token for ada: %+v; want denied at on_behalf_of", a)
	}
}

// A run's cost ceiling is the lower of what the caller asks and the
// server's budget: a caller can narrow it, never lift it.
func TestInvocationCeilingIsTheLowerOfAskedAndBudget(t *testing.T) {
	t.Parallel()
	cred := &toolplane.Credential{ID: "tpk_1", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot"}
	d := &door.Door{RunBudgetCents: 100}
	for asked, want := range map[int64]int64{0: 100, 50: 50, 100: 100, 500: 100} {
		if got := d.Invocation(cred, door.Call{MaxCostCents: asked}).Ceilings.MaxCostCents; got != want {
			t.Errorf("asked %d under a budget of 100: ceiling %d, want %d", asked, got, want)
		}
	}
}
