// Package connection is the connections service and the credential broker.
//
// A connection is how an organization's tools reach one downstream system:
// its settings, its sealed secret, where its calls may go and which calls
// may use it. The service creates, lists, shows (never the secret) and
// revokes connections, each operation authorized from the credential it is
// given, and runs the OAuth authorization a person completes to connect
// their own account.
//
// The broker (Service.Release) is the one place a secret leaves its seal:
// for one call the policy allowed, it picks the connection of the tool's
// provider (the person's own for a call made for a person, or one the
// model chose by connection_id among those it may use), checks the
// connection's scope again (tool, agent, amounts, hosts), and answers the
// secret in clear for that call only, minting or refreshing an OAuth access
// token when it is due, once across nodes.
//
// # What the broker keeps in memory
//
// A call does not read the store when the broker may trust what it read
// before: while Service.Watch follows the store's changes
// (toolplane.ConnectionFeed), the broker keeps its reads of each
// organization's connections, and every change told forgets that
// organization's. A read that a change overtook is not kept. Each
// connection version's secret, opened, and egress rules, compiled, are
// kept too, bounded, and dropped when the connection changes, so a revoked
// connection's secret does not stay in memory. A refusal is never made
// from memory: a call memory would refuse (a connection created or
// consented to on another node an instant ago) reads the store again.
//
// Revocation takes effect on the next call on every node. "Next" means a
// call whose release starts after Revoke answered: Revoke answers only
// once the store's ConnectionSettle has passed since the revocation
// committed, and by then every node has been told of it or has stopped
// trusting its memory. On the embedded SQLite store (one node) the broker
// is told before the write returns, and the settle time is zero. On
// PostgreSQL a trigger announces each change in its own transaction, and
// each node's listener trusts its memory only up to a second after the
// last sync point it heard come back through the same channel (see
// postgres.Store.WatchConnections); a node whose listener is not
// connected reads the store on every call. A call whose release started
// before the revocation answered may still use the connection, as a call
// that had read the row just before the revocation committed always
// could: a credential already released is not recalled.
//
// # Secrets kept in Vault
//
// A static or client credentials connection may keep its secret material
// in Vault (or OpenBao) instead of sealed here: its config names a KV
// version 2 entry (ConnectionConfig.Vault) and it is created with no
// secrets. The broker reads that entry when a call needs it and keeps
// what it read for Config.VaultTTL (30 seconds by default), so a secret
// rotated in Vault takes effect within that time, on every node, with
// nothing to do here. Revocation is not delayed by it: the connection is
// forgotten on its change, and only the Vault read is kept. An entry that is gone (deleted, or never written) answers
// connection_expired; Vault refusing toolplane's token, answering an
// error, or not answering at all answers unavailable, which a caller may
// try again. Neither names anything but the connection and the entry.
// A client credentials connection's access token is toolplane's: it is
// minted from Vault's client secret and sealed here, never written to
// Vault. Authorization-code connections keep their tokens here, as the
// platform is what they are issued to.
package connection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

// ErrNotAuthorized refines toolplane.ErrForbidden: the credential may not
// administer the connection.
var ErrNotAuthorized = toolplane.Refine(toolplane.ErrForbidden, "not authorized for connections")

// ErrNotYours refines toolplane.ErrForbidden: an authorization link was
// opened by someone other than the person it is for.
var ErrNotYours = toolplane.Refine(toolplane.ErrForbidden, "the authorization is for another person")

// ErrState refines toolplane.ErrInvalid: an authorization's state is
// unknown, used, expired, or was started in another browser.
var ErrState = toolplane.Refine(toolplane.ErrInvalid, "authorization state is not valid")

// InvalidError is a connection the service refuses to create: Field names
// the part of the Input at fault as its JSON spells it (name,
// config.driver, secrets.token), Why says what it must be. It is an
// error of kind toolplane.ErrInvalid, so a door answers it as any invalid
// request, at its field.
type InvalidError struct {
	Field, Why string
}

func (e *InvalidError) Error() string { return e.Field + ": " + e.Why }

// Unwrap answers toolplane.ErrInvalid, the kind of the error.
func (e *InvalidError) Unwrap() error { return toolplane.ErrInvalid }

// Store is what the service keeps connections and authorizations in.
type Store interface {
	toolplane.ConnectionStore
}

// Config wires a Service.
type Config struct {
	Store Store
	// Keys seals and opens connection secrets.
	Keys *secret.Keyring
	// Client answers the HTTP client a connection's token requests go
	// through, enforcing its egress rules; nil uses a client that does
	// not (tests only).
	Client func(rules toolplane.EgressRules) (*http.Client, error)
	// BaseURL is the public base URL of this deployment
	// (https://toolplane.example.com): authorization links and the OAuth
	// callback are built from it.
	BaseURL string
	// Node names this process in refresh leases.
	Node   string
	Now    func() time.Time
	Logger *slog.Logger
	// StateTTL is how long an authorization may take; default 10 minutes.
	StateTTL time.Duration
	// RefreshBefore is how long before its expiry an access token is
	// refreshed; default one minute.
	RefreshBefore time.Duration
	// Vault reads the secrets of the connections that keep them in Vault
	// (ConnectionConfig.Vault). Nil: this deployment has no Vault; such a
	// connection is refused at creation, and one created elsewhere
	// answers unavailable.
	Vault *secret.Vault
	// VaultTTL is how long a secret read from Vault is used before it is
	// read again, so a secret rotated in Vault is used within that long;
	// default DefaultVaultTTL.
	VaultTTL time.Duration
	// Roles inspects the database role of a SQL connection being created
	// (the sql runtime does): a role holding powers beyond its data is
	// refused unless the connection allows it. Nil: roles are not
	// inspected at creation; the runtime still inspects each before its
	// first call.
	Roles RoleInspector
}

// RoleInspector answers the powers beyond its data of the database role a
// SQL connection's connection string logs in as (none for a
// least-privilege role), connecting as a call would. An error says the
// role could not be inspected, and never holds the connection string.
type RoleInspector interface {
	Inspect(ctx context.Context, c *toolplane.Connection, dsn toolplane.SecretString) ([]string, error)
}

// Service is the connections service and the credential broker.
type Service struct {
	cfg Config
	now func() time.Time
	log *slog.Logger
	// mem keeps what calls read of the store, and each connection
	// version's secrets opened and egress rules compiled.
	mem   *memory
	hosts hosts
	oauth oauthClient
	// vaulted holds what was read from Vault, by connection id
	// (*fetched); reading is one request per connection at a time.
	vaulted sync.Map
	reading singleflight.Group
}

// New returns a Service.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, errors.New("connection: a store and a keyring are required")
	}
	if cfg.StateTTL <= 0 {
		cfg.StateTTL = 10 * time.Minute
	}
	if cfg.RefreshBefore <= 0 {
		cfg.RefreshBefore = time.Minute
	}
	if cfg.VaultTTL <= 0 {
		cfg.VaultTTL = DefaultVaultTTL
	}
	if cfg.Client == nil {
		cfg.Client = func(toolplane.EgressRules) (*http.Client, error) { return &http.Client{Timeout: 30 * time.Second}, nil }
	}
	s := &Service{cfg: cfg, now: cfg.Now, log: cfg.Logger, mem: newMemory()}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.oauth = oauthClient{client: cfg.Client}
	return s, nil
}

// Input is a new connection as an administrator describes it.
type Input struct {
	Name     string                     `json:"name"`
	Provider string                     `json:"provider"`
	Kind     toolplane.ConnectionKind   `json:"kind"`
	Config   toolplane.ConnectionConfig `json:"config"`
	Scope    toolplane.ConnectionScope  `json:"scope"`
	// Secrets are the secret material: a static connection's token, user
	// name and password or DSN; an OAuth client's secret. None for a
	// connection keeping its secret in Vault (Config.Vault).
	Secrets toolplane.Secrets `json:"-"`
}

// names is the grammar of providers and connection names: what a tool
// declares and an administrator types.
var names = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// Create stores a new connection of the credential's organization. Only a
// platform administrator creates one: a connection holds the
// organization's secret for a whole system.
func (s *Service) Create(ctx context.Context, by *toolplane.Credential, in Input) (*toolplane.Connection, error) {
	if !by.HasAnyRole(toolplane.RolePlatformAdmin) {
		return nil, toolplane.Refuse(by, ErrNotAuthorized, "creating a connection needs the platform_admin role")
	}
	if err := check(in); err != nil {
		return nil, err
	}
	if in.Config.Vault != nil && s.cfg.Vault == nil {
		return nil, &InvalidError{Field: "config.vault", Why: "this deployment has no Vault: keep the secret here (secrets), or have the operator configure Vault (--vault-addr)"}
	}
	now := s.now()
	c := &toolplane.Connection{
		ID: toolplane.NewID("con_"), OrganizationID: by.OrganizationID, Name: in.Name, Provider: in.Provider,
		Kind: in.Kind, State: toolplane.ConnectionActive, Config: in.Config, Scope: in.Scope,
		Owner: by.Subject, CreatedAt: now, UpdatedAt: now,
	}
	role, err := s.inspectRole(ctx, c, in.Secrets.DSN)
	if err != nil {
		return nil, err
	}
	if in.Config.Vault != nil {
		// Nothing secret is kept here: Vault holds it.
		v := *in.Config.Vault
		c.Config.Vault, c.Secret = &v, []byte{}
	} else {
		sealed, err := secret.SealSecrets(s.cfg.Keys, c.OrganizationID, c.ID, in.Secrets)
		if err != nil {
			return nil, fmt.Errorf("seal connection secret: %w", err)
		}
		c.Secret = sealed
	}
	if err := s.insert(ctx, c, s.changeWith(c, "connection.create", by.Subject, "", role)); err != nil {
		if errors.Is(err, toolplane.ErrExists) {
			return nil, fmt.Errorf("%w: a connection named %q exists; revoke it or choose another name", toolplane.ErrExists, in.Name)
		}
		return nil, fmt.Errorf("store connection: %w", err)
	}
	return shown(c), nil
}

// Warnings answers what an administrator should be told of connection c
// without its being refused: egress rules that allow no host, under
// which every call through c that reaches the network (an HTTP request, a
// PostgreSQL or MySQL connection, a token request) is refused. A SQLite
// connection opens a file and needs no host. A connection may be created
// this way on purpose, to be given its hosts later, so this is a warning,
// not a refusal.
func Warnings(c *toolplane.Connection) []string {
	if c == nil || len(c.Config.Egress.Hosts) > 0 || c.Config.Driver == "sqlite" {
		return nil
	}
	return []string{"config.egress.hosts is empty: every call through this connection will be refused by egress " +
		"until it names the hosts its calls may reach (--host on the command line)"}
}

// inspectRole inspects the database role of a SQL connection being
// created, and answers what the change log records of it: whether it was
// inspected, the operator's acceptance of a privileged role, and the
// powers accepted. A role holding powers beyond its data is refused,
// naming them, unless the connection allows it. A role that cannot be
// inspected now (the database is not reachable yet, or the secret is in
// Vault) does not stop the creation: the runtime inspects it before the
// connection's first call and refuses the call then.
func (s *Service) inspectRole(ctx context.Context, c *toolplane.Connection, dsn toolplane.SecretString) (map[string]any, error) {
	if c.Config.Driver == "" || s.cfg.Roles == nil {
		return nil, nil
	}
	rec := map[string]any{"role_checked": false}
	if c.Config.AllowPrivilegedRole {
		rec["allow_privileged_role"] = true
	}
	if c.Config.Vault != nil {
		return rec, nil
	}
	powers, err := s.cfg.Roles.Inspect(ctx, c, dsn)
	if err != nil {
		s.log.Warn("a SQL connection's database role could not be inspected at its creation; it is inspected before its first call",
			"connection", c.ID, "organization", c.OrganizationID, "err", err)
		return rec, nil
	}
	rec["role_checked"] = true
	if len(powers) == 0 {
		return rec, nil
	}
	if !c.Config.AllowPrivilegedRole {
		return nil, &InvalidError{Field: "secrets.dsn", Why: "the database role this connection logs in as holds powers beyond its data (" +
			strings.Join(powers, "; ") + "), through which a tool could reach the database server's files or programs: " +
			"connect with a least-privilege role (docs/connections.md), or, to accept this role, set config.allow_privileged_role " +
			"(--allow-privileged-role), which is recorded on the connection"}
	}
	rec["privileged_powers"] = powers
	s.log.Warn("a SQL connection was created with a privileged database role, as its creator allowed (allow_privileged_role)",
		"connection", c.ID, "organization", c.OrganizationID, "powers", powers)
	return rec, nil
}

// checkBaseURL refuses a base URL an HTTP tool's path could not be sent
// under: it is an absolute http(s) URL with a host, and nothing a path
// would be appended after or that would carry a secret (a user, a query,
// a fragment).
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Opaque != "":
		return fmt.Errorf("%q is not an absolute http or https URL (http://127.0.0.1:9090, https://api.example.com/v2)", raw)
	case u.User != nil:
		return fmt.Errorf("%q carries user information; the connection's secret is its credential", raw)
	case u.RawQuery != "" || u.ForceQuery || strings.Contains(raw, "#"):
		return fmt.Errorf("%q has a query or a fragment; a tool's path and query are added to it", raw)
	}
	return nil
}

// check refuses a connection that could not work, before anything is
// stored.
func check(in Input) error {
	bad := func(field, format string, a ...any) error {
		return &InvalidError{Field: field, Why: fmt.Sprintf(format, a...)}
	}
	if !names.MatchString(in.Name) {
		return bad("name", "%q: use lower-case letters, digits, '.', '_' and '-', at most 63", in.Name)
	}
	if !names.MatchString(in.Provider) {
		return bad("provider", "%q: use lower-case letters, digits, '.', '_' and '-', at most 63", in.Provider)
	}
	cfg, sec := in.Config, in.Secrets
	if err := checkEgress(cfg.Egress); err != nil {
		return err
	}
	// A connection keeping its secret in Vault is given none here: Vault
	// is where it is read, so one given here would be kept nowhere.
	vault := cfg.Vault != nil
	if vault {
		if err := checkVaultRef(*cfg.Vault); err != nil {
			return err
		}
		if in.Kind == toolplane.ConnectionAuthorizationCode {
			return bad("config.vault", "an authorization-code connection's tokens are issued to toolplane and kept here; keep a static or client credentials connection's secret in Vault")
		}
		if sec != (toolplane.Secrets{}) {
			return bad("secrets", "a connection keeping its secret in Vault (config.vault) takes no secrets here: write them to %s", cfg.Vault)
		}
	}
	if cfg.BaseURL != "" {
		if cfg.Driver != "" {
			return bad("config.base_url", "a SQL connection reaches its database by its connection string; base_url is an HTTP connection's")
		}
		if err := checkBaseURL(cfg.BaseURL); err != nil {
			return bad("config.base_url", "%v", err)
		}
	}
	if cfg.AllowPrivilegedRole && cfg.Driver == "" {
		return bad("config.allow_privileged_role", "only a SQL connection (config.driver) logs in as a database role")
	}
	switch in.Kind {
	case toolplane.ConnectionStatic:
		if cfg.Driver != "" {
			if !slices.Contains([]string{"postgres", "sqlite", "mysql"}, cfg.Driver) {
				return bad("config.driver", "%q: use postgres, sqlite or mysql", cfg.Driver)
			}
			if sec.DSN == "" && !vault {
				return bad("secrets.dsn", "a SQL connection needs its connection string")
			}
			return nil
		}
		switch cfg.Auth {
		case "", toolplane.AuthBearer:
			if sec.Token == "" && !vault {
				return bad("secrets.token", "a bearer connection needs its token")
			}
		case toolplane.AuthHeader:
			if !validHeader(cfg.Header) {
				return bad("config.header", "%q is not a header name", cfg.Header)
			}
			if sec.Token == "" && !vault {
				return bad("secrets.token", "a header connection needs its key")
			}
		case toolplane.AuthBasic:
			if sec.Username == "" && !vault {
				return bad("secrets.username", "a basic connection needs a user name")
			}
		default:
			return bad("config.auth", "%q: use bearer, basic or header", cfg.Auth)
		}
	case toolplane.ConnectionClientCredentials, toolplane.ConnectionAuthorizationCode:
		if cfg.ClientID == "" {
			return bad("config.client_id", "an OAuth connection needs its client id")
		}
		if cfg.Issuer == "" && (cfg.TokenURL == "" || in.Kind == toolplane.ConnectionAuthorizationCode && cfg.AuthorizeURL == "") {
			return bad("config", "name the provider's issuer (its endpoints are discovered) or its authorize_url and token_url")
		}
		if cfg.Driver != "" {
			return bad("config.driver", "an OAuth connection is not a database's")
		}
	default:
		return bad("kind", "%q: use static, oauth2_client_credentials or oauth2_authorization_code", in.Kind)
	}
	return nil
}
