package invoke_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
)

// What an approval led to, through each state the call it let through can
// reach: nothing while it waits; not run once approved; then, for a write
// whose handler cannot tell whether it acted, uncertain with the reason,
// naming the audit event of the call that ran (not a repeat's); and once a
// person reconciles it as a failure, refused with that code and message
// and who settled it. A read approved and refused before anything is
// claimed is known by its code alone. Only a person who may read
// approvals, in the approval's organization, is told.
func TestAftermathFollowsTheApprovedCall(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	send := gated("payments.refund")
	send.Effect = toolplane.EffectWrite
	read := def("crm.lookup", toolplane.EffectRead, func(d *toolplane.Definition) { d.Annotations.RequiresApproval = true })
	e := newEnv(t, newStore(t),
		tool{def: send, fn: func(context.Context, handler.Call, any) (any, error) {
			return nil, errors.New("socket closed after write")
		},
			classify: func(error) handler.Ending { return handler.Uncertain("the connection dropped") }},
		tool{def: read, fn: ok(map[string]any{})})
	after := func(id string) *invoke.Aftermath {
		t.Helper()
		a, err := e.store.GetApproval(ctx, "org-1", id)
		if err != nil {
			t.Fatal(err)
		}
		out, err := e.iv.Aftermath(ctx, a, approverAlice)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}

	ar := must(t).Approval(e.iv.Invoke(ctx, "payments.refund", args("to", "o-1"), inv("payments.refund")))
	if out := after(ar.ID); out != nil {
		t.Fatalf("a pending approval led to %+v", out)
	}
	e.resolve(ar.ID, true)
	if out := after(ar.ID); out == nil || out.State != invoke.AfterNotRun || out.AuditID != "" {
		t.Fatalf("approved, not run: %+v", out)
	}

	r, err := e.iv.ExecuteApproved(ctx, "org-1", ar.ID)
	code(t, r, err, toolplane.CodeUncertain)
	ran := after(ar.ID)
	if ran.State != invoke.AfterUncertain || ran.Code != toolplane.CodeUncertain || !strings.Contains(ran.Message, "the connection dropped") || ran.AuditID == "" {
		t.Fatalf("uncertain: %+v", ran)
	}
	// The agent asking again, and again (more than a page of the audit
	// trail), is told the same; the call that ran stays the one named.
	in := inv("payments.refund")
	in.AuthorizedBy = ar.ID
	for range 150 {
		r, err = e.iv.Invoke(ctx, "payments.refund", args("to", "o-1"), in)
		code(t, r, err, toolplane.CodeUncertain)
	}
	if again := after(ar.ID); again.AuditID != ran.AuditID {
		t.Fatalf("a repeat took the place of the call that ran: %s, was %s", again.AuditID, ran.AuditID)
	}
	ev, err := e.store.GetAudit(ctx, "org-1", ran.AuditID)
	if err != nil || ev.ApprovalID != ar.ID || ev.Outcome != string(toolplane.CodeUncertain) || ev.Source != toolplane.SourceResume {
		t.Fatalf("the event named: %+v %v", ev, err)
	}

	list, _, err := e.iv.Uncertain(ctx, "", 10, approverAlice)
	if err != nil || len(list) != 1 {
		t.Fatalf("uncertain actions: %v %v", list, err)
	}
	failure := &invoke.Failure{Code: toolplane.CodeConflict, Message: "the bank says o-1 was refunded already"}
	if _, err := e.iv.Reconcile(ctx, "payments.refund", list[0].Key, invoke.Reconciliation{Failure: failure}, approverAlice); err != nil {
		t.Fatal(err)
	}
	settled := after(ar.ID)
	if settled.State != invoke.AfterRefused || settled.Code != toolplane.CodeConflict || settled.Message != failure.Message || settled.ReconciledBy != "alice" || settled.AuditID != ran.AuditID {
		t.Fatalf("reconciled: %+v", settled)
	}

	// A read, approved, then refused live before anything was claimed
	// (its tool was removed from the caller's grants): its code alone.
	lookup := inv("crm.lookup")
	ar = must(t).Approval(e.iv.Invoke(ctx, "crm.lookup", args("to", "o-1"), lookup))
	e.resolve(ar.ID, true)
	a, _ := e.store.GetApproval(ctx, "org-1", ar.ID)
	stored, _ := approval.DecodeInvocation(a.Invocation)
	stored.Principal.Tools = nil
	if a.Invocation, err = approval.EncodeInvocation(stored); err != nil {
		t.Fatal(err)
	}
	if ok, err := e.store.UpdateApproval(ctx, a); !ok || err != nil {
		t.Fatal(ok, err)
	}
	r, err = e.iv.ExecuteApproved(ctx, "org-1", ar.ID)
	code(t, r, err, toolplane.CodeDenied)
	if out := after(ar.ID); out.State != invoke.AfterRefused || out.Code != toolplane.CodeDenied || out.Message != "" || out.AuditID == "" {
		t.Fatalf("a read refused live: %+v", out)
	}

	// A read approved under a caller's key, then made in another run (a
	// new session) with that key: the call it let through is found in
	// the run it ran in.
	keyed := inv("crm.lookup")
	keyed.IdempotencyKey = "lookup-o-2"
	kr := must(t).Approval(e.iv.Invoke(ctx, "crm.lookup", args("to", "o-2"), keyed))
	e.resolve(kr.ID, true)
	elsewhere := inv("crm.lookup")
	elsewhere.RunID, elsewhere.IdempotencyKey, elsewhere.AuthorizedBy = "run-2", "lookup-o-2", kr.ID
	r, err = e.iv.Invoke(ctx, "crm.lookup", args("to", "o-2"), elsewhere)
	if err != nil || !r.OK {
		t.Fatalf("the keyed read in another run: %+v %v", r, err)
	}
	if out := after(kr.ID); out == nil || out.State != invoke.AfterOK || out.AuditID == "" {
		t.Fatalf("a read run in another run under its approval: %+v", out)
	}

	// Who is told.
	for name, by := range map[string]*toolplane.Credential{
		"an agent":              {OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1"},
		"a person of elsewhere": {OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "alice", Roles: []string{toolplane.RoleApprover}},
	} {
		if out, err := e.iv.Aftermath(ctx, a, by); err == nil || out != nil {
			t.Errorf("%s was told %+v (%v)", name, out, err)
		}
	}
}
