package audit

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// DefaultPurgeTTL is how long a purge proposal waits for its confirmation.
const DefaultPurgeTTL = 24 * time.Hour

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
	// ErrPurgeTooRecent: a purge drops only events older than now.
	ErrPurgeTooRecent = toolplane.Refine(toolplane.ErrInvalid, "a purge drops only events created before now")
)

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
	store PurgeStore
	keys  *auditchain.KeySet
	ttl   time.Duration
	now   func() time.Time
}

// PurgesConfig is what Purges is built from. Store and Keys (with a
// private key: confirming signs checkpoints) are required.
type PurgesConfig struct {
	Store PurgeStore
	Keys  *auditchain.KeySet
	// TTL is how long a proposal waits for its confirmation (zero:
	// DefaultPurgeTTL).
	TTL time.Duration
	// Now is the clock (nil: time.Now).
	Now func() time.Time
}

// NewPurges answers the purge service built from cfg.
func NewPurges(cfg PurgesConfig) *Purges {
	p := &Purges{store: cfg.Store, keys: cfg.Keys, ttl: cfg.TTL, now: cfg.Now}
	if p.ttl <= 0 {
		p.ttl = DefaultPurgeTTL
	}
	if p.now == nil {
		p.now = time.Now
	}
	return p
}

// mayPurge refuses a caller who is not a platform admin (a person's role).
func mayPurge(by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return toolplane.Refuse(by, ErrNotPlatformAdmin, "purging the audit trail needs the platform_admin role")
	}
	return nil
}

// Propose files a proposal to drop the caller's organization's events
// created before before, recorded as an audit event in the same
// transaction.
func (p *Purges) Propose(ctx context.Context, before time.Time, by *toolplane.Credential) (*toolplane.AuditPurge, error) {
	if err := mayPurge(by); err != nil {
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
	// no event was old enough.
	Drops []auditchain.Drop `json:"drops"`
}

// Confirm confirms the caller's organization's proposal id, by a platform
// admin other than its proposer, before it expires, and drops the range:
// each drop's audit event names the proposal, its proposer and its
// confirmer. Of two confirmations at once, one wins.
func (p *Purges) Confirm(ctx context.Context, id string, by *toolplane.Credential) (PurgeResult, error) {
	if err := mayPurge(by); err != nil {
		return PurgeResult{}, err
	}
	pr, err := p.store.GetAuditPurge(ctx, by.OrganizationID, id)
	if err != nil {
		return PurgeResult{}, err
	}
	now := p.now()
	switch {
	case pr.ProposedBy == by.Subject:
		return PurgeResult{}, toolplane.Refuse(by, ErrOwnProposal, "a purge is confirmed by another platform admin than its proposer")
	case pr.ConfirmedBy != "":
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeConfirmed)
	case !now.Before(pr.ExpiresAt):
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeExpired)
	}
	ok, err := p.store.ConfirmAuditPurge(ctx, by.OrganizationID, id, by.Subject, now)
	if err != nil {
		return PurgeResult{}, err
	}
	if !ok {
		return PurgeResult{}, fmt.Errorf("purge %s: %w", id, ErrPurgeConfirmed)
	}
	pr.ConfirmedBy, pr.ConfirmedAt = by.Subject, now
	drops, err := auditchain.Retain(ctx, p.store, p.keys, by.OrganizationID, pr.Before, now, func(d auditchain.Drop) *toolplane.AuditEvent {
		return auditchain.DropEvent(d, pr, by, now)
	})
	res := PurgeResult{Purge: *pr, Drops: drops}
	if err != nil {
		return res, fmt.Errorf("purge %s: %w", id, err)
	}
	if len(drops) == 0 {
		// Nothing was old enough: the confirmation is recorded all the
		// same.
		ev := toolplane.ControlEvent(by, toolplane.AuditRetention, "confirmed", pr.ID, now)
		ev.Reason = fmt.Sprintf("purge of the events created before %s proposed by %s, confirmed: no event was that old",
			pr.Before.Format(time.RFC3339), pr.ProposedBy)
		if err := p.store.AppendAudit(ctx, ev); err != nil {
			return res, fmt.Errorf("purge %s: %w", id, err)
		}
	}
	if res.Drops == nil {
		res.Drops = []auditchain.Drop{}
	}
	return res, nil
}

// List answers the caller's organization's proposals, newest first, to a
// platform admin.
func (p *Purges) List(ctx context.Context, limit int, by *toolplane.Credential) ([]toolplane.AuditPurge, error) {
	if err := mayPurge(by); err != nil {
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

// Drop stops queueing events for the sink and deletes what waits for it,
// for a platform admin, while only their organization's events wait for
// it (toolplane.ErrSinkShared otherwise: the outbox is the operator's);
// recorded as an audit event. A node still
// configured with the sink registers it again at its next start.
func (s *Sinks) Drop(ctx context.Context, name string, by *toolplane.Credential) error {
	if !by.HasRole(toolplane.RolePlatformAdmin, "") {
		return toolplane.Refuse(by, ErrNotPlatformAdmin, "dropping an audit sink needs the platform_admin role")
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
	if err := s.store.DropAuditSink(ctx, name, by.OrganizationID); err != nil {
		return err
	}
	ev := toolplane.ControlEvent(by, toolplane.AuditRetention, "sink_dropped", name, s.now())
	ev.Reason = "the audit sink " + name + " was dropped, and the events waiting for it with it"
	if err := s.store.AppendAudit(ctx, ev); err != nil {
		return errors.Join(fmt.Errorf("audit sink %s dropped, but its event was not stored", name), err)
	}
	return nil
}
