package toolplane

import (
	"context"
	"time"
)

// WebhookSecret is an organization's callback signing secret: the secret
// toolplane signs the requests it sends to the organization's receivers
// with (async call results sent to a callback URL). After a rotation the
// previous secret signs beside the current one until PreviousUntil, so a
// receiver can change its copy without refusing a request in between.
// Both are sealed (package secret); neither is ever rendered.
type WebhookSecret struct {
	OrganizationID string `json:"organization_id"`
	// CurrentID names the current secret; it is part of what the secret
	// is sealed for, so sealed bytes stay bound to it when it becomes
	// the previous one.
	CurrentID string `json:"current_id"`
	Current   []byte `json:"-"`
	// CreatedAt is when the current secret was made.
	CreatedAt time.Time `json:"created_at"`
	// PreviousID and Previous are the secret the current one replaced,
	// kept until PreviousUntil; all three empty when there is none.
	PreviousID    string    `json:"previous_id,omitempty"`
	Previous      []byte    `json:"-"`
	PreviousUntil time.Time `json:"previous_until,omitzero"`
	// RotatedBy is the subject of the credential that made the current
	// secret; "" when it was made on first use.
	RotatedBy string `json:"rotated_by,omitempty"`
	Version   int64  `json:"version"`
}

// WebhookSecretStore is the storage of organizations' callback signing
// secrets, one row per organization. Every method but the walk is scoped
// to one organization.
type WebhookSecretStore interface {
	// InsertWebhookSecret stores s, or answers an error wrapping
	// ErrExists when the organization has a secret already.
	InsertWebhookSecret(ctx context.Context, s *WebhookSecret) error
	// GetWebhookSecret answers the organization's secret, or an error
	// wrapping ErrNotFound.
	GetWebhookSecret(ctx context.Context, org string) (*WebhookSecret, error)
	// UpdateWebhookSecret writes every field of s but the organization
	// where the stored Version is s.Version, stores Version+1 and sets
	// s.Version to it; a stale Version (or no row) answers false with a
	// nil error and changes nothing.
	UpdateWebhookSecret(ctx context.Context, s *WebhookSecret) (bool, error)
	// WebhookSecretsAfter answers the secrets of the organizations after
	// afterOrg, ordered by organization, at most limit (1..1000): the
	// operator's walk when the key-encryption key changes.
	WebhookSecretsAfter(ctx context.Context, afterOrg string, limit int) ([]WebhookSecret, error)
}
