package connection

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/secret"
)

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

// ValidName reports whether s is a valid provider or connection name:
// lower-case letters, digits, '.', '_' and '-', at most 63, starting with
// a letter or digit. What is keyed by a provider beside its connections
// (a vendor ceiling) takes the same names.
func ValidName(s string) bool { return names.MatchString(s) }

// Create stores a new connection of the credential's organization. Only a
// platform administrator creates one: a connection holds the
// organization's secret for a whole system.
func (s *Admin) Create(ctx context.Context, by *toolplane.Credential, in Input) (*toolplane.Connection, error) {
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
func (s *Admin) inspectRole(ctx context.Context, c *toolplane.Connection, dsn toolplane.SecretString) (map[string]any, error) {
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

// mayRead reports whether by may see c: a platform administrator or an
// auditor sees every connection of the organization, a person their own.
func mayRead(by *toolplane.Credential, c *toolplane.Connection) bool {
	if by == nil || by.OrganizationID != c.OrganizationID {
		return false
	}
	return by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) ||
		by.Kind == toolplane.CredentialPerson && c.UserID != "" && c.UserID == by.Subject
}

// mayRevoke reports whether by may revoke c: a platform administrator, or
// the person whose account it holds.
func mayRevoke(by *toolplane.Credential, c *toolplane.Connection) bool {
	if by == nil || by.OrganizationID != c.OrganizationID {
		return false
	}
	return by.HasAnyRole(toolplane.RolePlatformAdmin) ||
		by.Kind == toolplane.CredentialPerson && c.UserID != "" && c.UserID == by.Subject
}

// Get answers the connection, without its secret. A connection the
// credential may not see answers ErrNotFound, as one that does not exist.
func (s *Admin) Get(ctx context.Context, by *toolplane.Credential, id string) (*toolplane.Connection, error) {
	if by == nil {
		return nil, toolplane.Refuse(by, ErrNotAuthorized, "reading a connection needs a person's key")
	}
	c, err := s.cfg.Store.GetConnection(ctx, by.OrganizationID, id)
	if err != nil {
		return nil, err
	}
	if !mayRead(by, c) {
		return nil, fmt.Errorf("connection %s: %w", id, toolplane.ErrNotFound)
	}
	return shown(c), nil
}

// MayList answers nil when by may list connections (List): any person
// may, and sees every connection of the organization as a platform
// administrator or an auditor, their own otherwise. A navigation asks it
// before it offers the connections' page.
func MayList(by *toolplane.Credential) error {
	if by == nil || by.Kind != toolplane.CredentialPerson {
		return toolplane.Refuse(by, ErrNotAuthorized, "listing connections needs a person's key")
	}
	return nil
}

// List answers the connections the credential may see: every one of the
// organization for an administrator or an auditor, a person's own
// otherwise.
func (s *Admin) List(ctx context.Context, by *toolplane.Credential, f toolplane.ConnectionFilter, after string, limit int) ([]toolplane.Connection, string, error) {
	if err := MayList(by); err != nil {
		return nil, "", err
	}
	if !by.HasAnyRole(toolplane.RolePlatformAdmin, toolplane.RoleAuditor) {
		f.UserID = by.Subject
		if f.UserID == "" {
			return nil, "", nil
		}
	}
	cs, next, err := s.cfg.Store.ListConnections(ctx, by.OrganizationID, f, after, limit)
	if err != nil {
		return nil, "", err
	}
	for i := range cs {
		cs[i] = *shown(&cs[i])
	}
	return cs, next, nil
}

// Revoke revokes the connection: from the next call on, on every node, no
// call uses it. A token the provider can revoke is revoked there too, as
// far as the provider answers; the revocation here does not wait on it.
func (s *Admin) Revoke(ctx context.Context, by *toolplane.Credential, id, reason string) (*toolplane.Connection, error) {
	if by == nil {
		return nil, toolplane.Refuse(by, ErrNotAuthorized, "revoking a connection needs a person's key")
	}
	for range 8 {
		c, err := s.cfg.Store.GetConnection(ctx, by.OrganizationID, id)
		if err != nil {
			return nil, err
		}
		if !mayRead(by, c) {
			return nil, fmt.Errorf("connection %s: %w", id, toolplane.ErrNotFound)
		}
		if !mayRevoke(by, c) {
			return nil, toolplane.Refuse(by, ErrNotAuthorized, "revoking a connection needs the platform_admin role, or to be the person whose account it holds")
		}
		if c.State == toolplane.ConnectionRevoked {
			return shown(c), nil
		}
		sealed := c.Secret
		c.State, c.Reason, c.RevokedAt, c.UpdatedAt = toolplane.ConnectionRevoked, bounded(reason), s.now(), s.now()
		c.Secret = []byte{} // nothing of a revoked connection is kept to open
		ok, err := s.update(ctx, c, s.change(c, "connection.revoke", by.Subject, c.Reason))
		if err != nil {
			return nil, fmt.Errorf("revoke connection %s: %w", id, err)
		}
		if ok {
			s.vaulted.Delete(c.ID)
			s.revokeAtProvider(ctx, c, sealed)
			// The revocation answers once no node may still use the
			// connection: every call after this answer is refused.
			s.settle(ctx)
			return shown(c), nil
		}
	}
	return nil, fmt.Errorf("revoke connection %s: %w: it changed under every attempt; try again", id, toolplane.ErrConflict)
}

// bounded keeps a person's reason to a line's worth.
func bounded(s string) string {
	const max = 500
	s = strings.ToValidUTF8(s, "")
	if len(s) > max {
		cut := max
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut]
	}
	return s
}

// MayRevoke reports whether Revoke would revoke c for by: c is not
// revoked yet, and by is a platform administrator or the person whose
// account it holds. A page asks it before offering the action; Revoke
// decides again.
func MayRevoke(by *toolplane.Credential, c *toolplane.Connection) bool {
	return c != nil && c.State != toolplane.ConnectionRevoked && mayRevoke(by, c)
}

// ConsentApp answers the OAuth application the person by consents through,
// with Authorize, to connect or renew their own account on c: c's
// application for by's own authorization-code connection, c itself for an
// application of the organization. It answers "" when by cannot consent
// on c (c is another person's, or not of the OAuth authorization-code
// kind, or revoked, or by is not a person). Authorize decides again.
func ConsentApp(by *toolplane.Credential, c *toolplane.Connection) string {
	if by == nil || c == nil || by.Kind != toolplane.CredentialPerson || by.Subject == "" || by.OrganizationID != c.OrganizationID ||
		c.Kind != toolplane.ConnectionAuthorizationCode || c.State == toolplane.ConnectionRevoked {
		return ""
	}
	switch {
	case isApp(c):
		return c.ID
	case c.UserID == by.Subject:
		return c.Config.App
	}
	return ""
}
