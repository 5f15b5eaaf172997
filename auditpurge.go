package toolplane

import (
	"context"
	"time"
)

// AuditPurge is a proposal to drop an organization's audit events older
// than Before: deleting audit data is no one person's act, so a platform
// admin proposes it and another confirms it before it expires.
type AuditPurge struct {
	ID             string    `json:"id"`
	OrganizationID string    `json:"organization_id"`
	Before         time.Time `json:"before"`
	ProposedBy     string    `json:"proposed_by"`
	ProposedAt     time.Time `json:"proposed_at"`
	ExpiresAt      time.Time `json:"expires_at"`
	// ConfirmedBy is the second admin, empty while the proposal waits.
	ConfirmedBy string    `json:"confirmed_by,omitempty"`
	ConfirmedAt time.Time `json:"confirmed_at,omitzero"`
	// DoneAt is when the confirmed purge's range was all dropped; zero
	// while the drop is to finish (a drop that failed, or a node stopped
	// between the confirmation and the drop, is finished later: by the
	// purge job or by a platform admin's resume).
	DoneAt time.Time `json:"done_at,omitzero"`
}

// AuditPurgeStatus is where a purge stands.
type AuditPurgeStatus string

// The statuses of a purge.
const (
	// PurgeProposed: waiting for another platform admin's confirmation.
	PurgeProposed AuditPurgeStatus = "proposed"
	// PurgeExpired: not confirmed in time; it drops nothing.
	PurgeExpired AuditPurgeStatus = "expired"
	// PurgeConfirmed: confirmed, its range not yet all dropped.
	PurgeConfirmed AuditPurgeStatus = "confirmed"
	// PurgeDone: confirmed and its range dropped.
	PurgeDone AuditPurgeStatus = "done"
)

// StatusAt answers where p stands at now.
func (p *AuditPurge) StatusAt(now time.Time) AuditPurgeStatus {
	switch {
	case !p.DoneAt.IsZero():
		return PurgeDone
	case p.ConfirmedBy != "":
		return PurgeConfirmed
	case !now.Before(p.ExpiresAt):
		return PurgeExpired
	}
	return PurgeProposed
}

// AuditPurgeStore keeps purge proposals, filtered by organization.
type AuditPurgeStore interface {
	// CreateAuditPurge stores p and appends ev (the proposal's audit
	// event) in one transaction.
	CreateAuditPurge(ctx context.Context, p *AuditPurge, ev *AuditEvent) error
	// GetAuditPurge answers the organization's proposal, or an error
	// wrapping ErrNotFound.
	GetAuditPurge(ctx context.Context, org, id string) (*AuditPurge, error)
	// ConfirmAuditPurge records by as the proposal's confirmer at at, only
	// if it is unconfirmed, unexpired at at, and by is not its proposer,
	// and appends ev (the confirmation's audit event) in the same
	// transaction; it answers whether it did: of two confirmations, one
	// wins, and only its event is stored.
	ConfirmAuditPurge(ctx context.Context, org, id, by string, at time.Time, ev *AuditEvent) (bool, error)
	// CompleteAuditPurge records the confirmed proposal's drop done at at,
	// only if it is confirmed and not done yet, and appends ev (the
	// purge's completion event) in the same transaction; it answers
	// whether it did: a purge is completed once, with one event.
	CompleteAuditPurge(ctx context.Context, org, id string, at time.Time, ev *AuditEvent) (bool, error)
	// UnfinishedAuditPurges answers the proposals of every organization
	// that were confirmed before confirmedBefore and are not done, in ID
	// order after the ID after (a cursor), at most limit: what the purge
	// job finishes. It crosses organizations on purpose and is never
	// reachable from a request.
	UnfinishedAuditPurges(ctx context.Context, confirmedBefore time.Time, after string, limit int) ([]AuditPurge, error)
	// ListAuditPurges answers the organization's proposals, newest first,
	// at most limit.
	ListAuditPurges(ctx context.Context, org string, limit int) ([]AuditPurge, error)
}

// AuditSink is a sink the trail is exported to, as registered in the
// store.
type AuditSink struct {
	Name         string    `json:"name"`
	RegisteredAt time.Time `json:"registered_at"`
}
