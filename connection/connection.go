// Package connection is the connections service and the credential broker.
//
// A connection is how an organization's tools reach one downstream system:
// its settings, its sealed secret, where its calls may go and which calls
// may use it. The service has two sides over one store, keyring and
// memory (New). Its administration (Admin) creates, lists, shows (never
// the secret) and revokes connections, each operation authorized from the
// credential it is given, and runs the OAuth authorization a person
// completes to connect their own account.
//
// The broker (Broker.Release) is the one place a secret leaves its seal:
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
// before: while Broker.Watch follows the store's changes
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
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
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

// Config wires a connections service (New).
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

// Admin is the connections service as people use it, through the API,
// the console and the command line: it creates, lists, shows and revokes
// connections, and runs the OAuth authorization a person completes to
// connect their own account. Each operation is authorized from the
// credential it is given.
type Admin struct{ *core }

// Broker is the connections service as calls use it (invoke.Broker): it
// releases a call's connection with its secret, and renews a token a
// downstream refused. See the package documentation.
type Broker struct {
	*core
	hosts hosts
}

// core is what the two sides of the service share: the store, the keys,
// what a node keeps in memory of connections and of Vault, and the OAuth
// client. A change either side writes is forgotten at once by both.
type core struct {
	cfg Config
	now func() time.Time
	log *slog.Logger
	// mem keeps what calls read of the store, and each connection
	// version's secrets opened and egress rules compiled.
	mem   *memory
	oauth oauthClient
	// vaulted holds what was read from Vault, by connection id
	// (*fetched); reading is one request per connection at a time.
	vaulted sync.Map
	reading singleflight.Group
}

// New returns the two sides of one connections service: its
// administration and its broker, sharing the store, the keys and what the
// node keeps in memory.
func New(cfg Config) (*Admin, *Broker, error) {
	if cfg.Store == nil || cfg.Keys == nil {
		return nil, nil, errors.New("connection: a store and a keyring are required")
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
	s := &core{cfg: cfg, now: cfg.Now, log: cfg.Logger, mem: newMemory(), oauth: oauthClient{client: cfg.Client}}
	if s.now == nil {
		s.now = time.Now
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	return &Admin{s}, &Broker{core: s}, nil
}

// shown is c as an answer shows it: never its sealed secret, never its
// refresh lease.
func shown(c *toolplane.Connection) *toolplane.Connection {
	v := *c
	v.Secret, v.RefreshOwner, v.RefreshUntil = nil, "", time.Time{}
	return &v
}

// change is the change-log record of an operation on c. Its detail names
// the connection and never its secret.
func (s *core) change(c *toolplane.Connection, kind, actor, reason string) *toolplane.Change {
	return s.changeWith(c, kind, actor, reason, nil)
}

// changeWith is change with more entries in its detail.
func (s *core) changeWith(c *toolplane.Connection, kind, actor, reason string, more map[string]any) *toolplane.Change {
	d := map[string]any{
		"name": c.Name, "provider": c.Provider, "kind": c.Kind, "state": c.State,
		"user_id": c.UserID, "reason": reason,
	}
	maps.Copy(d, more)
	detail, _ := json.Marshal(d)
	return &toolplane.Change{
		ID: toolplane.NewID("chg_"), OrganizationID: c.OrganizationID, Kind: kind,
		Subject: c.ID, Actor: actor, Detail: detail, CreatedAt: s.now(),
	}
}

// open answers c's secrets, opening its seal once per connection version.
func (s *core) open(c *toolplane.Connection) (toolplane.Secrets, error) {
	if d, ok := s.mem.version(c); ok && d.opened != nil {
		return *d.opened, nil
	}
	sec, err := secret.OpenSecrets(s.cfg.Keys, c.OrganizationID, c.ID, c.Secret)
	if err != nil {
		return toolplane.Secrets{}, fmt.Errorf("open the secret of connection %s: %w", c.ID, err)
	}
	s.mem.keepVersion(c, func(d *derived) { d.opened = &sec })
	return sec, nil
}

// seal seals sec as c's secret.
func (s *core) seal(c *toolplane.Connection, sec toolplane.Secrets) ([]byte, error) {
	b, err := secret.SealSecrets(s.cfg.Keys, c.OrganizationID, c.ID, sec)
	if err != nil {
		return nil, fmt.Errorf("seal the secret of connection %s: %w", c.ID, err)
	}
	return b, nil
}

// current reads c again from the store, refused unless it is active.
func (s *core) current(ctx context.Context, c *toolplane.Connection) (*toolplane.Connection, error) {
	fresh, err := s.cfg.Store.GetConnection(ctx, c.OrganizationID, c.ID)
	if err != nil {
		return nil, fmt.Errorf("read connection %s: %w", c.ID, err)
	}
	if err := checkUsable(fresh); err != nil {
		return nil, err
	}
	return fresh, nil
}

// application answers the OAuth client c's tokens are requested through,
// with its secrets: the organization's application a person's connection
// was consented through (Config.App), or else c itself, with sec.
func (s *core) application(ctx context.Context, c *toolplane.Connection, sec toolplane.Secrets) (*toolplane.Connection, toolplane.Secrets, error) {
	if c.Config.App == "" {
		return c, sec, nil
	}
	app, err := s.cfg.Store.GetConnection(ctx, c.OrganizationID, c.Config.App)
	if err != nil {
		return nil, toolplane.Secrets{}, fmt.Errorf("read the application of connection %s: %w", c.ID, err)
	}
	appSec, err := s.open(app)
	if err != nil {
		return nil, toolplane.Secrets{}, err
	}
	return app, appSec, nil
}
