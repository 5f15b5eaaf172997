package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// Every write to grants, denies and bundles moves the organization's
// authorization revision in the same statement, by the triggers the
// migration puts on those tables; no method here bumps it itself.

const grantColumns = `organization_id, id, agent_id, pattern, bundle, tenant_scope,
	expires_at, granted_by, created_at, revoked_at, revoked_by, user_id, user_group`

func scanGrant(r scanner) (toolplane.Grant, error) {
	var (
		g                toolplane.Grant
		scope            string
		created          int64
		expires, revoked sql.NullInt64
	)
	err := r.Scan(&g.OrganizationID, &g.ID, &g.AgentID, &g.Pattern, &g.Bundle, &scope,
		&expires, &g.GrantedBy, &created, &revoked, &g.RevokedBy, &g.UserID, &g.Group)
	if err != nil {
		return g, err
	}
	if g.TenantScope, err = fromNames(scope); err != nil {
		return g, fmt.Errorf("tenant scope: %w", err)
	}
	g.ExpiresAt = fromOptMicros(expires)
	g.CreatedAt = fromMicros(created)
	g.RevokedAt = fromOptMicros(revoked)
	return g, nil
}

// InsertGrant stores g, or answers an error wrapping toolplane.ErrExists
// when its organization already has a grant with that ID.
func (s *Store) InsertGrant(ctx context.Context, g *toolplane.Grant) error {
	args, err := grantArgs(g)
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	_, err = s.exec(ctx, insertGrant, args...)
	if isDuplicate(err) {
		return fmt.Errorf("insert grant %s: %w", g.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

// InsertGrantAudited is InsertGrant, AppendChange and AppendAudit in one
// transaction.
func (s *Store) InsertGrantAudited(ctx context.Context, g *toolplane.Grant, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	args, err := grantArgs(g)
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	_, err = s.audited(ctx, ch, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return inserted(s.txExec(ctx, tx, insertGrant, args...))
	})
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

const insertGrant = `INSERT INTO grants (` + grantColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// grantArgs answers insertGrant's arguments for g, or why g cannot be
// stored.
func grantArgs(g *toolplane.Grant) ([]any, error) {
	if err := errors.Join(g.CheckTarget(), g.CheckSubject()); err != nil {
		return nil, err
	}
	scope, err := names("tenant scope", g.TenantScope)
	if err != nil {
		return nil, err
	}
	return []any{g.OrganizationID, g.ID, g.AgentID, g.Pattern, g.Bundle, scope,
		optMicros(g.ExpiresAt), g.GrantedBy, micros(g.CreatedAt), optMicros(g.RevokedAt), g.RevokedBy, g.UserID, g.Group}, nil
}

// ListGrants answers the organization's grants, of one agent when agentID
// is set, standing ones only unless withRevoked; oldest first (ties by ID).
// An expired grant is listed: expiry is judged against the caller's clock,
// not the store's.
func (s *Store) ListGrants(ctx context.Context, org, agentID string, withRevoked bool) ([]toolplane.Grant, error) {
	q := `SELECT ` + grantColumns + ` FROM grants WHERE organization_id = ?`
	args := []any{org}
	if agentID != "" {
		q += ` AND agent_id = ?`
		args = append(args, agentID)
	}
	if !withRevoked {
		q += ` AND revoked_at IS NULL`
	}
	q += ` ORDER BY created_at, id`
	rows, err := s.query(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	out, err := collect(rows, scanGrant)
	if err != nil {
		return nil, fmt.Errorf("list grants: %w", err)
	}
	return out, nil
}

// RevokeGrant marks the grant revoked by by at at, in one statement that
// matches a standing grant only, so a revocation is never moved or
// overwritten and of concurrent revocations one wins. No standing grant
// with that ID in org answers an error wrapping toolplane.ErrNotFound; a
// zero at, which would read as "standing", is an error.
func (s *Store) RevokeGrant(ctx context.Context, org, id, by string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke grant %s: zero time", id)
	}
	res, err := s.exec(ctx, revokeGrant, micros(at), by, org, id)
	if err != nil {
		return fmt.Errorf("revoke grant %s: %w", id, err)
	}
	ok, err := affected(res)
	if err != nil {
		return fmt.Errorf("revoke grant %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("revoke grant %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// RevokeGrantAudited is RevokeGrant, AppendChange and AppendAudit in one
// transaction; no standing grant stores nothing.
func (s *Store) RevokeGrantAudited(ctx context.Context, org, id, by string, at time.Time, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	if at.IsZero() {
		return fmt.Errorf("revoke grant %s: zero time", id)
	}
	return s.auditedOne(ctx, "revoke grant "+id, ch, e, revokeGrant, micros(at), by, org, id)
}

const revokeGrant = `UPDATE grants SET revoked_at = ?, revoked_by = ?
		WHERE organization_id = ? AND id = ? AND revoked_at IS NULL`

// auditedOne runs query, a change of one row, with args, and appends ch
// and e, in one transaction (see audited). A query that changes no row
// stores nothing and answers an error wrapping toolplane.ErrNotFound;
// every error names what.
func (s *Store) auditedOne(ctx context.Context, what string, ch *toolplane.Change, e *toolplane.AuditEvent, query string, args ...any) error {
	ok, err := s.audited(ctx, ch, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		res, err := s.txExec(ctx, tx, query, args...)
		if err != nil {
			return false, err
		}
		return affected(res)
	})
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w", what, toolplane.ErrNotFound)
	}
	return nil
}

const denyColumns = `organization_id, id, agent_id, pattern, reason, created_by, created_at`

// InsertDeny stores d, or answers an error wrapping toolplane.ErrExists
// when its organization already has a deny with that ID.
func (s *Store) InsertDeny(ctx context.Context, d *toolplane.Deny) error {
	_, err := s.exec(ctx, insertDeny, denyArgs(d)...)
	if isDuplicate(err) {
		return fmt.Errorf("insert deny %s: %w", d.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert deny %s: %w", d.ID, err)
	}
	return nil
}

// InsertDenyAudited is InsertDeny, AppendChange and AppendAudit in one
// transaction.
func (s *Store) InsertDenyAudited(ctx context.Context, d *toolplane.Deny, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	_, err := s.audited(ctx, ch, e, func(ctx context.Context, tx *sql.Tx) (bool, error) {
		return inserted(s.txExec(ctx, tx, insertDeny, denyArgs(d)...))
	})
	if err != nil {
		return fmt.Errorf("insert deny %s: %w", d.ID, err)
	}
	return nil
}

const insertDeny = `INSERT INTO denies (` + denyColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`

func denyArgs(d *toolplane.Deny) []any {
	return []any{d.OrganizationID, d.ID, d.AgentID, d.Pattern, d.Reason, d.CreatedBy, micros(d.CreatedAt)}
}

// ListDenies answers the organization's denies, oldest first (ties by ID).
func (s *Store) ListDenies(ctx context.Context, org string) ([]toolplane.Deny, error) {
	rows, err := s.query(ctx, `SELECT `+denyColumns+` FROM denies
		WHERE organization_id = ? ORDER BY created_at, id`, org)
	if err != nil {
		return nil, fmt.Errorf("list denies: %w", err)
	}
	out, err := collect(rows, scanDeny)
	if err != nil {
		return nil, fmt.Errorf("list denies: %w", err)
	}
	return out, nil
}

// DeleteDeny lifts the deny, or answers an error wrapping
// toolplane.ErrNotFound when org has none with that ID.
func (s *Store) DeleteDeny(ctx context.Context, org, id string) error {
	res, err := s.exec(ctx, deleteDeny, org, id)
	if err != nil {
		return fmt.Errorf("delete deny %s: %w", id, err)
	}
	ok, err := affected(res)
	if err != nil {
		return fmt.Errorf("delete deny %s: %w", id, err)
	}
	if !ok {
		return fmt.Errorf("delete deny %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// DeleteDenyAudited is DeleteDeny, AppendChange and AppendAudit in one
// transaction; no such deny stores nothing.
func (s *Store) DeleteDenyAudited(ctx context.Context, org, id string, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	return s.auditedOne(ctx, "delete deny "+id, ch, e, deleteDeny, org, id)
}

const deleteDeny = `DELETE FROM denies WHERE organization_id = ? AND id = ?`

const bundleColumns = `organization_id, name, refs, created_by, created_at, updated_at`

func scanDeny(r scanner) (toolplane.Deny, error) {
	var (
		d       toolplane.Deny
		created int64
	)
	err := r.Scan(&d.OrganizationID, &d.ID, &d.AgentID, &d.Pattern, &d.Reason, &d.CreatedBy, &created)
	d.CreatedAt = fromMicros(created)
	return d, err
}

func scanChange(r scanner) (toolplane.Change, error) {
	var (
		c       toolplane.Change
		created int64
	)
	err := r.Scan(&c.OrganizationID, &c.ID, &c.Kind, &c.Subject, &c.Actor, &c.Detail, &created)
	c.CreatedAt = fromMicros(created)
	return c, err
}

func scanBundle(r scanner) (toolplane.Bundle, error) {
	var (
		b                toolplane.Bundle
		refs             string
		created, updated int64
	)
	if err := r.Scan(&b.OrganizationID, &b.Name, &refs, &b.CreatedBy, &created, &updated); err != nil {
		return b, err
	}
	var err error
	if b.Refs, err = fromNames(refs); err != nil {
		return b, fmt.Errorf("refs: %w", err)
	}
	b.CreatedAt = fromMicros(created)
	b.UpdatedAt = fromMicros(updated)
	return b, nil
}

// PutBundle creates the bundle, or replaces the refs and UpdatedAt of the
// one org has by that name, in one statement. A replacement keeps the
// stored CreatedAt and CreatedBy: they record the bundle's creation, and
// the change log records each replacement.
func (s *Store) PutBundle(ctx context.Context, b *toolplane.Bundle) error {
	args, err := bundleArgs(b)
	if err != nil {
		return fmt.Errorf("put bundle %s: %w", b.Name, err)
	}
	if _, err = s.exec(ctx, putBundle, args...); err != nil {
		return fmt.Errorf("put bundle %s: %w", b.Name, err)
	}
	return nil
}

// PutBundleAudited is PutBundle, AppendChange and AppendAudit in one
// transaction.
func (s *Store) PutBundleAudited(ctx context.Context, b *toolplane.Bundle, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	args, err := bundleArgs(b)
	if err != nil {
		return fmt.Errorf("put bundle %s: %w", b.Name, err)
	}
	return s.auditedOne(ctx, "put bundle "+b.Name, ch, e, putBundle, args...)
}

const putBundle = `INSERT INTO bundles (` + bundleColumns + `) VALUES (?, ?, ?, ?, ?, ?)
		ON CONFLICT (organization_id, name) DO UPDATE SET refs = excluded.refs, updated_at = excluded.updated_at`

// bundleArgs answers putBundle's arguments for b, or why b cannot be
// stored.
func bundleArgs(b *toolplane.Bundle) ([]any, error) {
	refs, err := names("refs", b.Refs)
	if err != nil {
		return nil, err
	}
	return []any{b.OrganizationID, b.Name, refs, b.CreatedBy, micros(b.CreatedAt), micros(b.UpdatedAt)}, nil
}

// GetBundle answers the bundle, or an error wrapping toolplane.ErrNotFound.
func (s *Store) GetBundle(ctx context.Context, org, name string) (*toolplane.Bundle, error) {
	row := s.queryRow(ctx, `SELECT `+bundleColumns+` FROM bundles
		WHERE organization_id = ? AND name = ?`, org, name)
	b, err := scanBundle(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("get bundle %s: %w", name, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get bundle %s: %w", name, err)
	}
	return &b, nil
}

// ListBundles answers the organization's bundles by name (bytewise).
func (s *Store) ListBundles(ctx context.Context, org string) ([]toolplane.Bundle, error) {
	rows, err := s.query(ctx, `SELECT `+bundleColumns+` FROM bundles
		WHERE organization_id = ? ORDER BY name`, org)
	if err != nil {
		return nil, fmt.Errorf("list bundles: %w", err)
	}
	out, err := collect(rows, scanBundle)
	if err != nil {
		return nil, fmt.Errorf("list bundles: %w", err)
	}
	return out, nil
}

// AuthzRevision answers the organization's authorization revision, 0 for an
// organization that never changed a grant, deny or bundle.
func (s *Store) AuthzRevision(ctx context.Context, org string) (int64, error) {
	var rev int64
	err := s.queryRow(ctx, `SELECT revision FROM authz_revisions WHERE organization_id = ?`, org).Scan(&rev)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("authz revision: %w", err)
	}
	return rev, nil
}

// AppendChange stores c, or answers an error wrapping toolplane.ErrExists
// when its organization already has a change with that ID.
func (s *Store) AppendChange(ctx context.Context, c *toolplane.Change) error {
	_, err := s.exec(ctx, insertChange, changeArgs(c)...)
	if isDuplicate(err) {
		return fmt.Errorf("append change %s: %w", c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("append change %s: %w", c.ID, err)
	}
	return nil
}

// ListChanges answers the organization's changes of kind and subject (each
// when set), newest first (ties by ID, descending), before the cursor, like
// ListAudit. The next cursor is "" when no change follows.
func (s *Store) ListChanges(ctx context.Context, org, kind, subject, after string, limit int) ([]toolplane.Change, string, error) {
	var q sqlstore.Query
	err := sqlstore.ListChanges(&q, dialect, org, kind, subject, after, limit)
	return page(ctx, s, "list changes", &q, err, limit, scanChange, sqlstore.ChangeCursor)
}
