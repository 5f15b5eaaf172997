package authz_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

// A call already in flight (here, waiting for a person) is decided again
// on the grants of the moment it runs: a grant revoked meanwhile refuses
// it, even after the approval.
func TestGrantRevokedWhileACallWaitsRefusesIt(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ran := 0
	hs := handler.NewRegistry()
	b, _ := handler.BindFunc("crm.delete_customer", func(context.Context, handler.Call, any) (any, error) {
		ran++
		return map[string]any{}, nil
	}, nil)
	if err := hs.Register(b); err != nil {
		t.Fatal(err)
	}
	approvals := approval.New(approval.Config{Store: f.store, TTL: time.Hour})
	iv, err := invoke.New(invoke.Config{Registry: f.reg, Handlers: hs, Store: f.store, Policy: authz.Policy{Service: f.svc}, Approvals: approvals})
	if err != nil {
		t.Fatal(err)
	}
	g := &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}
	if err := f.svc.AddGrant(f.ctx, g, operator); err != nil {
		t.Fatal(err)
	}
	in := &toolplane.Invocation{OrganizationID: "org-1", RunID: "run-1", AgentID: "bot", StepPath: "agent", Principal: toolplane.Principal{ID: "bot", Tools: []string{"crm.delete_customer"}}}
	_, err = iv.InvokeJSON(f.ctx, "crm.delete_customer", json.RawMessage(`{}`), in)
	var ar *invoke.ApprovalRequired
	if !errors.As(err, &ar) {
		t.Fatalf("want approval required, got %v", err)
	}
	if err := f.svc.RevokeGrant(f.ctx, g.ID, operator); err != nil {
		t.Fatal(err)
	}
	if _, err := iv.Resolve(f.ctx, ar.ID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	r, err := iv.ExecuteApproved(f.ctx, "org-1", ar.ID)
	if err != nil || r.OK || r.Error.Code != toolplane.CodeDenied || ran != 0 {
		t.Fatalf("after the grant was revoked: %+v %v, ran %d", r, err, ran)
	}
}
