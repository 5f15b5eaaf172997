package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
		created          int64
		expires, revoked *int64
	)
	err := r.Scan(&g.OrganizationID, &g.ID, &g.AgentID, &g.Pattern, &g.Bundle, &g.TenantScope,
		&expires, &g.GrantedBy, &created, &revoked, &g.RevokedBy, &g.UserID, &g.Group)
	if len(g.TenantScope) == 0 {
		g.TenantScope = nil
	}
	g.ExpiresAt = fromOptMicros(expires)
	g.CreatedAt = fromMicros(created)
	g.RevokedAt = fromOptMicros(revoked)
	return g, err
}

// InsertGrant stores g, or answers an error wrapping toolplane.ErrExists
// when its organization already has a grant with that ID.
func (s *Store) InsertGrant(ctx context.Context, g *toolplane.Grant) error {
	args, err := grantArgs(g)
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	_, err = s.pool.Exec(ctx, insertGrant, args...)
	if isDuplicate(err) {
		return fmt.Errorf("insert grant %s: %w", g.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

// InsertGrantAudited is InsertGrant, AppendChange and AppendAudit in one
// statement.
func (s *Store) InsertGrantAudited(ctx context.Context, g *toolplane.Grant, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	args, err := grantArgs(g)
	if err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	if _, err := s.execAudited(ctx, insertGrantAudited, args, ch, e); err != nil {
		return fmt.Errorf("insert grant %s: %w", g.ID, err)
	}
	return nil
}

const insertGrant = `INSERT INTO grants (` + grantColumns + `)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)`

var insertGrantAudited = audited(insertGrant, 13, true)

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
	q := `SELECT ` + grantColumns + ` FROM grants WHERE organization_id = $1`
	args := []any{org}
	if agentID != "" {
		q += ` AND agent_id = $2`
		args = append(args, agentID)
	}
	if !withRevoked {
		q += ` AND revoked_at IS NULL`
	}
	q += ` ORDER BY created_at, id`
	rows, err := s.pool.Query(ctx, q, args...)
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
// overwritten and of concurrent revocations, from any nodes, one wins. No
// standing grant with that ID in org answers an error wrapping
// toolplane.ErrNotFound; a zero at, which would read as "standing", is an
// error.
func (s *Store) RevokeGrant(ctx context.Context, org, id, by string, at time.Time) error {
	if at.IsZero() {
		return fmt.Errorf("revoke grant %s: zero time", id)
	}
	if !dialect.Text(id) {
		return fmt.Errorf("revoke grant %q: %w", id, toolplane.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, revokeGrant, micros(at), by, org, id)
	if err != nil {
		return fmt.Errorf("revoke grant %s: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("revoke grant %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// RevokeGrantAudited is RevokeGrant, AppendChange and AppendAudit in one
// statement; no standing grant stores nothing.
func (s *Store) RevokeGrantAudited(ctx context.Context, org, id, by string, at time.Time, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	if at.IsZero() {
		return fmt.Errorf("revoke grant %s: zero time", id)
	}
	if !dialect.Text(id) {
		return fmt.Errorf("revoke grant %q: %w", id, toolplane.ErrNotFound)
	}
	return s.auditedOne(ctx, "revoke grant "+id, revokeGrantAudited, []any{micros(at), by, org, id}, ch, e)
}

const revokeGrant = `UPDATE grants SET revoked_at = $1, revoked_by = $2
		WHERE organization_id = $3 AND id = $4 AND revoked_at IS NULL`

var revokeGrantAudited = audited(revokeGrant, 4, true)

// auditedOne runs query, built by audited, with args, ch and e. A write
// that changes no row stores nothing and answers an error wrapping
// toolplane.ErrNotFound; every error names what.
func (s *Store) auditedOne(ctx context.Context, what, query string, args []any, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	ok, err := s.execAudited(ctx, query, args, ch, e)
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if !ok {
		return fmt.Errorf("%s: %w", what, toolplane.ErrNotFound)
	}
	return nil
}

const denyColumns = `organization_id, id, agent_id, pattern, reason, created_by, created_at`

func scanDeny(r scanner) (toolplane.Deny, error) {
	var (
		d       toolplane.Deny
		created int64
	)
	err := r.Scan(&d.OrganizationID, &d.ID, &d.AgentID, &d.Pattern, &d.Reason, &d.CreatedBy, &created)
	d.CreatedAt = fromMicros(created)
	return d, err
}

// InsertDeny stores d, or answers an error wrapping toolplane.ErrExists
// when its organization already has a deny with that ID.
func (s *Store) InsertDeny(ctx context.Context, d *toolplane.Deny) error {
	_, err := s.pool.Exec(ctx, insertDeny, denyArgs(d)...)
	if isDuplicate(err) {
		return fmt.Errorf("insert deny %s: %w", d.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert deny %s: %w", d.ID, err)
	}
	return nil
}

// InsertDenyAudited is InsertDeny, AppendChange and AppendAudit in one
// statement.
func (s *Store) InsertDenyAudited(ctx context.Context, d *toolplane.Deny, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	if _, err := s.execAudited(ctx, insertDenyAudited, denyArgs(d), ch, e); err != nil {
		return fmt.Errorf("insert deny %s: %w", d.ID, err)
	}
	return nil
}

const insertDeny = `INSERT INTO denies (` + denyColumns + `) VALUES ($1, $2, $3, $4, $5, $6, $7)`

var insertDenyAudited = audited(insertDeny, 7, true)

func denyArgs(d *toolplane.Deny) []any {
	return []any{d.OrganizationID, d.ID, d.AgentID, d.Pattern, d.Reason, d.CreatedBy, micros(d.CreatedAt)}
}

// ListDenies answers the organization's denies, oldest first (ties by ID).
func (s *Store) ListDenies(ctx context.Context, org string) ([]toolplane.Deny, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+denyColumns+` FROM denies
		WHERE organization_id = $1 ORDER BY created_at, id`, org)
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
	if !dialect.Text(id) {
		return fmt.Errorf("delete deny %q: %w", id, toolplane.ErrNotFound)
	}
	tag, err := s.pool.Exec(ctx, deleteDeny, org, id)
	if err != nil {
		return fmt.Errorf("delete deny %s: %w", id, err)
	}
	if tag.RowsAffected() != 1 {
		return fmt.Errorf("delete deny %s: %w", id, toolplane.ErrNotFound)
	}
	return nil
}

// DeleteDenyAudited is DeleteDeny, AppendChange and AppendAudit in one
// statement; no such deny stores nothing.
func (s *Store) DeleteDenyAudited(ctx context.Context, org, id string, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	if !dialect.Text(id) {
		return fmt.Errorf("delete deny %q: %w", id, toolplane.ErrNotFound)
	}
	return s.auditedOne(ctx, "delete deny "+id, deleteDenyAudited, []any{org, id}, ch, e)
}

const deleteDeny = `DELETE FROM denies WHERE organization_id = $1 AND id = $2`

var deleteDenyAudited = audited(deleteDeny, 2, true)

const bundleColumns = `organization_id, name, refs, created_by, created_at, updated_at`

func scanBundle(r scanner) (toolplane.Bundle, error) {
	var (
		b                toolplane.Bundle
		created, updated int64
	)
	err := r.Scan(&b.OrganizationID, &b.Name, &b.Refs, &b.CreatedBy, &created, &updated)
	if len(b.Refs) == 0 {
		b.Refs = nil
	}
	b.CreatedAt = fromMicros(created)
	b.UpdatedAt = fromMicros(updated)
	return b, err
}

// PutBundle creates the bundle, or replaces the refs and UpdatedAt of the
// one org has by that name, in one statement; of concurrent puts of a new
// bundle one creates it and the others replace it. A replacement keeps the
// stored CreatedAt and CreatedBy: they record the bundle's creation, and
// the change log records each replacement.
func (s *Store) PutBundle(ctx context.Context, b *toolplane.Bundle) error {
	args, err := bundleArgs(b)
	if err != nil {
		return fmt.Errorf("put bundle %s: %w", b.Name, err)
	}
	if _, err = s.pool.Exec(ctx, putBundle, args...); err != nil {
		return fmt.Errorf("put bundle %s: %w", b.Name, err)
	}
	return nil
}

// PutBundleAudited is PutBundle, AppendChange and AppendAudit in one
// statement.
func (s *Store) PutBundleAudited(ctx context.Context, b *toolplane.Bundle, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	args, err := bundleArgs(b)
	if err != nil {
		return fmt.Errorf("put bundle %s: %w", b.Name, err)
	}
	return s.auditedOne(ctx, "put bundle "+b.Name, putBundleAudited, args, ch, e)
}

const putBundle = `INSERT INTO bundles (` + bundleColumns + `) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (organization_id, name) DO UPDATE SET refs = excluded.refs, updated_at = excluded.updated_at`

var putBundleAudited = audited(putBundle, 6, true)

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
	if !dialect.Text(name) {
		return nil, fmt.Errorf("get bundle %q: %w", name, toolplane.ErrNotFound)
	}
	row := s.pool.QueryRow(ctx, `SELECT `+bundleColumns+` FROM bundles
		WHERE organization_id = $1 AND name = $2`, org, name)
	b, err := scanBundle(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get bundle %s: %w", name, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get bundle %s: %w", name, err)
	}
	return &b, nil
}

// ListBundles answers the organization's bundles by name (bytewise).
func (s *Store) ListBundles(ctx context.Context, org string) ([]toolplane.Bundle, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+bundleColumns+` FROM bundles
		WHERE organization_id = $1 ORDER BY name`, org)
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
	err := s.pool.QueryRow(ctx, `SELECT revision FROM authz_revisions WHERE organization_id = $1`, org).Scan(&rev)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("authz revision: %w", err)
	}
	return rev, nil
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

// AppendChange stores c, or answers an error wrapping toolplane.ErrExists
// when its organization already has a change with that ID.
func (s *Store) AppendChange(ctx context.Context, c *toolplane.Change) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO changes (`+changeColumns+`) VALUES ($1, $2, $3, $4, $5, $6, $7)`, changeArgs(c)...)
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
