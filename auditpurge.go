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
	// and answers whether it did: of two confirmations, one wins.
	ConfirmAuditPurge(ctx context.Context, org, id, by string, at time.Time) (bool, error)
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
