package invoke

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
)

// What became of a call once a person approved it (Aftermath.State).
const (
	// AfterNotRun: approved, and the call has not run yet (its background
	// execution is due, or waits for the agent to ask again).
	AfterNotRun = "not_run"
	// AfterRunning: the call holds its key and is running now.
	AfterRunning = "running"
	// AfterOK: the call ran and answered.
	AfterOK = "ok"
	// AfterRefused: the call ended in a refusal or a failure (Code).
	AfterRefused = "refused"
	// AfterUncertain: nobody can yet say whether the call took effect.
	AfterUncertain = "uncertain"
)

// Aftermath is what became of the call an approval let through, so the
// person who approved it (and whoever reads the approval later) sees that
// the approved refund was paid, or refused as already refunded, or is
// uncertain, instead of a bare "approved".
type Aftermath struct {
	// State is one of the After… states.
	State string
	// Code is the refusal's code (AfterRefused), or uncertain.
	Code toolplane.Code
	// Message is the refusal's message as the agent read it, or why the
	// call is uncertain; "" when the platform kept none (see Aftermath).
	Message string
	// Untrusted says Message quotes a tool's text from outside the
	// platform (a remote server's error), to be read as data.
	Untrusted bool
	// ReconciledBy names who settled an action that was uncertain: a
	// person's subject, or "settlement" for the handler's own late answer.
	ReconciledBy string
	// AuditID is the audit event of the call that ran ("" when none was
	// found yet: the audit writer is behind, or the call has not run);
	// At is when it ended.
	AuditID string
	At      time.Time
}

// The audit events of one approval are read in pages of
// aftermathPage, at most aftermathPages of them, to find the call it let
// through: its filing, the calls answered while it waited, the run, and
// its repeats, of which an agent polling for its answer leaves many. Past
// that the outcome is still read from the journal, without its event.
const (
	aftermathPage  = 100
	aftermathPages = 10
)

// Aftermath answers what became of the call approval a let through, to by,
// who may read approvals (approval.MayRead): nil for an approval that was
// not approved. a is one by was given (approval.Service.Get, List), so it
// is of by's organization.
//
// It is read from what the platform keeps, not stored beside the
// approval: for a write or send (what approvals gate), the idempotency
// journal's claim of the approval's key, which holds the stored answer
// with its message, and follows an uncertain action to its
// reconciliation; and the audit trail, whose events name the approval,
// for the event of the call that ran (the link a person follows) and for
// the outcome of a call that claimed nothing (a read, or a write refused
// before its claim: a grant removed, the tool changed). The audit trail
// keeps no message, so such an outcome is its code alone: a message may
// quote an argument, and an argument may be a secret.
func (iv *Invoker) Aftermath(ctx context.Context, a *toolplane.Approval, by *toolplane.Credential) (*Aftermath, error) {
	if err := approval.MayRead(by, "reading approvals"); err != nil {
		return nil, err
	}
	if a.OrganizationID != by.OrganizationID {
		return nil, fmt.Errorf("approval %s: %w", a.ID, toolplane.ErrNotFound)
	}
	if a.Status != toolplane.ApprovalApproved || iv.cfg.Store == nil {
		return nil, nil
	}
	ran, err := iv.ranUnder(ctx, a)
	if err != nil {
		return nil, err
	}
	out := &Aftermath{State: AfterNotRun}
	if ran != nil {
		out.AuditID, out.At = ran.ID, ran.CreatedAt
		switch code := toolplane.Code(ran.Outcome); {
		case ran.Outcome == "ok":
			out.State = AfterOK
		case code == toolplane.CodeUncertain:
			out.State, out.Code, out.Message = AfterUncertain, code, ran.Reason
		case ran.Outcome == "fault":
			out.State, out.Code = AfterRefused, toolplane.CodeInternalError
		default:
			out.State, out.Code = AfterRefused, code
		}
	}
	if a.Key == "" {
		return out, nil
	}
	cl, err := iv.cfg.Store.GetClaim(ctx, a.OrganizationID, a.Tool, a.Key)
	switch {
	case errors.Is(err, toolplane.ErrNotFound):
		return out, nil // a read, or nothing claimed (yet, or any more)
	case err != nil:
		return nil, fmt.Errorf("the claim of approval %s: %w", a.ID, err)
	}
	switch cl.Status {
	case toolplane.ClaimProcessing:
		out.State, out.Code, out.Message = AfterRunning, "", ""
	case toolplane.ClaimUncertain:
		out.State, out.Code, out.Message = AfterUncertain, toolplane.CodeUncertain, cl.Reason
	case toolplane.ClaimCompleted:
		res, err := decodeResult(cl.Result)
		if err != nil {
			return nil, fmt.Errorf("%w: the stored answer of approval %s: %v", ErrFault, a.ID, err)
		}
		out.State, out.Code, out.Message, out.Untrusted = AfterOK, "", "", false
		if !res.OK && res.Error != nil {
			out.State, out.Code, out.Message, out.Untrusted = AfterRefused, res.Error.Code, res.Error.Message, res.Meta.Untrusted
			if res.Error.Code == toolplane.CodeUncertain {
				// A reconciliation that says nobody can confirm it yet.
				out.State = AfterUncertain
			}
		}
		out.ReconciledBy = cl.ReconciledBy
	}
	return out, nil
}

// ranUnder answers the audit event of the call approval a let through
// that ended last, or nil when none is found.
func (iv *Invoker) ranUnder(ctx context.Context, a *toolplane.Approval) (*toolplane.AuditEvent, error) {
	// By approval alone, not its run: a caller's key scopes an approval
	// across runs and sessions, and the call it let through is recorded in
	// the run it ran in (an index on the approval serves the read).
	f := toolplane.AuditFilter{Tool: a.Tool, ApprovalID: a.ID}
	var ran *toolplane.AuditEvent
	after := ""
	for range aftermathPages {
		evs, next, err := iv.cfg.Store.ListAudit(ctx, a.OrganizationID, f, after, aftermathPage)
		if err != nil {
			return nil, fmt.Errorf("the audit events of approval %s: %w", a.ID, err)
		}
		for i := range evs { // newest first: the last call that ran decides
			switch {
			case ran != nil && ran.Outcome == string(toolplane.CodeUncertain) && evs[i].Outcome == ran.Outcome && !evs[i].Replayed:
				// The repeats of an uncertain action answer uncertain
				// too, none of them run: the call that ran is the
				// first of them.
				ran = &evs[i]
			case ran != nil:
				return ran, nil
			case callRan(&evs[i]):
				ran = &evs[i]
			}
		}
		if next == "" {
			break
		}
		after = next
	}
	return ran, nil
}

// callRan reports whether ev records a call that ran under its approval:
// an answer or a refusal of its own, not the filing (approval_required), a
// repeat answered from the journal, a call that found another in flight,
// a rejection, or a state the approval itself reached (expired,
// escalated), none of which is a call's code.
func callRan(ev *toolplane.AuditEvent) bool {
	if ev.Replayed {
		return false
	}
	switch ev.Outcome {
	case "ok", "fault":
		return true
	case string(toolplane.CodeRejected):
		return false
	}
	return toolplane.Code(ev.Outcome).Valid()
}
