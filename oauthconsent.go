package toolplane

import "context"

// ErrOAuthClientGone: a consent was not stored because its client is no
// longer there to consent to in the organization: the organization revoked
// it, or the client's registration was removed (the sweep of unused
// clients, an admin's prune).
var ErrOAuthClientGone = Refine(ErrConflict, "the OAuth client is revoked in the organization or no longer registered")

// OAuthConsentStore stores consents so that none outruns its client's
// revocation (OAuthGrantStore.RevokeOAuthClient) or removal: a consent
// checked before them and stored after would otherwise stand for its
// whole life.
type OAuthConsentStore interface {
	// InsertOAuthConsent stores g and its first authorization code c in
	// one transaction with e (when not nil, the consent's audit event), as
	// InsertOAuthGrantWithCode does, only while g's
	// client is registered and g's organization has not revoked it;
	// otherwise it stores nothing and answers an error wrapping
	// ErrOAuthClientGone. It is serialized against RevokeOAuthClient of
	// the same organization and client, and against the sweep of unused
	// clients: a consent is either stored before them (and revoked, or
	// keeps its client, by them) or refused.
	InsertOAuthConsent(ctx context.Context, g *OAuthGrant, c *OAuthCode, e *AuditEvent) error
}
