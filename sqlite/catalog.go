package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// Every query here is scoped to one organization, except
// ListEveryToolVersion (the deployment's own read) and CatalogRevision.

// scanToolVersion scans toolVersionColumns and then seq, which only a
// listing selects (its cursor needs it); extra is nil otherwise.
func scanToolVersion(r scanner, extra ...any) (toolplane.ToolVersion, error) {
	var (
		v                  toolplane.ToolVersion
		reasons            string
		published, updated int64
		reviewed, sunset   sql.NullInt64
	)
	err := r.Scan(append([]any{&v.OrganizationID, &v.Name, &v.Version, &v.State, &v.Definition, &v.SchemaHash, &v.Owner, &reasons,
		&v.PublishedBy, &published, &v.ReviewedBy, &reviewed, &v.ReviewNote, &sunset,
		&v.Replacement, &v.RetireBlocked, &v.Revision, &updated, &v.DeprecationNote}, extra...)...)
	if err != nil {
		return v, err
	}
	if v.ReviewReasons, err = fromNames(reasons); err != nil {
		return v, fmt.Errorf("review reasons: %w", err)
	}
	v.PublishedAt = fromMicros(published)
	v.ReviewedAt = fromOptMicros(reviewed)
	v.SunsetAt = fromOptMicros(sunset)
	v.UpdatedAt = fromMicros(updated)
	return v, nil
}

// InsertToolVersion stores v, or answers an error wrapping
// toolplane.ErrExists when the organization's name already has that
// version. The UNIQUE
// constraint decides, so of concurrent publishes of one version exactly one
// is stored; the catalogue revision moves with it (a trigger, see the
// migration).
func (s *Store) InsertToolVersion(ctx context.Context, v *toolplane.ToolVersion) error {
	reasons, err := names("review reasons", v.ReviewReasons)
	if err != nil {
		return fmt.Errorf("insert tool version %s@%s: %w", v.Name, v.Version, err)
	}
	defer s.catalogChanged(v.OrganizationID, v.Name)
	_, err = s.exec(ctx, `INSERT INTO tool_versions (`+toolVersionColumns+`)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
	row := s.queryRow(ctx, `SELECT `+toolVersionColumns+` FROM tool_versions
		WHERE organization_id = ? AND name = ? AND version = ?`, org, name, version)
	v, err := scanToolVersion(row)
	if errors.Is(err, sql.ErrNoRows) {
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
	rows, err := s.query(ctx, q.String(), q.Args()...)
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
// owner, who published it and when) is never written. A stale revision
// answers false; a version that is not there, an error wrapping
// toolplane.ErrNotFound, told apart by a second read only when the update
// wrote nothing (versions are never deleted, so the answer cannot go stale).
func (s *Store) UpdateToolVersion(ctx context.Context, v *toolplane.ToolVersion) (bool, error) {
	reasons, err := names("review reasons", v.ReviewReasons)
	if err != nil {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, err)
	}
	defer s.catalogChanged(v.OrganizationID, v.Name)
	res, err := s.exec(ctx, `UPDATE tool_versions SET
			state = ?, review_reasons = ?, reviewed_by = ?, reviewed_at = ?, review_note = ?,
			sunset_at = ?, replacement = ?, retire_blocked = ?, updated_at = ?, deprecation_note = ?,
			revision = revision + 1
		WHERE organization_id = ? AND name = ? AND version = ? AND revision = ?`,
		string(v.State), reasons, v.ReviewedBy, optMicros(v.ReviewedAt), v.ReviewNote,
		optMicros(v.SunsetAt), v.Replacement, v.RetireBlocked, micros(v.UpdatedAt), v.DeprecationNote,
		v.OrganizationID, v.Name, v.Version, v.Revision)
	if err != nil {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, err)
	}
	ok, err := affected(res)
	if err != nil {
		return false, fmt.Errorf("update tool version %s@%s: %w", v.Name, v.Version, err)
	}
	if ok {
		v.Revision++
		return true, nil
	}
	var exists bool
	err = s.queryRow(ctx, `SELECT EXISTS (SELECT 1 FROM tool_versions WHERE organization_id = ? AND name = ? AND version = ?)`,
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
// the triggers on tool_versions bump in the statement of every insert and
// every update that wrote a row.
func (s *Store) CatalogRevision(ctx context.Context) (int64, error) {
	var rev int64
	if err := s.queryRow(ctx, `SELECT revision FROM catalog_revision WHERE id = 1`).Scan(&rev); err != nil {
		return 0, fmt.Errorf("catalog revision: %w", err)
	}
	return rev, nil
}
