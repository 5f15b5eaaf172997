package invoke

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/boundary"
	"github.com/toolplane/toolplane/handler"
)

// ErrNotResolved: the approval has no decision yet. It is a
// toolplane.ErrConflict: the approval's state does not allow running it.
var ErrNotResolved = toolplane.Refine(toolplane.ErrConflict, "approval not resolved")

// ExecuteApproved runs the call a resolved approval holds, under the
// invocation it was proposed with, without the model asking again. The
// approval covers exactly that call, so an approved one skips the approval
// step (policy still decides live: a grant removed while it waited still
// refuses) and a rejected one answers rejected. The journal makes the
// effect happen once whether this runs, the model repeats the call, or
// both.
func (iv *Invoker) ExecuteApproved(ctx context.Context, org, id string) (toolplane.Result, error) {
	if iv.cfg.Approvals == nil {
		return toolplane.Result{}, fmt.Errorf("%w: no approval service is wired", ErrFault)
	}
	a, err := iv.cfg.Approvals.Find(ctx, org, id)
	if err != nil {
		return toolplane.Result{}, fmt.Errorf("approval %s: %w", id, err)
	}
	switch a.Status {
	case toolplane.ApprovalApproved, toolplane.ApprovalRejected:
	case toolplane.ApprovalExpired:
		if next, err := iv.escalatedTo(ctx, a); err != nil {
			return toolplane.Result{}, err
		} else if next != "" {
			return toolplane.Result{}, fmt.Errorf("approval %s was escalated to %s: %w", id, next, ErrNotResolved)
		}
		return toolplane.Fail(toolplane.CodeRejected, "the approval for this call expired before anyone answered it, so it was denied; do not retry it without asking the user"), nil
	default:
		return toolplane.Result{}, fmt.Errorf("approval %s: %w", id, ErrNotResolved)
	}
	inv, err := approval.DecodeInvocation(a.Invocation)
	if err != nil {
		return toolplane.Result{}, fmt.Errorf("%w: approval %s: %v", ErrFault, id, err)
	}
	inv.AuthorizedBy = a.ID
	inv.Source = toolplane.SourceResume
	if err := iv.livePrincipal(ctx, inv); err != nil {
		return toolplane.Result{}, err
	}
	if a.ToolVersion != "" {
		// The version approved, not the newest one the pin allows now: a
		// version published while the approval waited was not approved.
		// The policy still checks it against the range the grant pins.
		pins := make(map[string]string, len(inv.Principal.Pins)+1)
		for k, v := range inv.Principal.Pins {
			pins[k] = v
		}
		pins[a.Tool] = "=" + a.ToolVersion
		inv.Principal.Pins = pins
	}
	dec := json.NewDecoder(bytes.NewReader(a.Arguments))
	dec.UseNumber()
	var args any
	if err := dec.Decode(&args); err != nil {
		return toolplane.Result{}, fmt.Errorf("%w: approval %s arguments: %v", ErrFault, id, err)
	}
	return iv.Invoke(ctx, a.Tool, args, inv)
}

// escalatedTo answers the approval that replaced a, if any.
func (iv *Invoker) escalatedTo(ctx context.Context, a *toolplane.Approval) (string, error) {
	as, err := iv.cfg.Store.FindApprovals(ctx, a.OrganizationID, a.Tool, a.Key)
	if err != nil {
		return "", fmt.Errorf("%w: approvals of %s: %v", ErrFault, a.Key, err)
	}
	for _, n := range as {
		if n.EscalatedFrom == a.ID {
			return n.ID, nil
		}
	}
	return "", nil
}

// CheckApproval is the tool-state recheck approval.Service.Resolve runs
// before it records an approve: the tool must still be registered, in the
// approval's organization, at the version the approval was filed for.
func (iv *Invoker) CheckApproval(a *toolplane.Approval) error {
	vs := iv.cfg.Registry.Versions(a.OrganizationID, a.Tool)
	if len(vs) == 0 {
		return fmt.Errorf("%w: %s is no longer registered", approval.ErrStale, a.Tool)
	}
	for _, t := range vs {
		if t.Def.Version == a.ToolVersion {
			return nil
		}
	}
	return fmt.Errorf("%w: %s %s, the version the approval was filed for, can no longer be called (now: %s)", approval.ErrStale, a.Tool, a.ToolVersion, vs[len(vs)-1].Def.Version)
}

// Reconciliation says what happened to an uncertain action. Exactly one
// field is set.
type Reconciliation struct {
	// Output is the tool's answer, as its handler would have given it; it is
	// validated against the output schema and rendered like one.
	Output any
	// Failure is a definite failure the model reads.
	Failure *Failure
	// Unconfirmed is a note when nobody can yet say what happened: the model
	// is told the effect may or may not have happened, and why.
	Unconfirmed string
}

// Failure is a definite failure, under a code a tool may answer
// (not_found, conflict, invalid_input, unavailable, retryable_upstream).
type Failure struct {
	Code    toolplane.Code
	Message string
}

// ErrBadReconciliation: the reconciliation is malformed or its output
// breaks the tool's contract. It is a toolplane.ErrInvalid.
var ErrBadReconciliation = toolplane.Refine(toolplane.ErrInvalid, "invalid reconciliation")

// MayReconcile refuses a caller who may not settle an uncertain action: a
// person's key with the approver role is needed, as a person settles it by
// saying what happened downstream.
func MayReconcile(by *toolplane.Credential) error {
	if by == nil || by.Kind != toolplane.CredentialPerson || !by.HasAnyRole(toolplane.RoleApprover) {
		return toolplane.Refuse(by, approval.ErrNotAuthorized, "reconciling needs a person's key with the approver role")
	}
	return nil
}

// MayListUncertain refuses a caller who may not list the uncertain actions
// of their organization: a person holding the approver or auditor role.
func MayListUncertain(by *toolplane.Credential) error {
	if !by.HasAnyRole(toolplane.RoleApprover, toolplane.RoleAuditor) {
		return toolplane.Refuse(by, approval.ErrNotAuthorized, "listing uncertain actions needs the approver or auditor role")
	}
	return nil
}

// Reconcile settles an uncertain action of the caller's organization, for
// by, who may (MayReconcile; a refusal is a *toolplane.DeniedError wrapping
// approval.ErrNotAuthorized); afterwards identical calls answer the
// reconciled content.
func (iv *Invoker) Reconcile(ctx context.Context, tool, key string, r Reconciliation, by *toolplane.Credential) (toolplane.Result, error) {
	if err := MayReconcile(by); err != nil {
		return toolplane.Result{}, err
	}
	org := by.OrganizationID
	t, ok := iv.cfg.Registry.Get(org, tool)
	if !ok {
		return toolplane.Result{}, fmt.Errorf("%w: no tool %s", ErrBadReconciliation, tool)
	}
	if iv.journal == nil {
		return toolplane.Result{}, fmt.Errorf("%w: no journal is wired", ErrFault)
	}
	set := 0
	if r.Output != nil {
		set++
	}
	if r.Failure != nil {
		set++
	}
	if r.Unconfirmed != "" {
		set++
	}
	if set != 1 {
		return toolplane.Result{}, fmt.Errorf("%w: give exactly one of an output, a failure or an unconfirmed note", ErrBadReconciliation)
	}
	var res toolplane.Result
	note := ""
	switch {
	case r.Output != nil:
		var vs []toolplane.Violation
		res, vs = t.Output(r.Output)
		if len(vs) > 0 {
			return toolplane.Result{}, fmt.Errorf("%w: the output breaks %s's output schema: %s %s", ErrBadReconciliation, tool, vs[0].FieldPath, vs[0].Message)
		}
	case r.Failure != nil:
		if !handler.ToolCode(r.Failure.Code) || r.Failure.Message == "" {
			return toolplane.Result{}, fmt.Errorf("%w: a failure needs a message and a tool code (not_found, conflict, invalid_input, unavailable, retryable_upstream), got %q", ErrBadReconciliation, r.Failure.Code)
		}
		res = toolplane.Fail(r.Failure.Code, r.Failure.Message)
	default:
		note = r.Unconfirmed
		res = toolplane.Fail(toolplane.CodeUncertain, fmt.Sprintf("nobody can yet confirm whether this %s call took effect: %s. Do not repeat it, and do not report it as done or as failed.", t.Model, note))
	}
	ev := iv.settlementEvent(org, t, "reconciled", toolplane.SourceReconcile, by.Subject)
	// The person who said what happened decided the action's outcome:
	// the trail names them as its approver, and the key they used.
	ev.Reason, ev.ApproverID, ev.KeyID = note, by.Subject, by.ID
	rendered := boundary.Render(res)
	ev.OutputHash = outputHash(rendered)
	if _, err := iv.journal.Settle(ctx, org, tool, key, rendered, by.Subject, note, ev); err != nil {
		return toolplane.Result{}, fmt.Errorf("reconcile %s: %w", key, err)
	}
	return res, nil
}

// Uncertain lists the uncertain actions of the caller's organization,
// oldest first, to by, who may (MayListUncertain).
func (iv *Invoker) Uncertain(ctx context.Context, after string, limit int, by *toolplane.Credential) ([]toolplane.Claim, string, error) {
	if err := MayListUncertain(by); err != nil {
		return nil, "", err
	}
	if iv.journal == nil {
		return nil, "", fmt.Errorf("%w: no journal is wired", ErrFault)
	}
	return iv.journal.Uncertain(ctx, by.OrganizationID, after, limit)
}

// CountUncertain answers how many of the caller's organization's actions
// are uncertain, counting at most limit (past it, limit), to those who
// may list them (MayListUncertain).
func (iv *Invoker) CountUncertain(ctx context.Context, limit int, by *toolplane.Credential) (int, error) {
	if err := MayListUncertain(by); err != nil {
		return 0, err
	}
	if iv.journal == nil {
		return 0, fmt.Errorf("%w: no journal is wired", ErrFault)
	}
	return iv.journal.CountUncertain(ctx, by.OrganizationID, limit)
}

// ErrNotReplayable: the claim cannot be run again by a worker. It is a
// toolplane.ErrConflict: the claim's state does not allow it.
var ErrNotReplayable = toolplane.Refine(toolplane.ErrConflict, "claim is not replayable")

// ReplayClaim runs again, from a worker, a call whose own worker was lost
// after dispatch, when its tool is safe to replay and has attempts left. It
// runs under the invocation the call was made with, through the whole
// path: policy decides it live, and the journal's claim decides whether it
// may run (an identical call may have taken it meanwhile).
func (iv *Invoker) ReplayClaim(ctx context.Context, c *toolplane.Claim) (toolplane.Result, error) {
	if !iv.Replayable(c.OrganizationID, c.Tool, c.Attempts) || len(c.Invocation) == 0 {
		return toolplane.Result{}, fmt.Errorf("%s %s: %w", c.Tool, c.Key, ErrNotReplayable)
	}
	var inv toolplane.Invocation
	if err := json.Unmarshal(c.Invocation, &inv); err != nil {
		return toolplane.Result{}, fmt.Errorf("%w: stored invocation of %s: %v", ErrFault, c.Key, err)
	}
	inv.Source = toolplane.SourceWorker
	// The caller's deadline bounded its request, long over: a replay
	// finishes an effect the platform started, under the tool's timeout.
	inv.Deadline = time.Time{}
	if err := iv.livePrincipal(ctx, &inv); err != nil {
		return toolplane.Result{}, err
	}
	dec := json.NewDecoder(bytes.NewReader(c.Arguments))
	dec.UseNumber()
	var args any
	if err := dec.Decode(&args); err != nil {
		return toolplane.Result{}, fmt.Errorf("%w: stored arguments of %s: %v", ErrFault, c.Key, err)
	}
	return iv.Invoke(ctx, c.Tool, args, &inv)
}

// callerPrincipal computes the principal of a fresh call from a door,
// which carries the credential the door verified: the call asks for asked
// (the one tool it names), and holds it when the agent's grants allow it
// now and the key admits it (Principals), or, in a deployment without
// grants, when the key's own tools name it. Only an agent's key calls
// tools.
func (iv *Invoker) callerPrincipal(ctx context.Context, asked []string, inv *toolplane.Invocation) error {
	cred := inv.Credential
	if cred.Kind != toolplane.CredentialAgent {
		inv.Principal = toolplane.Principal{ID: inv.Principal.ID}
		return nil
	}
	if iv.cfg.Principals == nil {
		p := toolplane.Principal{ID: inv.Principal.ID}
		if cred.Grants(asked[0]) {
			p.Tools = asked
		}
		inv.Principal = p
		return nil
	}
	inv.Principal = toolplane.Principal{ID: inv.Principal.ID, Tools: asked}
	p, err := iv.cfg.Principals.Principal(ctx, inv)
	if err != nil {
		return fmt.Errorf("%w: %w: principal %s: %v", ErrFault, ErrPrincipalUnavailable, inv.Principal.ID, err)
	}
	inv.Principal = p
	return nil
}

// livePrincipal replaces the principal of a stored invocation with the
// live one, when the deployment can answer it: a grant removed (or a person
// offboarded) while an approval waited must refuse the call it approved.
func (iv *Invoker) livePrincipal(ctx context.Context, inv *toolplane.Invocation) error {
	if iv.cfg.Principals == nil {
		return nil
	}
	p, err := iv.cfg.Principals.Principal(ctx, inv)
	if err != nil {
		return fmt.Errorf("%w: principal %s: %v", ErrFault, inv.Principal.ID, err)
	}
	inv.Principal = p
	return nil
}
