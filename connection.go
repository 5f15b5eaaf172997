package toolplane

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"
)

// ConnectionKind says how a connection authenticates to the system behind
// it.
type ConnectionKind string

// The connection kinds.
const (
	// ConnectionStatic holds a long-lived secret: an API key, a bearer
	// token, a user name and password, or a database's connection string.
	ConnectionStatic ConnectionKind = "static"
	// ConnectionClientCredentials mints short-lived access tokens from a
	// client id and secret (OAuth 2.0 client credentials grant).
	ConnectionClientCredentials ConnectionKind = "oauth2_client_credentials"
	// ConnectionAuthorizationCode holds one person's consent: a refresh
	// token obtained through the authorization code grant with PKCE, from
	// which access tokens are minted for that person's calls only.
	ConnectionAuthorizationCode ConnectionKind = "oauth2_authorization_code"
)

// ConnectionState is a connection's durable state. Connecting, refreshing
// and health checks are operational moments, never stored states.
type ConnectionState string

// The durable connection states.
const (
	// ConnectionActive: calls may use the connection.
	ConnectionActive ConnectionState = "active"
	// ConnectionNeedsReauth: the provider refused the connection's grant
	// (expired or revoked at the provider, scopes grown); its owner must
	// connect again. Calls answer connection_expired.
	ConnectionNeedsReauth ConnectionState = "needs_reauth"
	// ConnectionRevoked: an administrator revoked it here. It is final;
	// calls answer connection_revoked.
	ConnectionRevoked ConnectionState = "revoked"
)

// Auth schemes of a static connection talking HTTP: how the secret is
// presented to the downstream.
const (
	AuthBearer = "bearer" // Authorization: Bearer <token>
	AuthBasic  = "basic"  // Authorization: Basic base64(user:password)
	AuthHeader = "header" // <Header>: <token>, an API key header
)

// Connection is how tools reach one downstream system for one
// organization: which system (Provider), how to authenticate (Kind,
// Config, and the sealed secret), where its calls may go (Egress) and for
// which tools and agents its secret may be released (Scope). Its secret is
// never stored in clear and never leaves the platform: a runtime receives
// it for one call the policy allowed, and an answer, log line, span,
// metric or audit field names the connection by ID only.
type Connection struct {
	// ID is the connection's identifier (con_…), the one a model may be
	// shown to pick among a person's connections.
	ID             string `json:"id"`
	OrganizationID string `json:"organization_id"`
	// Name is an administrator's label, unique among the organization's
	// connections that are not revoked.
	Name string `json:"name"`
	// Provider is what a tool declares it needs (Definition.Connection):
	// every connection of that provider can serve it.
	Provider string         `json:"provider"`
	Kind     ConnectionKind `json:"kind"`
	// UserID is the person whose account an authorization-code connection
	// holds; calls made for anyone else never use it. Empty for the
	// organization's shared connections.
	UserID string          `json:"user_id,omitempty"`
	State  ConnectionState `json:"state"`
	// Reason says why the connection needs reauthorization or was revoked.
	Reason string           `json:"reason,omitempty"`
	Config ConnectionConfig `json:"config"`
	Scope  ConnectionScope  `json:"scope"`
	// Scopes are the OAuth scopes the provider granted.
	Scopes []string `json:"scopes,omitempty"`
	// Secret is the sealed secret material (see package secret); it never
	// leaves the store in clear and is never rendered.
	Secret []byte `json:"-"`
	// TokenExpiresAt is when the access token held in Secret expires, for
	// OAuth kinds; zero when none is held.
	TokenExpiresAt time.Time `json:"token_expires_at,omitzero"`
	// RefreshOwner and RefreshUntil lease a token refresh to one node: a
	// node refreshes only after its compare-and-swap set the lease, so two
	// nodes never spend the same refresh token.
	RefreshOwner string    `json:"-"`
	RefreshUntil time.Time `json:"-"`
	// Owner is who created the connection.
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// Version increments on every update; updates are conditional on it.
	Version int64 `json:"version"`
}

// ConnectionConfig is a connection's settings that are not secret.
type ConnectionConfig struct {
	// Auth is how an HTTP runtime presents a static secret: bearer (the
	// default), basic or header.
	Auth string `json:"auth,omitempty"`
	// Header names the header of the header scheme (X-API-Key).
	Header string `json:"header,omitempty"`
	// BaseURL, on an HTTP connection, is the absolute http(s) URL a tool
	// whose binding URL is a path (/orders/{order_id}) is sent under: its
	// scheme, host and leading path. A service that moves (another port,
	// host or prefix) then changes on its connection, not in every tool.
	BaseURL string `json:"base_url,omitempty"`
	// Driver names the database of a SQL connection: postgres, sqlite or
	// mysql. The connection string itself is secret.
	Driver string `json:"driver,omitempty"`
	// AllowPrivilegedRole, on a SQL connection, is the operator's
	// explicit acceptance of a database role holding powers beyond its
	// data (a superuser, PostgreSQL's pg_read_server_files, MySQL's FILE,
	// and the like; see package runtime/sql). Without it such a role is
	// refused when the connection is created and before its first call.
	// It is recorded in the change log and shown with the connection.
	AllowPrivilegedRole bool `json:"allow_privileged_role,omitempty"`
	// OAuth endpoints and client of the OAuth kinds. Issuer, when set,
	// lets the endpoints be discovered (RFC 8414 / OpenID discovery).
	Issuer       string   `json:"issuer,omitempty"`
	AuthorizeURL string   `json:"authorize_url,omitempty"`
	TokenURL     string   `json:"token_url,omitempty"`
	RevokeURL    string   `json:"revoke_url,omitempty"`
	ClientID     string   `json:"client_id,omitempty"`
	RequestScope []string `json:"request_scopes,omitempty"`
	// Resource is the RFC 8707 resource indicator sent with token
	// requests (an upstream MCP server's canonical URL).
	Resource string `json:"resource,omitempty"`
	// Egress is where calls through this connection may go.
	Egress EgressRules `json:"egress"`
	// App, on a person's authorization-code connection, is the ID of the
	// organization's connection holding the OAuth application (client) it
	// was consented through; its client secret renews the person's token.
	App string `json:"app,omitempty"`
	// Vault, when set, is where a static or client credentials
	// connection's secret material lives instead of sealed in the store:
	// an entry of Vault's KV version 2 engine holding the keys token,
	// username, password, dsn and client_secret. The broker reads it when
	// a call needs it, so a secret rotated in Vault is used without
	// touching the connection.
	Vault *VaultRef `json:"vault,omitempty"`
}

// VaultRef names an entry of a KV version 2 secrets engine: the engine's
// mount (secret) and the entry's path under it (crm/api).
type VaultRef struct {
	Mount string `json:"mount"`
	Path  string `json:"path"`
}

// String answers the entry as Vault's CLI names it: mount/path.
func (r VaultRef) String() string { return r.Mount + "/" + r.Path }

// EgressRules say where a runtime may connect for a connection, checked
// when it dials, after name resolution, and again on every redirect.
type EgressRules struct {
	// Hosts are the host names (or *.suffix patterns) a call may reach.
	// Empty refuses every host.
	Hosts []string `json:"hosts,omitempty"`
	// AllowCIDRs lets addresses that are refused by default (loopback,
	// private, link-local, cloud metadata) be reached, range by range.
	AllowCIDRs []string `json:"allow_cidrs,omitempty"`
}

// ConnectionScope narrows which calls the broker releases the secret for:
// the scoping of (tool × agent × organization) beside the grants, checked
// again at release as a second enforcement point.
type ConnectionScope struct {
	// Tools are tool names or path.Match patterns; empty admits every tool
	// declaring the connection's provider.
	Tools []string `json:"tools,omitempty"`
	// Agents are agent identities; empty admits every agent.
	Agents []string `json:"agents,omitempty"`
	// MaxAmountCentsPerCall, when positive, refuses a call whose
	// AmountArgument (amount_cents unless named) exceeds it.
	MaxAmountCentsPerCall int64  `json:"max_amount_cents_per_call,omitempty"`
	AmountArgument        string `json:"amount_argument,omitempty"`
}

// Secrets is a connection's secret material in clear, as the broker holds
// it for the moment of a call. Every field is a SecretString, which never
// prints, logs or marshals its value.
type Secrets struct {
	// Token is a static API key or bearer token.
	Token SecretString `json:"token,omitempty"`
	// Username and Password are the basic scheme's.
	Username SecretString `json:"username,omitempty"`
	Password SecretString `json:"password,omitempty"`
	// DSN is a SQL connection's connection string.
	DSN SecretString `json:"dsn,omitempty"`
	// ClientSecret is an OAuth client's secret.
	ClientSecret SecretString `json:"client_secret,omitempty"`
	// AccessToken and RefreshToken are an OAuth grant's tokens.
	AccessToken  SecretString `json:"access_token,omitempty"`
	RefreshToken SecretString `json:"refresh_token,omitempty"`
}

// SecretString is a secret value. It shows as [secret] wherever it could
// leak: fmt, slog and JSON all see the placeholder. Reveal answers the
// value, and only code presenting it to the downstream calls it.
type SecretString string

const secretShown = "[secret]"

// Reveal answers the secret itself.
func (s SecretString) Reveal() string { return string(s) }

// String implements fmt.Stringer with the placeholder.
func (s SecretString) String() string { return secretShown }

// GoString implements fmt.GoStringer with the placeholder.
func (s SecretString) GoString() string { return secretShown }

// LogValue implements slog.LogValuer with the placeholder.
func (s SecretString) LogValue() slog.Value { return slog.StringValue(secretShown) }

// MarshalJSON writes the placeholder: a secret never reaches JSON by
// accident. Sealing marshals the revealed values itself.
func (s SecretString) MarshalJSON() ([]byte, error) { return json.Marshal(secretShown) }

// Released is what the broker hands a runtime for one call: the connection
// (its settings, never its sealed secret) and the secret material in
// clear. It lives for the call and is never stored. Its Connection may be
// shared by calls released the same connection version at once: a runtime
// reads it and never changes it.
type Released struct {
	Connection *Connection
	Secrets    Secrets
}

// ConnectionError is a call's refusal for want of a usable connection: its
// Code is one of the connection_* codes, its Message what the model reads,
// and AuthorizationURL, for connection_required and connection_expired of
// a person's connection, where that person consents.
type ConnectionError struct {
	Code             Code
	Message          string
	AuthorizationURL string
}

func (e *ConnectionError) Error() string { return string(e.Code) + ": " + e.Message }

// OAuthState is one authorization started and not yet completed: the
// state parameter the provider returns to the callback, bound to the
// person who started it and the PKCE verifier. It is single use (taking
// it deletes it) and expires.
type OAuthState struct {
	// ID is the state parameter's value: random, unguessable, and the
	// lookup key, since the callback arrives before anything else names
	// the organization.
	ID             string
	OrganizationID string
	ConnectionID   string
	// UserID is who must complete the consent.
	UserID string
	// Verifier is the PKCE code verifier, sealed like a secret.
	Verifier    []byte
	RedirectURI string
	CreatedAt   time.Time
	ExpiresAt   time.Time
}

// ConnectionFilter narrows a connection listing; empty fields match all.
type ConnectionFilter struct {
	Provider string
	UserID   string
	State    ConnectionState
}

// ConnectionStore is the storage of connections and the authorizations
// under way. Every connection method is scoped to one organization, but for
// ListAllConnections, the operator's.
//
// An OAuthState, like a Credential, is identified by its ID alone, unique
// across organizations, and TakeOAuthState takes no organization: the
// provider's redirect to the callback carries nothing but the state
// parameter, so the state must find exactly one row before anything names
// the organization, which the caller learns from the answer. An ID scoped
// to an organization would let two organizations hold the same state and
// make the callback ambiguous. The ID is random and unguessable, and a
// state is taken once.
type ConnectionStore interface {
	// InsertConnection stores c and appends ch, its record in the change
	// log, in one transaction. A duplicate ID, or a name already held by
	// a connection of the organization that is not revoked, answers an
	// error wrapping ErrExists and stores neither.
	InsertConnection(ctx context.Context, c *Connection, ch *Change) error
	// GetConnection answers the organization's connection, or ErrNotFound.
	GetConnection(ctx context.Context, org, id string) (*Connection, error)
	// ListConnections answers the organization's connections matching f,
	// oldest first, after the cursor.
	ListConnections(ctx context.Context, org string, f ConnectionFilter, after string, limit int) ([]Connection, string, error)
	// UpdateConnection writes c where the stored organization, ID and
	// Version match, sets c.Version to the new version, and reports
	// whether it wrote; ch, when not nil, is appended in the same
	// transaction. ID, OrganizationID, Provider, Kind, UserID, Owner and
	// CreatedAt never change. Revocation is final: once the stored state
	// is revoked, an update keeps it revoked and keeps its RevokedAt.
	UpdateConnection(ctx context.Context, c *Connection, ch *Change) (bool, error)
	// ListAllConnections answers every organization's connections by ID,
	// after the cursor: the operator's view, for re-wrapping secrets
	// under a new key-encryption key.
	ListAllConnections(ctx context.Context, after string, limit int) ([]Connection, string, error)
	// InsertOAuthState stores s, or answers an error wrapping ErrExists
	// when a state with its ID exists, in any organization.
	InsertOAuthState(ctx context.Context, s *OAuthState) error
	// TakeOAuthState deletes the state with that ID and answers it: the
	// first taker gets it, every later one ErrNotFound. An expired state
	// (its ExpiresAt not after now) is deleted and answers ErrNotFound
	// too.
	TakeOAuthState(ctx context.Context, id string, now time.Time) (*OAuthState, error)
	// DeleteExpiredOAuthStates removes up to limit states, of any
	// organization, that expired at or before now (authorizations nobody
	// completed), and answers how many. A limit below 1 is ErrInvalid.
	DeleteExpiredOAuthStates(ctx context.Context, now time.Time, limit int) (int, error)
}

// ConnectionFeed is a store that tells of the connections it changes, so
// that a node may keep connections in memory between calls and still
// refuse a revoked one on the next call.
type ConnectionFeed interface {
	// WatchConnections tells w of every change to a connection committed
	// while it runs (InsertConnection, UpdateConnection, or any other
	// writer of the store's connections), until ctx ends; it answers
	// ctx's error then. Once it hears changes, and before it says w is
	// current, it tells w ConnectionsLost: what w kept before may have
	// missed changes. w must not block.
	WatchConnections(ctx context.Context, w ConnectionWatcher) error
	// ConnectionSettle is how long after a change to a connection commits
	// every watcher of the store, on every node, has been told of it or no
	// longer trusts what it kept (see ConnectionWatcher.ConnectionsCurrent):
	// zero for a store that tells its watchers before a write returns.
	ConnectionSettle() time.Duration
}

// ConnectionWatcher is told of changed connections by a ConnectionFeed.
// Its methods may be called from several goroutines at once.
type ConnectionWatcher interface {
	// ConnectionChanged tells that the organization's connection id was
	// created or changed.
	ConnectionChanged(org, id string)
	// ConnectionsCurrent tells that every change committed so far has been
	// told, and that what the watcher kept may be trusted until the time
	// given (a real-time instant of this process), unless told more.
	ConnectionsCurrent(until time.Time)
	// ConnectionsLost tells that changes may have been missed (the feed
	// lost its connection to the store): nothing kept may be trusted until
	// ConnectionsCurrent says so again.
	ConnectionsLost()
}
