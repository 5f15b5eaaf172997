package toolplane

import (
	"context"
	"time"
)

// ErrReused: a single-use OAuth secret (an authorization code, a refresh
// token) was presented a second time. The store answers the row with it,
// so the caller can revoke what the first use issued.
var ErrReused = Refine(ErrConflict, "already used")

// ErrOAuthClientsFull: the server holds as many OAuth clients as its
// operator allows (serve --oauth-max-clients); a new one is not stored
// until an admin's prune or the sweep of unused ones makes room.
var ErrOAuthClientsFull = Refine(ErrConflict, "the server holds as many OAuth clients as its operator allows")

// OAuthClient is a client of the server's own OAuth authorization server:
// one a client registered itself (RFC 7591), or one whose client_id is the
// https URL of its metadata document (read when it first asks). Clients
// are server-wide, as their registration is anonymous: what an
// organization decides about one (its agent identity, a revocation) is an
// OAuthClientSetting of that organization.
type OAuthClient struct {
	// ID is the client_id: "tpc_…" for a registered client, the document's
	// URL otherwise.
	ID string
	// Name is the client_name it gave, shown on the consent page.
	Name string
	// RedirectURIs are the only places codes are sent, compared exactly.
	RedirectURIs []string
	// Source is OAuthClientRegistered or OAuthClientDocument.
	Source    string
	CreatedAt time.Time
}

// The sources of an OAuthClient.
const (
	OAuthClientRegistered = "registered"
	OAuthClientDocument   = "metadata_document"
)

// OAuthClientSetting is what one organization decided about a client: the
// agent identity its tokens act as (empty: the deployment's default), and
// its revocation, after which nobody of the organization may connect it
// and every consent given to it is revoked.
type OAuthClientSetting struct {
	OrganizationID string
	ClientID       string
	AgentID        string
	RevokedAt      time.Time
	// UpdatedBy is the person who made the last change.
	UpdatedBy string
	UpdatedAt time.Time
}

// OAuthGrant is one consent: a person let a client act for them, as the
// agent identity AgentID, on the tools Tools names (none: every tool the
// agent may call for them), for the resource Resource, until ExpiresAt.
// It is also the family of every token issued under it: a replayed code
// or refresh token revokes the grant, and with it all of them.
type OAuthGrant struct {
	OrganizationID string
	ID             string
	ClientID       string
	// Subject is the person.
	Subject string
	// Roles are the person's roles at consent, which travel with each
	// call as the person's (Credential.User).
	Roles []string
	// PersonKey is the person's own API key they signed in with to
	// consent (empty when they signed in through the OpenID provider):
	// every token of the grant is then checked against the key as it is
	// now, so a revoked key, or roles taken from it, end what the grant
	// lets its client do at the next call.
	PersonKey string
	// SignedInAt is when the person signed in to the browser session
	// they consented in. For a consent through the OpenID provider
	// (PersonKey empty) it dates the roles Roles holds: the server stops
	// refreshing the grant's tokens once it is older than its bound, so
	// the person signs in again and the provider's roles are read anew.
	SignedInAt time.Time
	AgentID    string
	Tools      []string
	// Resource is the URL tokens are bound to (RFC 8707): the server's
	// /mcp, or a governed copy's /mcp/<upstream>.
	Resource  string
	CreatedAt time.Time
	ExpiresAt time.Time
	// RevokedAt is zero while the grant stands; RevokedReason says who or
	// what ended it (OAuthRevoked...).
	RevokedAt     time.Time
	RevokedReason string
}

// Why an OAuthGrant was revoked.
const (
	OAuthRevokedByPerson   = "person"
	OAuthRevokedByAdmin    = "admin"
	OAuthRevokedByClient   = "client"
	OAuthRevokedCodeReplay = "code_replayed"
	OAuthRevokedTokenReuse = "refresh_token_reused"
	OAuthRevokedClientOff  = "client_revoked"
)

// Live reports whether the grant stands at now.
func (g *OAuthGrant) Live(now time.Time) bool {
	return g.RevokedAt.IsZero() && now.Before(g.ExpiresAt)
}

// OAuthCode is an authorization code, by the hash of its value: single
// use, short lived, bound to its client, redirect URI and PKCE challenge.
type OAuthCode struct {
	Hash           string
	OrganizationID string
	GrantID        string
	ClientID       string
	// RedirectURI is the redirect_uri the authorization request sent
	// (empty when it sent none, its client having one): the token
	// request must send the same.
	RedirectURI string
	// Challenge is the S256 PKCE challenge.
	Challenge string
	ExpiresAt time.Time
	UsedAt    time.Time
}

// OAuthRefreshToken is a refresh token, by the hash of its value. Each use
// rotates it: the next one is stored and this one marked used, and a used
// one presented again revokes its grant.
type OAuthRefreshToken struct {
	Hash           string
	OrganizationID string
	GrantID        string
	CreatedAt      time.Time
	ExpiresAt      time.Time
	UsedAt         time.Time
}

// OAuthSigningKey is a key access tokens are signed with: its private
// half sealed under the key-encryption key, its public half as a JWK. The
// newest unretired key signs; every unretired key is published.
type OAuthSigningKey struct {
	ID        string
	Sealed    []byte
	Public    []byte
	CreatedAt time.Time
	RetiredAt time.Time
}

// OAuthStore keeps the authorization server's state. Grants, settings,
// codes and refresh tokens carry their organization; codes and refresh
// tokens are found by hash alone (presented before the organization is
// known), and their hashes are unique across organizations.
type OAuthStore interface {
	// InsertOAuthClient stores c, or answers an error wrapping ErrExists.
	// With max above zero it stores c only while fewer than max clients
	// are stored, answering an error wrapping ErrOAuthClientsFull
	// otherwise; the count and the insert are one transaction, so nodes
	// registering at once do not pass the cap together.
	InsertOAuthClient(ctx context.Context, c *OAuthClient, max int) error
	// GetOAuthClient answers the client, or an error wrapping ErrNotFound.
	GetOAuthClient(ctx context.Context, id string) (*OAuthClient, error)
	// OAuthClients answers up to limit clients, newest first.
	OAuthClients(ctx context.Context, limit int) ([]OAuthClient, error)
	// PutOAuthClientSetting stores s, replacing the organization's
	// setting of the client (except a stored revocation, which stays: a
	// change made from a copy read before the client was revoked never
	// lifts it), and e (when not nil: the change's audit
	// event) with it in one transaction, e chained to its organization's
	// trail: an event that cannot be stored (an error wrapping ErrExists)
	// leaves the setting as it was.
	PutOAuthClientSetting(ctx context.Context, s *OAuthClientSetting, e *AuditEvent) error
	// GetOAuthClientSetting answers the organization's setting of the
	// client, or an error wrapping ErrNotFound.
	GetOAuthClientSetting(ctx context.Context, org, clientID string) (*OAuthClientSetting, error)
	// OAuthClientSettings answers the organization's settings.
	OAuthClientSettings(ctx context.Context, org string) ([]OAuthClientSetting, error)
	// DeleteUnusedOAuthClients removes registered clients (never a
	// metadata document's) created before before that no grant and no
	// organization's setting names, at most limit, and answers how many:
	// a registration nobody ever consented to.
	DeleteUnusedOAuthClients(ctx context.Context, before time.Time, limit int) (int, error)

	// InsertOAuthGrant stores g, or answers an error wrapping ErrExists.
	InsertOAuthGrant(ctx context.Context, g *OAuthGrant) error
	// InsertOAuthGrantWithCode stores g and its first authorization code
	// c in one transaction: both or neither, so no consent is left
	// without the code that would have used it. An error wrapping
	// ErrExists (of either, or of e) stores nothing. e, when not nil, is
	// the consent's audit event, stored in the same transaction.
	InsertOAuthGrantWithCode(ctx context.Context, g *OAuthGrant, c *OAuthCode, e *AuditEvent) error
	// GetOAuthGrant answers the organization's grant, or an error
	// wrapping ErrNotFound.
	GetOAuthGrant(ctx context.Context, org, id string) (*OAuthGrant, error)
	// OAuthGrants answers the organization's grants of subject (every
	// person's when empty), revoked ones too, newest first, at most 1000.
	OAuthGrants(ctx context.Context, org, subject string) ([]OAuthGrant, error)
	// RevokeOAuthGrant revokes the grant for reason at at, and reports
	// whether it did (false: no such grant, or revoked already). e, when
	// not nil, is the revocation's audit event: stored in the same
	// transaction when the grant is revoked, not at all when it is not;
	// an event that cannot be stored leaves the grant standing.
	RevokeOAuthGrant(ctx context.Context, org, id, reason string, at time.Time, e *AuditEvent) (bool, error)
	// RevokeOAuthClient stores s, the organization's setting of a client
	// it revokes (RevokedAt set), revokes every standing grant of the
	// organization to the client for reason at s.UpdatedAt, and stores e
	// (when not nil), in one transaction; it answers how many grants it
	// revoked. e's Reason is set to that count ("2 consents revoked"),
	// known only inside the transaction. An event that cannot be stored
	// leaves the setting and every grant as they were.
	RevokeOAuthClient(ctx context.Context, s *OAuthClientSetting, reason string, e *AuditEvent) (int, error)

	// InsertOAuthCode stores c, or answers an error wrapping ErrExists.
	InsertOAuthCode(ctx context.Context, c *OAuthCode) error
	// TakeOAuthCode marks the code used at now and answers it. A code used
	// already answers the code with an error wrapping ErrReused; an
	// unknown one an error wrapping ErrNotFound. Expiry is the caller's.
	TakeOAuthCode(ctx context.Context, hash string, now time.Time) (*OAuthCode, error)

	// InsertOAuthRefreshToken stores r, or answers an error wrapping
	// ErrExists.
	InsertOAuthRefreshToken(ctx context.Context, r *OAuthRefreshToken) error
	// RotateOAuthRefreshToken marks the token hash names used at now and
	// stores next, in one transaction, answering the used token. A token
	// used already answers it with an error wrapping ErrReused, storing
	// nothing; an unknown one an error wrapping ErrNotFound.
	RotateOAuthRefreshToken(ctx context.Context, hash string, next *OAuthRefreshToken, now time.Time) (*OAuthRefreshToken, error)
	// GetOAuthRefreshToken answers the token, or an error wrapping
	// ErrNotFound.
	GetOAuthRefreshToken(ctx context.Context, hash string) (*OAuthRefreshToken, error)

	// InsertOAuthSigningKey stores k, or answers an error wrapping
	// ErrExists.
	InsertOAuthSigningKey(ctx context.Context, k *OAuthSigningKey) error
	// OAuthSigningKeys answers every key not retired, newest first.
	OAuthSigningKeys(ctx context.Context) ([]OAuthSigningKey, error)
	// RetireOAuthSigningKey retires the key at at and reports whether it
	// did.
	RetireOAuthSigningKey(ctx context.Context, id string, at time.Time) (bool, error)
	// DeleteOAuthExpired removes codes and refresh tokens that expired
	// before before, at most limit, and answers how many.
	DeleteOAuthExpired(ctx context.Context, before time.Time, limit int) (int, error)
}
