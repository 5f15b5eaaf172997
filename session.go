package toolplane

import (
	"context"
	"time"
)

// Session is an MCP session as every node sees it: what a node that never
// saw the session (or restarted since) needs to continue it for the client
// that holds its id. Nothing in it is the session's traffic; the calls it
// made are in the journal, under its run.
type Session struct {
	// ID is the Mcp-Session-Id the client presents: random, unique across
	// the deployment. The identity is the organization and the ID.
	ID             string
	OrganizationID string
	// CredentialID is the credential (API key id, or a token's issuer and
	// subject) that opened the session; a request presenting the id with
	// any other credential is refused.
	CredentialID string
	// Door is the endpoint the session was opened on: "" for the platform's
	// own (/mcp), an upstream's slug for its governed copy.
	Door string
	// ProtocolVersion is the version the session negotiated.
	ProtocolVersion string
	// Client is the client's initialize parameters (JSON) as negotiated: its
	// capabilities and name, what a node continuing the session tells the
	// protocol library the client said. Empty when too large to keep.
	Client []byte
	// RunID is the run the session's calls belong to.
	RunID string
	// Contracts are the contracts the client was shown (tool platform name
	// to schema hash), frozen at each tools/list: a call on a tool whose
	// contract changed since answers tool_changed, on any node.
	Contracts map[string]string
	CreatedAt time.Time
	// ExpiresAt is when the session ends unless used: each use moves it on
	// by the idle timeout (TouchSession), at most every few seconds.
	ExpiresAt time.Time
}

// SessionStore is the storage of MCP sessions. Every method but
// DeleteExpiredSessions is scoped to one organization: one organization
// never reads, touches or deletes another's session.
type SessionStore interface {
	// InsertSession stores s, or answers an error wrapping ErrExists when a
	// session with its ID exists in its organization.
	InsertSession(ctx context.Context, s *Session) error
	// GetSession answers the session, expired or not (the caller judges
	// ExpiresAt by its clock), or ErrNotFound.
	GetSession(ctx context.Context, org, id string) (*Session, error)
	// TouchSession moves the session's ExpiresAt to until, unless the
	// stored one is later, so it never moves back. A session not in org
	// answers ErrNotFound: the touch is also how a node learns a session
	// it holds was ended elsewhere.
	TouchSession(ctx context.Context, org, id string, until time.Time) error
	// SetSessionContracts replaces the session's frozen contracts; a
	// session not in org answers ErrNotFound.
	SetSessionContracts(ctx context.Context, org, id string, contracts map[string]string) error
	// DeleteSession removes the session and reports whether it was there.
	DeleteSession(ctx context.Context, org, id string) (bool, error)
	// DeleteExpiredSessions removes up to limit sessions, of any
	// organization, whose ExpiresAt is before now, and answers how many:
	// the operator's sweep, never an organization's.
	DeleteExpiredSessions(ctx context.Context, now time.Time, limit int) (int, error)
}
