// Package runs assembles one run of an agent from what the stores already
// keep: its audit events (every call, approval decision and
// reconciliation recorded under the run's id), the approvals those events
// name, the journal's claims of the calls whose outcome was uncertain, and
// the meter's spend of the run's tree. A run is not stored as a row of its
// own; it is the trail's events that share its id, read through the trail's
// index by run, so a run reads as fast on a trail of millions of events as
// on a small one.
//
// Reading a run is reading the audit trail: the service asks the auditor's
// role (audit.MayRead), or the approver's for a run that asked for an
// approval (what an approval card links to), and reads only the caller's
// organization, so a run of another organization is not found, exactly as
// a missing one.
package runs

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/audit"
)

// Store is what a run is read from: the audit trail, the approvals, the
// journal and the meter.
type Store interface {
	ListAudit(ctx context.Context, org string, filter toolplane.AuditFilter, after string, limit int) ([]toolplane.AuditEvent, string, error)
	GetApproval(ctx context.Context, org, id string) (*toolplane.Approval, error)
	GetClaim(ctx context.Context, org, tool, key string) (*toolplane.Claim, error)
	RunTreeCost(ctx context.Context, org, rootRunID string) (int64, error)
}

// The bounds of one run's reading. A run is an agent's task, a few to a
// few hundred calls; one that made more is shown by its newest events and
// says it was cut (Run.Truncated), so a runaway loop cannot make its page
// a scan.
const (
	// MaxEvents bounds the audit events read.
	MaxEvents = 1000
	// MaxApprovals bounds the approvals read, one lookup each.
	MaxApprovals = 50
	// MaxUncertain bounds the uncertain actions whose claim is read.
	MaxUncertain = 50
)

// page is how many events one store query answers.
const page = 250

// Status says where a run stands, as far as its trail tells: a run has no
// end of its own, only its calls, so the status is what a person must do
// about it, if anything.
type Status string

// The statuses, most pressing first: a run with an open uncertain action
// is StatusUncertain whatever else it has.
const (
	// StatusUncertain: a write of the run may or may not have happened and
	// holds its key until somebody reconciles it.
	StatusUncertain Status = "uncertain"
	// StatusWaiting: a call of the run waits for a person's approval.
	StatusWaiting Status = "waiting_for_approval"
	// StatusFailed: the run's last call ended with an error code.
	StatusFailed Status = "failed"
	// StatusOK: nothing waits, and the last call answered.
	StatusOK Status = "ok"
)

// Run is one run as its page and GET /v1/runs/{id} show it.
type Run struct {
	ID     string `json:"id"`
	Status Status `json:"status"`
	// AgentID, UserID and TenantID are who ran it, from its first call.
	AgentID  string `json:"agent_id,omitempty"`
	UserID   string `json:"user_id,omitempty"`
	TenantID string `json:"tenant_id,omitempty"`
	// StartedAt is its first event, LastAt its latest; EndedAt is LastAt
	// once nothing of the run waits (no pending approval, no open
	// uncertain action), zero while something does.
	StartedAt time.Time `json:"started_at"`
	LastAt    time.Time `json:"last_at"`
	EndedAt   time.Time `json:"ended_at,omitzero"`
	// Truncated is set when the run has more than MaxEvents events: the
	// newest are shown, and StartedAt is the first of those.
	Truncated bool `json:"truncated,omitempty"`
	// Timeline is every event of the run in the order it happened: its
	// calls, the decisions on its approvals, its reconciliations.
	Timeline  []Entry     `json:"timeline"`
	Calls     []Call      `json:"calls"`
	Approvals []Approval  `json:"approvals"`
	Uncertain []Uncertain `json:"uncertain"`
	Decisions []Decision  `json:"decisions"`
	Spend     Spend       `json:"spend"`
}

// The kinds of a timeline entry.
const (
	EntryCall           = "call"
	EntryApproval       = "approval"
	EntryReconciliation = "reconciliation"
)

// Entry is one event of a run's timeline.
type Entry struct {
	// AuditID is the audit event it is (GET /v1/audit/events/{id}).
	AuditID string    `json:"audit_id"`
	At      time.Time `json:"at"`
	// Kind is EntryCall, EntryApproval or EntryReconciliation.
	Kind        string `json:"kind"`
	StepPath    string `json:"step_path,omitempty"`
	Tool        string `json:"tool"`
	ToolVersion string `json:"tool_version,omitempty"`
	// Outcome is a call's ("ok", "approval_required" or an error code), an
	// approval's (approved, rejected, expired, escalated) or a
	// reconciliation's.
	Outcome string `json:"outcome"`
	// By is the person who decided an approval or settled an action.
	By string `json:"by,omitempty"`
	// AgentID is the agent that made a call: a run's id is its callers'
	// to choose, so each call says whose it is.
	AgentID    string `json:"agent_id,omitempty"`
	ApprovalID string `json:"approval_id,omitempty"`
	Reason     string `json:"reason,omitempty"`
	// LatencyMicros and CostCents are a call's.
	LatencyMicros int64 `json:"latency_micros,omitempty"`
	CostCents     int64 `json:"cost_cents,omitempty"`
}

// Bad reports whether the entry is an ending a person reads first: a
// call's error code, an approval rejected or expired. A reconciliation is
// never one: it is how an uncertain action ended.
func (e Entry) Bad() bool {
	switch e.Kind {
	case EntryCall:
		return !succeeded(e.Outcome)
	case EntryApproval:
		return e.Outcome == string(toolplane.ApprovalRejected) || e.Outcome == string(toolplane.ApprovalExpired)
	}
	return false
}

// Call is one call of the run.
type Call struct {
	AuditID       string    `json:"audit_id"`
	At            time.Time `json:"at"`
	StepPath      string    `json:"step_path,omitempty"`
	Tool          string    `json:"tool"`
	ToolVersion   string    `json:"tool_version,omitempty"`
	AgentID       string    `json:"agent_id,omitempty"`
	Outcome       string    `json:"outcome"`
	LatencyMicros int64     `json:"latency_micros"`
	CostCents     int64     `json:"cost_cents"`
	// Replayed marks an answer the journal gave from an earlier identical
	// call, which ran nothing.
	Replayed bool `json:"replayed,omitempty"`
	Attempts int  `json:"attempts,omitempty"`
	// ApprovalID is the approval the call filed or ran under.
	ApprovalID string `json:"approval_id,omitempty"`
}

// OK reports whether the call answered without an error code: it ran, or
// it waits for an approval.
func (c Call) OK() bool { return succeeded(c.Outcome) }

func succeeded(outcome string) bool { return outcome == "ok" || outcome == "approval_required" }

// Approval is an approval a call of the run filed or ran under, and who
// decided it when.
type Approval struct {
	ID          string                   `json:"id"`
	RunID       string                   `json:"run_id"`
	Tool        string                   `json:"tool"`
	ToolVersion string                   `json:"tool_version,omitempty"`
	Status      toolplane.ApprovalStatus `json:"status"`
	// Rule is the policy rule that asked for it ("" when the tool's own
	// requirement did); Group the group it was routed to.
	Rule  string `json:"rule,omitempty"`
	Group string `json:"group,omitempty"`
	// RequestedAt is when it was filed; DecidedAt and DecidedBy when and
	// by whom it was answered (zero and "" while pending, and for an
	// expiry, which nobody decides). ApprovedBy are the people who
	// approved so far, for one that needs several.
	RequestedAt   time.Time `json:"requested_at"`
	ExpiresAt     time.Time `json:"expires_at"`
	DecidedAt     time.Time `json:"decided_at,omitzero"`
	DecidedBy     string    `json:"decided_by,omitempty"`
	ApprovedBy    []string  `json:"approved_by,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	EscalatedFrom string    `json:"escalated_from,omitempty"`
}

// Uncertain is a call of the run whose effect nobody knew, and whether it
// still holds its key.
type Uncertain struct {
	Tool string `json:"tool"`
	Key  string `json:"key"`
	// Since is when the call became uncertain; Reason why.
	Since  time.Time `json:"since"`
	Reason string    `json:"reason,omitempty"`
	// Open is set while the claim is still uncertain; once settled,
	// SettledBy, SettledAt and Outcome say how (from the reconciliation's
	// event), and Note what the person recorded.
	Open      bool      `json:"open"`
	SettledBy string    `json:"settled_by,omitempty"`
	SettledAt time.Time `json:"settled_at,omitzero"`
	Outcome   string    `json:"outcome,omitempty"`
	Note      string    `json:"note,omitempty"`
}

// Decision is what the policy decided of one call, and by which rule.
type Decision struct {
	AuditID string    `json:"audit_id"`
	At      time.Time `json:"at"`
	Tool    string    `json:"tool"`
	// Decision is allow, deny or require_approval; Rule the rule that
	// decided ("" when the grants alone did), Bundle the rules' version.
	Decision string `json:"decision"`
	Rule     string `json:"rule,omitempty"`
	Bundle   int64  `json:"bundle,omitempty"`
	// Degraded marks a decision taken from the last known good rules.
	Degraded bool `json:"degraded,omitempty"`
}

// Spend is what the run cost against its ceiling.
type Spend struct {
	// RunCents is what the run's own calls cost, as their events record.
	RunCents int64 `json:"run_cents"`
	// RootRunID is the run tree the ceiling covers, and TreeCents what the
	// meter charged that tree; TreeRead is false when the meter could not
	// be read.
	RootRunID string `json:"root_run_id"`
	TreeCents int64  `json:"tree_cents"`
	TreeRead  bool   `json:"tree_read"`
	// CeilingCents is the run tree's cost ceiling as the latest call of
	// the run that asked for an approval carried it (0: none);
	// CeilingKnown is false when no call of the run did (an approval is
	// the one record that keeps a call's ceiling), so it is not known.
	CeilingCents int64 `json:"ceiling_cents"`
	CeilingKnown bool  `json:"ceiling_known"`
}

// Service reads runs.
type Service struct {
	store Store
}

// New answers a service reading store.
func New(store Store) *Service { return &Service{store: store} }

// Get answers the run id of the caller's organization, to an auditor
// (audit.MayRead; a refusal is a *toolplane.DeniedError). A run with no
// event in the caller's organization, another organization's included,
// answers an error wrapping toolplane.ErrNotFound.
func (s *Service) Get(ctx context.Context, id string, by *toolplane.Credential) (*Run, error) {
	if by == nil {
		return nil, fmt.Errorf("read a run: %w", toolplane.ErrUnauthenticated)
	}
	// An auditor reads every run; an approver, the runs that asked for an
	// approval (the context of what they are asked to decide, which
	// every approval card links to), checked once the run is read.
	auditor := audit.MayRead(by)
	if auditor != nil && approval.MayRead(by, "reading runs") != nil {
		return nil, auditor
	}
	if err := toolplane.CheckLen("run id", id, toolplane.MaxRunLen); err != nil {
		return nil, err
	}
	if id == "" {
		return nil, fmt.Errorf("run %q: %w", id, toolplane.ErrNotFound)
	}
	org := by.OrganizationID
	evs, truncated, err := s.events(ctx, org, id)
	if err != nil {
		return nil, err
	}
	if len(evs) == 0 {
		return nil, fmt.Errorf("run %s: %w", id, toolplane.ErrNotFound)
	}
	r := &Run{ID: id, Truncated: truncated, StartedAt: evs[0].CreatedAt, LastAt: evs[len(evs)-1].CreatedAt,
		Timeline: []Entry{}, Calls: []Call{}, Approvals: []Approval{}, Uncertain: []Uncertain{}, Decisions: []Decision{}}
	for i := range evs {
		r.add(&evs[i])
	}
	var ceiling ceilingOf
	if err := s.approvals(ctx, org, r, evs, &ceiling); err != nil {
		return nil, err
	}
	if auditor != nil && !slices.ContainsFunc(r.Approvals, func(a Approval) bool { return a.RunID == id }) {
		// To an approver, a run that filed no approval of its own (an
		// approval id a caller named in another run's call does not
		// count) is no run at all: the same answer as a missing one.
		return nil, fmt.Errorf("run %s: %w", id, toolplane.ErrNotFound)
	}
	if err := s.uncertain(ctx, org, r, evs); err != nil {
		return nil, err
	}
	r.Spend.RootRunID, r.Spend.CeilingCents, r.Spend.CeilingKnown = cmp.Or(ceiling.root, id), ceiling.cents, ceiling.known
	if cost, err := s.store.RunTreeCost(ctx, org, r.Spend.RootRunID); err == nil {
		r.Spend.TreeCents, r.Spend.TreeRead = cost, true
	} else if ctx.Err() != nil {
		return nil, fmt.Errorf("run %s: spend: %w", id, err)
	}
	r.Status = r.status()
	if r.Status == StatusOK || r.Status == StatusFailed {
		r.EndedAt = r.LastAt
	}
	return r, nil
}

// events answers the run's events oldest first, the newest MaxEvents of
// them, and whether there were more.
func (s *Service) events(ctx context.Context, org, id string) ([]toolplane.AuditEvent, bool, error) {
	var out []toolplane.AuditEvent
	after := ""
	for {
		evs, next, err := s.store.ListAudit(ctx, org, toolplane.AuditFilter{RunID: id}, after, min(page, MaxEvents-len(out)))
		if err != nil {
			return nil, false, fmt.Errorf("run %s: read its events: %w", id, err)
		}
		out = append(out, evs...)
		if next == "" {
			break
		}
		if len(out) >= MaxEvents {
			more, _, err := s.store.ListAudit(ctx, org, toolplane.AuditFilter{RunID: id}, next, 1)
			if err != nil {
				return nil, false, fmt.Errorf("run %s: read its events: %w", id, err)
			}
			slices.Reverse(out)
			sortEvents(out)
			return out, len(more) > 0, nil
		}
		after = next
	}
	slices.Reverse(out)
	sortEvents(out)
	return out, false, nil
}

// sortEvents orders events as they happened: by time, then by their place
// in the organization's chain, which is the order they were stored in
// (events of one microsecond keep the order they were appended in).
func sortEvents(evs []toolplane.AuditEvent) {
	slices.SortStableFunc(evs, func(a, b toolplane.AuditEvent) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.Seq, b.Seq))
	})
}

// add places one event on the run's timeline and, for a call, among its
// calls and decisions.
func (r *Run) add(e *toolplane.AuditEvent) {
	en := Entry{AuditID: e.ID, At: e.CreatedAt, StepPath: e.StepPath, Tool: e.Tool, ToolVersion: e.ToolVersion,
		Outcome: e.Outcome, ApprovalID: cmp.Or(e.ApprovalID, e.AuthorizedBy), Reason: e.Reason}
	switch e.Kind {
	case toolplane.AuditApproval:
		en.Kind, en.By, en.ApprovalID = EntryApproval, e.ApproverID, cmp.Or(e.ApprovalID, e.Subject)
	case toolplane.AuditReconciliation:
		en.Kind, en.By = EntryReconciliation, e.PrincipalID
	case toolplane.AuditCall:
		en.Kind, en.LatencyMicros, en.CostCents, en.AgentID = EntryCall, e.LatencyMicros, e.CostCents, e.AgentID
		if r.AgentID == "" {
			r.AgentID, r.UserID, r.TenantID = e.AgentID, e.UserID, e.TenantID
		}
		r.Calls = append(r.Calls, Call{AuditID: e.ID, At: e.CreatedAt, StepPath: e.StepPath, Tool: e.Tool, ToolVersion: e.ToolVersion, AgentID: e.AgentID,
			Outcome: e.Outcome, LatencyMicros: e.LatencyMicros, CostCents: e.CostCents, Replayed: e.Replayed, Attempts: e.Attempts,
			ApprovalID: en.ApprovalID})
		r.Spend.RunCents += e.CostCents
		decision := e.PolicyDecision
		if decision == "" && e.Outcome == string(toolplane.CodeDenied) {
			// Refused before the rules were asked: the grants decided.
			decision = "deny"
		}
		if decision != "" {
			r.Decisions = append(r.Decisions, Decision{AuditID: e.ID, At: e.CreatedAt, Tool: e.Tool, Decision: decision,
				Rule: e.PolicyRule, Bundle: e.PolicyBundle, Degraded: e.PolicyDegraded})
		}
	default:
		// Another kind under a run id (none is written today) stays off
		// the run: it is not something the run did.
		return
	}
	r.Timeline = append(r.Timeline, en)
}

// ceilingOf is the run tree and cost ceiling the latest call of the run
// stored whole carried: each call carries its own (a caller may tighten
// it from one call to the next), and the latest is what the run's next
// call is held to. Only an approval stores its call's whole invocation
// (it runs the call later); a journal claim keeps only who called,
// unless the tool replays, so it cannot tell a ceiling from none.
type ceilingOf struct {
	root  string
	cents int64
	at    time.Time
	known bool
}

// take reads the ceiling from a stored invocation of the run, made at at,
// unless one stored later was read.
func (c *ceilingOf) take(runID, id string, stored []byte, at time.Time) {
	if runID != id || len(stored) == 0 || (c.known && !at.After(c.at)) {
		return
	}
	inv, err := approval.DecodeInvocation(stored)
	if err != nil {
		return
	}
	c.root, c.cents, c.at, c.known = inv.EffectiveRootRunID(), inv.Ceilings.MaxCostCents, at, true
}

// approvals reads the approvals the run's events name, in the order they
// were first named.
func (s *Service) approvals(ctx context.Context, org string, r *Run, evs []toolplane.AuditEvent, ceiling *ceilingOf) error {
	var ids []string
	for _, e := range evs {
		for _, id := range []string{e.ApprovalID, e.AuthorizedBy} {
			if id != "" && !slices.Contains(ids, id) && len(ids) < MaxApprovals {
				ids = append(ids, id)
			}
		}
	}
	for _, id := range ids {
		a, err := s.store.GetApproval(ctx, org, id)
		if errors.Is(err, toolplane.ErrNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("run %s: approval %s: %w", r.ID, id, err)
		}
		ceiling.take(a.RunID, r.ID, a.Invocation, a.CreatedAt)
		v := Approval{ID: a.ID, RunID: a.RunID, Tool: a.Tool, ToolVersion: a.ToolVersion, Status: a.Status, Rule: a.Rule,
			Group: a.ApproverGroup, RequestedAt: a.CreatedAt, ExpiresAt: a.ExpiresAt, ApprovedBy: a.ApprovedBy,
			Reason: a.Reason, EscalatedFrom: a.EscalatedFrom}
		if a.Status == toolplane.ApprovalApproved || a.Status == toolplane.ApprovalRejected {
			v.DecidedAt, v.DecidedBy = a.ResolvedAt, a.ResolvedBy
		}
		r.Approvals = append(r.Approvals, v)
	}
	return nil
}

// uncertain reads the claim of every call of the run that answered
// uncertain, to tell whether it still holds its key.
func (s *Service) uncertain(ctx context.Context, org string, r *Run, evs []toolplane.AuditEvent) error {
	type held struct{ tool, key string }
	settled := map[held]*toolplane.AuditEvent{}
	for i, e := range evs {
		if e.Kind == toolplane.AuditReconciliation && e.Key != "" {
			settled[held{e.Tool, e.Key}] = &evs[i]
		}
	}
	seen := map[held]bool{}
	for _, e := range evs {
		h := held{e.Tool, e.Key}
		if e.Kind != toolplane.AuditCall || e.Outcome != string(toolplane.CodeUncertain) || e.Key == "" || seen[h] {
			continue
		}
		if len(seen) == MaxUncertain {
			break
		}
		seen[h] = true
		u := Uncertain{Tool: e.Tool, Key: e.Key, Since: e.CreatedAt, Reason: e.Reason}
		cl, err := s.store.GetClaim(ctx, org, e.Tool, e.Key)
		switch {
		case errors.Is(err, toolplane.ErrNotFound):
			// Released: the key is free again, so nothing holds it.
		case err != nil:
			return fmt.Errorf("run %s: claim of %s: %w", r.ID, e.Tool, err)
		default:
			u.Open = cl.Status == toolplane.ClaimUncertain
			u.Note = cl.Note
			if !u.Open {
				u.SettledBy = cl.ReconciledBy
			}
		}
		if st, ok := settled[h]; ok && !u.Open {
			u.SettledBy, u.SettledAt, u.Outcome = cmp.Or(st.PrincipalID, u.SettledBy), st.CreatedAt, st.Outcome
		}
		r.Uncertain = append(r.Uncertain, u)
	}
	return nil
}

// status answers what a person must do about the run, if anything.
func (r *Run) status() Status {
	for _, u := range r.Uncertain {
		if u.Open {
			return StatusUncertain
		}
	}
	for _, a := range r.Approvals {
		if a.Status == toolplane.ApprovalPending {
			return StatusWaiting
		}
	}
	if n := len(r.Calls); n > 0 && !r.Calls[n-1].OK() {
		return StatusFailed
	}
	return StatusOK
}
