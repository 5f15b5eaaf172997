package toolplane

import (
	"context"
	"time"
)

// SlackLink says which toolplane person a Slack account acts as when it
// presses an approval's button: the person linked it themselves, with a
// one-time code Slack showed only to that account, authenticated by their
// own person credential. A decision made from Slack is made with that
// credential as it stands then: revoked or expired, it decides nothing;
// its roles and groups are what the approval service checks.
type SlackLink struct {
	OrganizationID string `json:"organization_id"`
	// Team and User are Slack's ids of the workspace and the account.
	Team string `json:"team"`
	User string `json:"user"`
	// CredentialID is the person credential the account acts with, and
	// Subject that credential's person, kept to show the link.
	CredentialID string `json:"credential_id"`
	Subject      string `json:"subject"`
	// Channel is the notification channel (the Slack app) the link was
	// made through: only that channel's signed presses decide with it.
	Channel   string    `json:"channel"`
	CreatedAt time.Time `json:"created_at"`
}

// SlackLinkStore keeps the links of Slack accounts to people. Every
// method is scoped to one organization: a Slack account linked in one
// organization is unknown to every other.
type SlackLinkStore interface {
	// PutSlackLink stores l, replacing the organization's link of the
	// same team and user, and appends e, its audit event, in the same
	// transaction: a Slack account is never given a person's power
	// without the trail saying so.
	PutSlackLink(ctx context.Context, l *SlackLink, e *AuditEvent) error
	// GetSlackLink answers the organization's link of that team and
	// user, or ErrNotFound.
	GetSlackLink(ctx context.Context, org, team, user string) (*SlackLink, error)
	// DeleteSlackLink removes the link and reports whether it did,
	// appending e, its audit event, in the same transaction when it did.
	DeleteSlackLink(ctx context.Context, org, team, user string, e *AuditEvent) (bool, error)
	// ListSlackLinks answers the organization's links by team and user;
	// an organization has as many as it has people.
	ListSlackLinks(ctx context.Context, org string) ([]SlackLink, error)
}
