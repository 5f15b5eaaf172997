package invoke_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

// Uncertain actions are listed by approvers and auditors of their
// organization, and settled only by a person's key with the approver
// role: the invoker applies the rule, so every door refuses the same
// callers in the same words, and a refused reconciliation settles
// nothing.
func TestUncertainActionsAreListedAndReconciledByWhomTheRuleAllows(t *testing.T) {
	t.Parallel()
	d := def("payments.refund", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.Timeout = toolplane.Duration(30 * time.Millisecond)
	})
	block := make(chan struct{})
	t.Cleanup(func() { close(block) })
	e := newEnv(t, newStore(t), tool{def: d, fn: func(ctx context.Context, _ handler.Call, _ any) (any, error) {
		<-block
		return nil, ctx.Err()
	}})
	ctx := context.Background()
	r, err := e.iv.Invoke(ctx, "payments.refund", args("to", "ord_1"), inv("payments.refund"))
	code(t, r, err, toolplane.CodeUncertain)
	person := func(org string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "p", Roles: roles}
	}
	agent := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1", Roles: []string{toolplane.RoleApprover}}
	const agentTold = "; this is an agent's key, and roles are carried by a person's key"

	list := []struct {
		name   string
		by     *toolplane.Credential
		want   int
		denied string
	}{
		{"an approver", person("org-1", toolplane.RoleApprover), 1, ""},
		{"an auditor", person("org-1", toolplane.RoleAuditor), 1, ""},
		{"a platform_admin", person("org-1", toolplane.RolePlatformAdmin), 1, ""},
		{"an approver of another organization", person("org-2", toolplane.RoleApprover), 0, ""},
		{"a tool owner", person("org-1", toolplane.RoleToolOwner+":payments"), 0, "listing uncertain actions needs the approver or auditor role"},
		{"an agent's key", agent, 0, "listing uncertain actions needs the approver or auditor role" + agentTold},
		{"nobody", nil, 0, "listing uncertain actions needs the approver or auditor role"},
	}
	var key string
	for _, tt := range list {
		got, _, err := e.iv.Uncertain(ctx, "", 10, tt.by)
		if tt.denied != "" {
			var denied *toolplane.DeniedError
			if !errors.As(err, &denied) || !errors.Is(err, approval.ErrNotAuthorized) || denied.Why != tt.denied || got != nil {
				t.Fatalf("%s: Uncertain = %v, %v; want the refusal %q", tt.name, got, err, tt.denied)
			}
			continue
		}
		if err != nil || len(got) != tt.want {
			t.Fatalf("%s: Uncertain = %d actions, %v; want %d", tt.name, len(got), err, tt.want)
		}
		if tt.want > 0 {
			key = got[0].Key
		}
	}

	rec := invoke.Reconciliation{Unconfirmed: "asking the bank"}
	settle := []struct {
		name   string
		by     *toolplane.Credential
		denied string
		err    error
	}{
		{"an auditor", person("org-1", toolplane.RoleAuditor), "reconciling needs a person's key with the approver role", nil},
		{"an agent's key with the role", agent, "reconciling needs a person's key with the approver role" + agentTold, nil},
		{"nobody", nil, "reconciling needs a person's key with the approver role", nil},
		{"an approver of another organization", person("org-2", toolplane.RoleApprover), "", toolplane.ErrNotFound},
		{"an approver", person("org-1", toolplane.RoleApprover), "", nil},
	}
	for _, tt := range settle {
		_, err := e.iv.Reconcile(ctx, "payments.refund", key, rec, tt.by)
		switch {
		case tt.denied != "":
			var denied *toolplane.DeniedError
			if !errors.As(err, &denied) || !errors.Is(err, approval.ErrNotAuthorized) || denied.Why != tt.denied {
				t.Fatalf("%s: Reconcile = %v; want the refusal %q", tt.name, err, tt.denied)
			}
			if left, _, _ := e.iv.Uncertain(ctx, "", 10, approverAlice); len(left) != 1 {
				t.Fatalf("%s: a refused reconciliation settled the action", tt.name)
			}
		case tt.err != nil:
			if !errors.Is(err, tt.err) {
				t.Fatalf("%s: Reconcile = %v, want %v", tt.name, err, tt.err)
			}
		case err != nil:
			t.Fatalf("%s: %v", tt.name, err)
		}
	}
	evs, _, err := e.store.ListAudit(ctx, "org-1", toolplane.AuditFilter{Outcome: "reconciled"}, "", 10)
	if err != nil || len(evs) != 1 || !strings.Contains(evs[0].Reason, "asking the bank") {
		t.Fatalf("reconciled events = %+v, %v", evs, err)
	}
}
