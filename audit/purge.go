package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/catalog"
)

// DefaultPurgeTTL is how long a purge proposal waits for its confirmation.
const DefaultPurgeTTL = 24 * time.Hour

// DefaultPurgeResumeAfter is how long after its confirmation a purge whose
// drop is not done is left to the node that confirmed it before the purge
// job (Purges.FinishConfirmed) finishes it: long enough for a confirmer's
// own drop of a long range to end, so the two rarely race (a race drops
// and records nothing twice: the store drops a range only while it starts
// where the pass read it, and the other pass drops what is left).
const DefaultPurgeResumeAfter = 10 * time.Minute

// The refusals of a purge, each a refinement of a sentinel the doors map.
var (
	// ErrNotPlatformAdmin: proposing or confirming a purge needs the
	// platform_admin role.
	ErrNotPlatformAdmin = toolplane.Refine(toolplane.ErrForbidden, "purging the audit trail needs the platform_admin role")
	// ErrOwnProposal: the proposer of a purge cannot confirm it.
	ErrOwnProposal = toolplane.Refine(toolplane.ErrForbidden, "a purge is confirmed by another platform admin than its proposer")
	// ErrPurgeExpired: the proposal's time to be confirmed has passed.
	ErrPurgeExpired = toolplane.Refine(toolplane.ErrTransition, "the purge proposal expired")
	// ErrPurgeConfirmed: the proposal was confirmed already.
	ErrPurgeConfirmed = toolplane.Refine(toolplane.ErrTransition, "the purge proposal was confirmed already")
	// ErrPurgeUnfinished: the proposal was confirmed already and its drop
	// did not finish; it is resumed (Resume), not confirmed again.
	ErrPurgeUnfinished = toolplane.Refine(ErrPurgeConfirmed,
		"the purge was confirmed already and its drop did not finish: resume it (or leave it to the purge job)")
	// ErrPurgeDone: the purge was confirmed and its range dropped.
	ErrPurgeDone = toolplane.Refine(ErrPurgeConfirmed, "the purge is done: its range was dropped")
	// ErrPurgeNotConfirmed: only a confirmed purge is resumed.
	ErrPurgeNotConfirmed = toolplane.Refine(toolplane.ErrTransition, "the purge proposal is not confirmed: another platform admin confirms it first")
	// ErrPurgeTooRecent: a purge drops only events older than now.
	ErrPurgeTooRecent = toolplane.Refine(toolplane.ErrInvalid, "a purge drops only events created before now")
)

// ErrDropNotFinished marks the error of a confirmed purge whose drop did
// not finish: the purge stays confirmed, and the purge job or Resume
// finishes it. It is of no kind of its own: what failed (a refusal, or a
// fault named to no one) decides how the error is answered.
var ErrDropNotFinished = errors.New("the purge is confirmed and its drop did not finish: the purge job finishes it, or resume it")

// PurgeStore is what purges need of a store: their proposals, the chain,
// and the trail (a confirmation with nothing to drop is still recorded).
type PurgeStore interface {
	toolplane.AuditPurgeStore
	toolplane.AuditChainStore
	toolplane.AuditStore
}

// Purges drops a range of an organization's audit trail on the word of
// two platform admins: deleting audit data is itself audited and not one
// person's act. One proposes (Propose), another confirms (Confirm) before
// the proposal expires; each step is an audit event in the same chain,
// and the drop itself is retention's (auditchain.Retain): whole ranges
// under signed checkpoints, so the chain still verifies.
type Purges struct {
	store       PurgeStore
	keys        *auditchain.KeySet
	ttl         time.Duration
	resumeAfter time.Duration
	now         func() time.Time
}

// PurgesConfig is what Purges is built from. Store and Keys (with a
// private key: confirming signs checkpoints) are required.
type PurgesConfig struct {
	Store PurgeStore
	Keys  *auditchain.KeySet
	// TTL is how long a proposal waits for its confirmation (zero:
	// DefaultPurgeTTL).
	TTL time.Duration
	// ResumeAfter is how long after its confirmation an unfinished purge
	// is left to its confirmer before FinishConfirmed finishes it (zero:
	// DefaultPurgeResumeAfter).
	ResumeAfter time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// NewPurges answers the purge service built from cfg.
func NewPurges(cfg PurgesConfig) *Purges {
	p := &Purges{store: cfg.Store, keys: cfg.Keys, ttl: cfg.TTL, resumeAfter: cfg.ResumeAfter, now: cfg.Now}
	if p.ttl <= 0 {
		p.ttl = DefaultPurgeTTL
	}
	if p.resumeAfter <= 0 {
		p.resumeAfter = DefaultPurgeResumeAfter
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// MayPurge refuses a caller who is not a platform admin (a person's
// role): who may list, propose, confirm and resume purges, and drop a
// sink. A page asks it to offer the actions; the services ask it again.
func MayPurge(by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return toolplane.Refuse(by, ErrNotPlatformAdmin, "purging the audit trail needs the platform_admin role")
	}
	return nil
}

// Propose files a proposal to drop the caller's organization's events
// created before before, recorded as an audit event in the same
// transaction.
func (p *Purges) Propose(ctx context.Context, before time.Time, by *toolplane.Credential) (*toolplane.AuditPurge, error) {
	if err := MayPurge(by); err != nil {
		return nil, err
	}
	now := p.now()
	if before.IsZero() || before.After(now) {
		return nil, fmt.Errorf("purge before %s: %w", before.Format(time.RFC3339), ErrPurgeTooRecent)
	}
	pr := &toolplane.AuditPurge{ID: toolplane.NewID("purge_"), OrganizationID: by.OrganizationID, Before: before.UTC().Truncate(time.Microsecond),
		ProposedBy: by.Subject, ProposedAt: now, ExpiresAt: now.Add(p.ttl)}
	ev := toolplane.ControlEvent(by, toolplane.AuditRetention, "proposed", pr.ID, now)
	ev.Reason = fmt.Sprintf("purge of the events created before %s proposed; it needs another platform admin's confirmation before %s",
		pr.Before.Format(time.RFC3339), pr.ExpiresAt.UTC().Format(time.RFC3339))
	if err := p.store.CreateAuditPurge(ctx, pr, ev); err != nil {
		return nil, err
	}
	return pr, nil
}

// PurgeResult is what a confirmed purge did.
type PurgeResult struct {
	Purge toolplane.AuditPurge `json:"purge"`
	// Drops are the ranges dropped, each under its checkpoint; none when
	// no event was old enough (or, resumed, when an earlier attempt
	// dropped them all).
	Drops []auditchain.Drop `json:"drops"`
}

// Confirm confirms the caller's organization's proposal id, by a platform
// admin other than its proposer, before it expires, and drops the range.
// The confirmation is an audit event stored with it; each drop's event
// names the proposal, its proposer and its confirmer; the purge's
// completion is an event stored with it. Of two confirmations at once,
// one wins. A drop that fails leaves the purge confirmed and not done:
// Resume, or the purge job (FinishConfirmed), finishes it; confirming it
// again answers ErrPurgeUnfinished, and once done ErrPurgeDone.
func (p *Purges) Confirm(ctx context.Context, id string, by *toolplane.Credential) (PurgeResult, error) {
	if err := MayPurge(by); err != nil {
		return PurgeResult{}, err
	}
	pr, err := p.store.GetAuditPurge(ctx, by.OrganizationID, id)
	if err != nil {
		return PurgeResult{}, err
	}
	now := p.now()
	switch {
	case !pr.DoneAt.IsZero():
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeDone)
	case pr.ConfirmedBy != "":
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeUnfinished)
	case pr.ProposedBy == by.Subject:
		return PurgeResult{}, toolplane.Refuse(by, ErrOwnProposal, "a purge is confirmed by another platform admin than its proposer")
	case !now.Before(pr.ExpiresAt):
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeExpired)
	}
	ev := toolplane.ControlEvent(by, toolplane.AuditRetention, "confirmed", pr.ID, now)
	ev.ApprovalID = pr.ID
	ev.Reason = fmt.Sprintf("purge of the events created before %s proposed by %s, confirmed; its range is dropped next",
		pr.Before.Format(time.RFC3339), pr.ProposedBy)
	ok, err := p.store.ConfirmAuditPurge(ctx, by.OrganizationID, id, by.Subject, now, ev)
	if err != nil {
		return PurgeResult{}, err
	}
	if !ok {
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeConfirmed)
	}
	pr.ConfirmedBy, pr.ConfirmedAt = by.Subject, now
	res, err := p.finish(ctx, pr, by, now)
	if err != nil {
		return res, fmt.Errorf("purge %s: %w: %w", id, ErrDropNotFinished, err)
	}
	return res, nil
}

// Resume finishes the caller's organization's confirmed purge id whose
// drop did not finish (a drop that failed, a node stopped between the
// confirmation and the drop), for a platform admin: the two admins agreed
// already, so any platform admin of the organization may finish it, the
// proposer too. It drops what of the range remains (a range dropped
// already is not found again), and records the purge done with its
// event. A purge not confirmed answers ErrPurgeNotConfirmed, one done
// ErrPurgeDone.
func (p *Purges) Resume(ctx context.Context, id string, by *toolplane.Credential) (PurgeResult, error) {
	if err := MayPurge(by); err != nil {
		return PurgeResult{}, err
	}
	pr, err := p.store.GetAuditPurge(ctx, by.OrganizationID, id)
	if err != nil {
		return PurgeResult{}, err
	}
	switch {
	case !pr.DoneAt.IsZero():
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeDone)
	case pr.ConfirmedBy == "":
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeNotConfirmed)
	}
	res, err := p.finish(ctx, pr, by, p.now())
	if err != nil {
		return res, fmt.Errorf("purge %s: %w: %w", id, ErrDropNotFinished, err)
	}
	return res, nil
}

// purgePage is how many unfinished purges FinishConfirmed reads at once.
const purgePage = 100

// FinishConfirmed is the purge job's pass: it finishes every
// organization's purge confirmed more than ResumeAfter ago whose drop is
// not done, as the retention policy's principal (the drops' events still
// name the proposal, its proposer and its confirmer). A purge that fails
// again is reported in the error and the others are still finished; the
// next pass tries it again.
func (p *Purges) FinishConfirmed(ctx context.Context) ([]PurgeResult, error) {
	now := p.now()
	var (
		done []PurgeResult
		errs []error
	)
	for after := ""; ; {
		page, err := p.store.UnfinishedAuditPurges(ctx, now.Add(-p.resumeAfter), after, purgePage)
		if err != nil {
			return done, fmt.Errorf("audit purges: %w", err)
		}
		for i := range page {
			res, err := p.finish(ctx, &page[i], nil, now)
			if err != nil {
				if ctx.Err() != nil {
					return done, err
				}
				errs = append(errs, fmt.Errorf("purge %s of %s: %w", page[i].ID, page[i].OrganizationID, err))
				continue
			}
			done = append(done, res)
		}
		if len(page) < purgePage {
			return done, errors.Join(errs...)
		}
		after = page[len(page)-1].ID
	}
}

// Pending answers whether FinishConfirmed has a purge to finish now (one
// read): the purge job's check, so an idle deployment runs no pass.
func (p *Purges) Pending(ctx context.Context) (bool, error) {
	page, err := p.store.UnfinishedAuditPurges(ctx, p.now().Add(-p.resumeAfter), "", 1)
	if err != nil {
		return false, fmt.Errorf("audit purges: %w", err)
	}
	return len(page) > 0, nil
}

// finish drops what remains of the confirmed purge pr's range, each drop
// with its event, then records pr done with its completion event, by the
// person by (nil: the purge job). It is idempotent: a range dropped
// already is not found again (retention drops from the first stored
// event, and what pr names is gone), so a second finish drops nothing and
// only the first completion is stored.
func (p *Purges) finish(ctx context.Context, pr *toolplane.AuditPurge, by *toolplane.Credential, now time.Time) (PurgeResult, error) {
	drops, err := auditchain.Retain(ctx, p.store, p.keys, pr.OrganizationID, pr.Before, now, func(d auditchain.Drop) *toolplane.AuditEvent {
		return auditchain.DropEvent(d, pr, by, now)
	})
	res := PurgeResult{Purge: *pr, Drops: drops}
	if res.Drops == nil {
		res.Drops = []auditchain.Drop{}
	}
	if err != nil {
		return res, err
	}
	ok, err := p.store.CompleteAuditPurge(ctx, pr.OrganizationID, pr.ID, now, completedEvent(pr, drops, by, now))
	if err != nil {
		return res, err
	}
	if !ok {
		// Finished meanwhile by another (the job and a person at once):
		// it is done all the same.
		cur, err := p.store.GetAuditPurge(ctx, pr.OrganizationID, pr.ID)
		if err != nil {
			return res, err
		}
		res.Purge = *cur
		return res, nil
	}
	res.Purge.DoneAt = now
	return res, nil
}

// completedEvent answers the audit event of pr's completion by by (nil:
// the purge job), after it dropped drops.
func completedEvent(pr *toolplane.AuditPurge, drops []auditchain.Drop, by *toolplane.Credential, at time.Time) *toolplane.AuditEvent {
	var ev *toolplane.AuditEvent
	if by != nil {
		ev = toolplane.ControlEvent(by, toolplane.AuditRetention, "completed", pr.ID, at)
	} else {
		ev = &toolplane.AuditEvent{ID: toolplane.NewID("aud_"), OrganizationID: pr.OrganizationID, Kind: toolplane.AuditRetention,
			Subject: pr.ID, PrincipalID: auditchain.RetentionPrincipal, Source: toolplane.SourceControl, Outcome: "completed", CreatedAt: at}
	}
	ev.OrganizationID = pr.OrganizationID
	ev.ApprovalID, ev.ApproverID = pr.ID, pr.ConfirmedBy
	what := "no event that old was left to drop"
	if len(drops) > 0 {
		n := 0
		for _, d := range drops {
			n += d.Deleted
		}
		what = fmt.Sprintf("events %d to %d dropped (%d rows, %d ranges)", drops[0].From, drops[len(drops)-1].Through, n, len(drops))
	}
	ev.Reason = fmt.Sprintf("purge %s of the events created before %s, proposed by %s and confirmed by %s, is done: %s",
		pr.ID, pr.Before.UTC().Format(time.RFC3339), pr.ProposedBy, pr.ConfirmedBy, what)
	return ev
}

// List answers the caller's organization's proposals, newest first, to a
// platform admin.
func (p *Purges) List(ctx context.Context, limit int, by *toolplane.Credential) ([]toolplane.AuditPurge, error) {
	if err := MayPurge(by); err != nil {
		return nil, err
	}
	return p.store.ListAuditPurges(ctx, by.OrganizationID, limit)
}

// SinkStore is what the sinks' management needs of a store.
type SinkStore interface {
	toolplane.AuditOutboxStore
	toolplane.AuditStore
}

// Sinks lists and drops the sinks the trail is exported to, as the store
// has them registered: a sink no node exports to any more (its flag gone)
// still queues every event until it is dropped.
type Sinks struct {
	store SinkStore
	now   func() time.Time
}

// NewSinks answers the sinks' management over store.
func NewSinks(store SinkStore, now func() time.Time) *Sinks {
	if now == nil {
		now = time.Now
	}
	return &Sinks{store: store, now: now}
}

// SinkInfo is a registered sink and what waits for it of the caller's
// organization's events.
type SinkInfo struct {
	toolplane.AuditSink
	Pending int64      `json:"pending"`
	Oldest  *time.Time `json:"oldest,omitempty"`
}

// List answers the registered sinks to an auditor.
func (s *Sinks) List(ctx context.Context, by *toolplane.Credential) ([]SinkInfo, error) {
	if err := MayRead(by); err != nil {
		return nil, err
	}
	sinks, err := s.store.AuditSinks(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]SinkInfo, 0, len(sinks))
	for _, k := range sinks {
		lag, err := s.store.AuditOutboxLag(ctx, k.Name, &by.OrganizationID)
		if err != nil {
			return nil, err
		}
		info := SinkInfo{AuditSink: k, Pending: lag.Pending}
		if !lag.Oldest.IsZero() {
			info.Oldest = &lag.Oldest
		}
		out = append(out, info)
	}
	return out, nil
}

// ErrNoSink: no sink of that name is registered.
var ErrNoSink = toolplane.Refine(toolplane.ErrNotFound, "no audit sink of that name")

// ErrNotOperator: the caller is not the deployment's operator (a
// platform admin of catalog.DefaultOrganization), and the act is the
// operator's.
var ErrNotOperator = toolplane.Refine(toolplane.ErrForbidden, "the operator's act")

// MayDropSink refuses a caller who may not drop an audit sink: a sink
// serves every organization's trail (each event is queued for every
// registered sink), so only the operator — a platform admin of
// catalog.DefaultOrganization — drops one, as only the operator
// rotates the keys every organization's trail is signed with.
func MayDropSink(by *toolplane.Credential) error {
	if by.OrganizationID != catalog.DefaultOrganization || MayPurge(by) != nil {
		return toolplane.Refuse(by, ErrNotOperator, "dropping an audit sink is the operator's: it serves every organization, so it needs a platform admin of the "+catalog.DefaultOrganization+" organization")
	}
	return nil
}

// Drop stops queueing events for the sink and deletes what waits for it,
// every organization's (the outbox is the operator's, and the trail
// itself keeps every event), for the operator (MayDropSink); recorded as
// an audit event in the operator's trail. A node still configured with
// the sink registers it again at its next start.
func (s *Sinks) Drop(ctx context.Context, name string, by *toolplane.Credential) error {
	if err := MayDropSink(by); err != nil {
		return err
	}
	sinks, err := s.store.AuditSinks(ctx)
	if err != nil {
		return err
	}
	found := false
	for _, k := range sinks {
		found = found || k.Name == name
	}
	if !found {
		return fmt.Errorf("audit sink %q: %w", name, ErrNoSink)
	}
	if err := s.store.DropAuditSink(ctx, name, ""); err != nil {
		return err
	}
	ev := toolplane.ControlEvent(by, toolplane.AuditRetention, "sink_dropped", name, s.now())
	ev.Reason = "the audit sink " + name + " was dropped, and the events waiting for it with it"
	if err := s.store.AppendAudit(ctx, ev); err != nil {
		return errors.Join(fmt.Errorf("audit sink %s dropped, but its event was not stored", name), err)
	}
	return nil
}
