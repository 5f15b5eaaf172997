package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// Every query here is scoped to one organization, except
// ListEveryToolVersion (the deployment's own read) and CatalogRevision.

// scanToolVersion scans toolVersionColumns and then extra, which only a
// listing passes (the seq its cursor needs).
func scanToolVersion(r scanner, extra ...any) (toolplane.ToolVersion, error) {
	var (
		v                  toolplane.ToolVersion
		published, updated int64
		reviewed, sunset   *int64
	)
	err := r.Scan(append([]any{&v.OrganizationID, &v.Name, &v.Version, &v.State, &v.Definition, &v.SchemaHash, &v.Owner, &v.ReviewReasons,
		&v.PublishedBy, &published, &v.ReviewedBy, &reviewed, &v.ReviewNote, &sunset,
		&v.Replacement, &v.RetireBlocked, &v.Revision, &updated, &v.DeprecationNote}, extra...)...)
	if len(v.ReviewReasons) == 0 {
		v.ReviewReasons = nil
	}
	v.PublishedAt = fromMicros(published)
	v.ReviewedAt = fromOptMicros(reviewed)
	v.SunsetAt = fromOptMicros(sunset)
	v.UpdatedAt = fromMicros(updated)
	return v, err
}

// InsertToolVersion stores v, or answers an error wrapping
// toolplane.ErrExists when the organization's name already has that
// version. The primary
// key decides, so of concurrent publishes of one version, from any number
// of nodes, exactly one is stored; the catalogue revision moves in the same
// statement (a trigger, see the migration).
func (s *Store) InsertToolVersion(ctx context.Context, v *toolplane.ToolVersion) error {
	reasons, err := names("review reasons", v.ReviewReasons)
	if err != nil {
		return fmt.Errorf("insert tool version %s@%s: %w", v.Name, v.Version, err)
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO tool_versions (`+toolVersionColumns+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19)`,
		v.OrganizationID, v.Name, v.Version, string(v.State), blob(v.Definition), v.SchemaHash, v.Owner, reasons,
		v.PublishedBy, micros(v.PublishedAt), v.ReviewedBy, optMicros(v.ReviewedAt), v.ReviewNote, optMicros(v.SunsetAt),
		v.Replacement, v.RetireBlocked, v.Revision, micros(v.UpdatedAt), v.DeprecationNote)
	if isDuplicate(err) {
		return fmt.Errorf("insert tool version %s@%s: %w", v.Name, v.Version, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert tool version %s@%s: %w", v.Name, v.Version, err)
	}
	return nil
}

// GetToolVersion answers the organization's version, or an error wrapping
// toolplane.ErrNotFound.
func (s *Store) GetToolVersion(ctx context.Context, org, name, version string) (*toolplane.ToolVersion, error) {
	if !dialect.Text(org) || !dialect.Text(name) || !dialect.Text(version) {
		// No TEXT value holds it, so no version has it; asking would
		// answer a database error.
		return nil, fmt.Errorf("get tool version %q@%q: %w", name, version, toolplane.ErrNotFound)
	}
	row := s.pool.QueryRow(ctx, `SELECT `+toolVersionColumns+` FROM tool_versions
		WHERE organization_id = $1 AND name = $2 AND version = $3`, org, name, version)
	v, err := scanToolVersion(row)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get tool version %s@%s: %w", name, version, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get tool version %s@%s: %w", name, version, err)
	}
	return &v, nil
}

// ListToolVersions answers the organization's versions f matches, by name
// (bytewise), then publication time, then insertion order, after the
// cursor. The cursor carries the last row's name, publication time and
// insertion sequence, so a version published meanwhile never shifts a page.
// The next cursor is "" when no version follows.
func (s *Store) ListToolVersions(ctx context.Context, org string, f toolplane.VersionFilter, after string, limit int) ([]toolplane.ToolVersion, string, error) {
	return s.listToolVersions(ctx, &org, f, after, limit)
}

// ListEveryToolVersion answers every organization's versions f matches, by
// organization, then as ListToolVersions orders them; its cursor carries
// the organization too.
func (s *Store) ListEveryToolVersion(ctx context.Context, f toolplane.VersionFilter, after string, limit int) ([]toolplane.ToolVersion, string, error) {
	return s.listToolVersions(ctx, nil, f, after, limit)
}

// listToolVersions lists one organization's versions, or every
// organization's when org is nil.
func (s *Store) listToolVersions(ctx context.Context, org *string, f toolplane.VersionFilter, after string, limit int) ([]toolplane.ToolVersion, string, error) {
	var q sqlstore.Query
	if err := sqlstore.ListToolVersions(&q, dialect, org, f, after, limit); err != nil {
		return nil, "", fmt.Errorf("list tool versions: %w", err)
	}
	if q.Empty() {
		return nil, "", nil
	}
	rows, err := s.pool.Query(ctx, q.String(), q.Args()...)
	if err != nil {
		return nil, "", fmt.Errorf("list tool versions: %w", err)
	}
	defer rows.Close()
	var (
		out  []toolplane.ToolVersion
		seqs []int64
	)
	for rows.Next() {
		var seq int64
		v, err := scanToolVersion(rows, &seq)
		if err != nil {
			return nil, "", fmt.Errorf("list tool versions: %w", err)
		}
		out = append(out, v)
		seqs = append(seqs, seq)
	}
	if err := rows.Err(); err != nil {
		return nil, "", fmt.Errorf("list tool versions: %w", err)
	}
	out, next := sqlstore.Page(out, limit, func(last *toolplane.ToolVersion) string {
		return sqlstore.ToolVersionCursor(last, seqs[limit-1], org == nil)
	})
	return out, next, nil
}

// UpdateToolVersion writes v's lifecycle fields where the organization's
// stored revision is v.Revision, in one conditional statement, and on success sets v.Revision
// to the new revision. What was published (the definition, its hash, the
// owner, who published it and when) is never written. Of concurrent updates
// from one revision, the row lock the first takes makes the others re-check
// the revision after it commits, so exactly one writes. A stale revision
// answers false; a version that is not there, an error wrapping
// toolplane.ErrNotFound, told apart by a second read only when the update
// wrote nothing (versions are never deleted, so the answer cannot go stale).
func (s *Store) UpdateToolVersion(ctx context.Context, v *toolplane.ToolVersion) (bool, error) {
	if !dialect.Text(v.OrganizationID) || !dialect.Text(v.Name) || !dialect.Text(v.Version) {
		return false, fmt.Errorf("update tool version %q@%q: %w", v.Name, v.Version, toolplane.ErrNotFound)
	}
	reasons, err := names("review reasons", v.ReviewReasons)
	if err != nil {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE tool_versions SET
			state = $1, review_reasons = $2, reviewed_by = $3, reviewed_at = $4, review_note = $5,
			sunset_at = $6, replacement = $7, retire_blocked = $8, updated_at = $9, deprecation_note = $10,
			revision = revision + 1
		WHERE organization_id = $11 AND name = $12 AND version = $13 AND revision = $14`,
		string(v.State), reasons, v.ReviewedBy, optMicros(v.ReviewedAt), v.ReviewNote,
		optMicros(v.SunsetAt), v.Replacement, v.RetireBlocked, micros(v.UpdatedAt), v.DeprecationNote,
		v.OrganizationID, v.Name, v.Version, v.Revision)
	if err != nil {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, err)
	}
	if tag.RowsAffected() == 1 {
		v.Revision++
		return true, nil
	}
	var exists bool
	err = s.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tool_versions WHERE organization_id = $1 AND name = $2 AND version = $3)`,
		v.OrganizationID, v.Name, v.Version).Scan(&exists)
	if err != nil {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, err)
	}
	if !exists {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, toolplane.ErrNotFound)
	}
	return false, nil
}

// CatalogRevision answers the catalogue's revision: a one-row counter that
// the trigger on tool_versions bumps in the statement of every insert and
// every update that wrote a row.
func (s *Store) CatalogRevision(ctx context.Context) (int64, error) {
	var rev int64
	if err := s.pool.QueryRow(ctx, `SELECT revision FROM catalog_revision WHERE id = 1`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("catalog revision: %w", err)
	}
	return rev, nil
}
