package connection

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/egress"
)

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
func (s *Service) Get(ctx context.Context, by *toolplane.Credential, id string) (*toolplane.Connection, error) {
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

// List answers the connections the credential may see: every one of the
// organization for an administrator or an auditor, a person's own
// otherwise.
func (s *Service) List(ctx context.Context, by *toolplane.Credential, f toolplane.ConnectionFilter, after string, limit int) ([]toolplane.Connection, string, error) {
	if by == nil || by.Kind != toolplane.CredentialPerson {
		return nil, "", toolplane.Refuse(by, ErrNotAuthorized, "listing connections needs a person's key")
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
func (s *Service) Revoke(ctx context.Context, by *toolplane.Credential, id, reason string) (*toolplane.Connection, error) {
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

// shown is c as an answer shows it: never its sealed secret, never its
// refresh lease.
func shown(c *toolplane.Connection) *toolplane.Connection {
	v := *c
	v.Secret, v.RefreshOwner, v.RefreshUntil = nil, "", time.Time{}
	return &v
}

// change is the change-log record of an operation on c. Its detail names
// the connection and never its secret.
func (s *Service) change(c *toolplane.Connection, kind, actor, reason string) *toolplane.Change {
	return s.changeWith(c, kind, actor, reason, nil)
}

// changeWith is change with more entries in its detail.
func (s *Service) changeWith(c *toolplane.Connection, kind, actor, reason string, more map[string]any) *toolplane.Change {
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

// validHeader reports whether name is an HTTP header name (an RFC 9110
// token).
func validHeader(name string) bool {
	if name == "" {
		return false
	}
	for _, r := range name {
		if r > 0x7e || r <= ' ' || strings.ContainsRune(`"(),/:;<=>?@[\]{}`, r) {
			return false
		}
	}
	return true
}

// checkEgress refuses rules that do not compile.
func checkEgress(r toolplane.EgressRules) error {
	if _, err := egress.Compile(r); err != nil {
		return &InvalidError{Field: "config.egress", Why: err.Error()}
	}
	return nil
}
