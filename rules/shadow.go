package rules

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy"
)

// Bounds of a shadow run: the events it reads, and the differences it
// reports one by one (the counts stay exact up to the events read).
const (
	MaxShadowEvents      = 100_000
	MaxShadowDifferences = 500
	MaxShadowDays        = 90
)

// ShadowReport is what a candidate bundle would have decided of the
// organization's past calls, beside what was decided then.
//
// A call is replayed from its audit event's recorded document: the
// arguments and the facts resolved then, as the audit keeps them
// (credentials redacted, and every text value kept as its digest, so a
// rule comparing two texts replays exactly and one comparing a text with
// a literal reads the digest), the time then (in the zone in force then)
// and the run's cost then, with stage 1 (the grants) as it answered then.
// A grant or deny changed since is not replayed, nor is a call whose
// grants refused it (the candidate could not have allowed it either: it
// counts as unchanged). A call recorded before documents were kept, or
// whose document was too large, cannot be replayed and is counted apart.
type ShadowReport struct {
	Since time.Time `json:"since"`
	Until time.Time `json:"until"`
	// Language and Digest name the candidate.
	Language string `json:"language"`
	Digest   string `json:"digest"`
	// Examined counts the calls that reached a policy decision; Replayed
	// those decided again; Unchanged those the candidate decides alike
	// (grant refusals included); Unreplayable those without a document.
	Examined     int `json:"examined"`
	Replayed     int `json:"replayed"`
	Unchanged    int `json:"unchanged"`
	Unreplayable int `json:"unreplayable"`
	// Changed counts the calls decided differently; Differences lists the
	// newest of them, at most MaxShadowDifferences.
	Changed     int          `json:"changed"`
	Differences []Difference `json:"differences"`
	// Faults counts calls the candidate could not decide (an error, a
	// budget spent): a bundle with faults fails calls.
	Faults int `json:"faults"`
	// Truncated says the oldest events of the window were not examined:
	// the window held more events than a run reads, or the run spent its
	// time (the candidate's decisions are slow).
	Truncated bool `json:"truncated"`
}

// Difference is one past call the candidate decides differently.
type Difference struct {
	EventID string    `json:"event_id"`
	At      time.Time `json:"at"`
	RunID   string    `json:"run_id"`
	AgentID string    `json:"agent_id"`
	Tool    string    `json:"tool"`
	// Then is what was decided (and by which bundle and rule); Now what
	// the candidate decides, by which rule and why.
	Then       string `json:"then"`
	ThenBundle int64  `json:"then_bundle,omitempty"`
	ThenRule   string `json:"then_rule,omitempty"`
	Now        string `json:"now"`
	NowRule    string `json:"now_rule,omitempty"`
	NowReason  string `json:"now_reason,omitempty"`
}

// Shadow replays the calls recorded since (at most MaxShadowDays ago)
// against files as a candidate bundle, without publishing it, and reports
// those it would decide differently, for a caller MayShadow allows. files
// must compile; its tests are not
// run (Test and Publish do). The run reads at most MaxShadowEvents events
// and spends at most the service's run budget; past either it stops, the
// report Truncated.
func (s *Service) Shadow(ctx context.Context, files map[string]string, since time.Time, by *toolplane.Credential) (*ShadowReport, error) {
	if err := MayShadow(by); err != nil {
		return nil, err
	}
	r, lang, err := Compile(s.languages(), files)
	if err != nil {
		return nil, err
	}
	now := s.now()
	if oldest := now.Add(-MaxShadowDays * 24 * time.Hour); since.Before(oldest) {
		return nil, fmt.Errorf("%w: a shadow run reaches back at most %d days", toolplane.ErrInvalid, MaxShadowDays)
	}
	rep := &ShadowReport{Since: since, Until: now, Language: lang, Digest: toolplane.PolicyBundleDigest(files), Differences: []Difference{}}
	after, read := "", 0
	deadline := time.Now().Add(s.runBudget) // wall time, whatever clock decides
	for {
		page, next, err := s.store.ListAudit(ctx, by.OrganizationID, toolplane.AuditFilter{}, after, 1000)
		if err != nil {
			return nil, fmt.Errorf("shadow: read the audit trail: %w", err)
		}
		for i := range page {
			e := &page[i]
			if e.CreatedAt.Before(since) {
				return rep, nil
			}
			if read++; read > MaxShadowEvents || !time.Now().Before(deadline) {
				rep.Truncated = true
				return rep, nil
			}
			s.replay(ctx, r, e, rep)
		}
		if next == "" {
			return rep, nil
		}
		after = next
	}
}

// replay decides one recorded call again with the candidate.
func (s *Service) replay(ctx context.Context, r policy.Rules, e *toolplane.AuditEvent, rep *ShadowReport) {
	if e.PolicyDecision == "" {
		return // the call ended before the policy step
	}
	rep.Examined++
	if len(e.PolicyInput) == 0 {
		// A denial no bundle decided is the grants' (a bundle's denial
		// names its version, even one no rule id names: "no rule allows
		// this call").
		if e.PolicyDecision == policy.Deny.String() && e.PolicyBundle == 0 {
			rep.Unchanged++ // the grants refused it: so would they now
			return
		}
		rep.Unreplayable++
		return
	}
	var rec recorded
	if err := json.Unmarshal(e.PolicyInput, &rec); err != nil || rec.Request == nil {
		rep.Unreplayable++
		return
	}
	rep.Replayed++
	d1 := policy.Decision{Effect: policy.Allow}
	if rec.Grants == policy.RequireApproval.String() {
		d1.Effect = policy.RequireApproval
	}
	d2, err := s.evaluate(ctx, r, rec.Request)
	if err != nil {
		rep.Faults++
		rep.Changed++
		s.differ(rep, e, policy.Decision{Reason: "the candidate could not decide: " + err.Error()}, "fault")
		return
	}
	d := combine(d1, d2, rec.Request)
	if d.Effect.String() == e.PolicyDecision {
		rep.Unchanged++
		return
	}
	rep.Changed++
	s.differ(rep, e, d, d.Effect.String())
}

func (s *Service) differ(rep *ShadowReport, e *toolplane.AuditEvent, d policy.Decision, now string) {
	if len(rep.Differences) >= MaxShadowDifferences {
		return
	}
	rep.Differences = append(rep.Differences, Difference{
		EventID: e.ID, At: e.CreatedAt, RunID: e.RunID, AgentID: e.AgentID, Tool: e.Tool,
		Then: e.PolicyDecision, ThenBundle: e.PolicyBundle, ThenRule: e.PolicyRule,
		Now: now, NowRule: d.Rule, NowReason: d.Reason,
	})
}
