package toolplane

import (
	"context"
	"time"
)

// The ways a person signs in to a browser session.
const (
	// SignInOIDC: the configured OpenID provider vouched for the person
	// (authorization code with PKCE, a verified ID token).
	SignInOIDC = "oidc"
	// SignInAPIKey: the person pasted their own API key once.
	SignInAPIKey = "api_key"
)

// BrowserSession is a person signed in through a browser: what the
// session cookie stands for. The cookie holds a random token; the row
// keeps only the token's SHA-256 hash, so a leaked table opens no
// session.
type BrowserSession struct {
	// ID names the session (for sign-out and listings); it is not the
	// token and opens nothing. The identity is the organization and the
	// ID.
	ID             string
	OrganizationID string
	// TokenHash is the SHA-256 hash of the cookie's token (hex): the
	// lookup key, unique across the deployment, since a cookie is
	// presented before its organization is known.
	TokenHash string
	// Subject is the person signed in; Method how (SignInOIDC or
	// SignInAPIKey).
	Subject string
	Method  string
	// CredentialID is the credential the session was made with: the API
	// key's ID (every use checks the key is still in force, so revoking
	// the key ends the session), or "oidc:<issuer>:<subject>".
	CredentialID string
	// Roles are the person's roles as the provider's ID token named them
	// (groups included, as group roles); a key's session reads its
	// roles from the key at every use instead, and keeps none here.
	Roles     []string
	CreatedAt time.Time
	// IdleUntil is when the session ends unless used; each use moves it
	// on, never past ExpiresAt, the absolute end.
	IdleUntil time.Time
	ExpiresAt time.Time
}

// BrowserSessionStore is the storage of people's browser sessions.
//
// Like a Credential, a session is found by what the browser presents
// (the hash of its token) before the organization is known, so
// FindBrowserSession takes no organization; the hash is of 256 random
// bits and unique across the deployment. Every other method is scoped to
// one organization, but for DeleteExpiredBrowserSessions, the operator's
// sweep.
type BrowserSessionStore interface {
	// InsertBrowserSession stores s, or answers an error wrapping
	// ErrExists when its organization holds a session with its ID, or any
	// organization one with its TokenHash.
	InsertBrowserSession(ctx context.Context, s *BrowserSession) error
	// FindBrowserSession answers the session whose TokenHash is hash,
	// ended or not (the caller judges the times by its clock), or
	// ErrNotFound.
	FindBrowserSession(ctx context.Context, hash string) (*BrowserSession, error)
	// TouchBrowserSession moves the session's IdleUntil to until, unless
	// the stored one is later, and never past its ExpiresAt. A session
	// not in org answers ErrNotFound.
	TouchBrowserSession(ctx context.Context, org, id string, until time.Time) error
	// DeleteBrowserSession removes the session and reports whether it was
	// there: a sign-out.
	DeleteBrowserSession(ctx context.Context, org, id string) (bool, error)
	// DeleteBrowserSessionsOf removes every session of the person subject
	// in org and answers how many: signing the person out everywhere.
	DeleteBrowserSessionsOf(ctx context.Context, org, subject string) (int, error)
	// DeleteExpiredBrowserSessions removes up to limit sessions, of any
	// organization, whose IdleUntil is before now (IdleUntil never passes
	// ExpiresAt, so every ended session is among them), and answers how
	// many. A limit below 1 is ErrInvalid.
	DeleteExpiredBrowserSessions(ctx context.Context, now time.Time, limit int) (int, error)
}
