package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

const policyBundleColumns = `organization_id, version, language, digest, time_zone, disabled,
	published_by, published_at, note`

func scanPolicyBundle(r scanner, files *[]byte) (toolplane.PolicyBundle, error) {
	var (
		b         toolplane.PolicyBundle
		published int64
	)
	dest := []any{&b.OrganizationID, &b.Version, &b.Language, &b.Digest, &b.TimeZone, &b.Disabled,
		&b.PublishedBy, &published, &b.Note}
	if files != nil {
		dest = append(dest, files)
	}
	err := r.Scan(dest...)
	b.PublishedAt = fromMicros(published)
	return b, err
}

// InsertPolicyBundle stores b, or answers an error wrapping
// toolplane.ErrExists when its organization has a bundle at b.Version.
func (s *Store) InsertPolicyBundle(ctx context.Context, b *toolplane.PolicyBundle) error {
	args, err := policyBundleArgs(b)
	if err != nil {
		return fmt.Errorf("insert policy bundle %d: %w", b.Version, err)
	}
	_, err = s.pool.Exec(ctx, insertPolicyBundle, args...)
	if isDuplicate(err) {
		return fmt.Errorf("insert policy bundle %d: %w", b.Version, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert policy bundle %d: %w", b.Version, err)
	}
	return nil
}

// InsertPolicyBundleAudited is InsertPolicyBundle, AppendChange and
// AppendAudit in one statement.
func (s *Store) InsertPolicyBundleAudited(ctx context.Context, b *toolplane.PolicyBundle, ch *toolplane.Change, e *toolplane.AuditEvent) error {
	args, err := policyBundleArgs(b)
	if err != nil {
		return fmt.Errorf("insert policy bundle %d: %w", b.Version, err)
	}
	if _, err := s.execAudited(ctx, insertPolicyBundleAudited, args, ch, e); err != nil {
		return fmt.Errorf("insert policy bundle %d: %w", b.Version, err)
	}
	return nil
}

const insertPolicyBundle = `INSERT INTO policy_bundles (` + policyBundleColumns + `, files)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`

var insertPolicyBundleAudited = audited(insertPolicyBundle, 10, true)

// policyBundleArgs answers insertPolicyBundle's arguments for b.
func policyBundleArgs(b *toolplane.PolicyBundle) ([]any, error) {
	files := b.Files
	if files == nil {
		files = map[string]string{}
	}
	body, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	return []any{b.OrganizationID, b.Version, b.Language, b.Digest, b.TimeZone, b.Disabled,
		b.PublishedBy, micros(b.PublishedAt), b.Note, string(body)}, nil
}

// GetPolicyBundle answers the bundle at version, files included, or an
// error wrapping toolplane.ErrNotFound.
func (s *Store) GetPolicyBundle(ctx context.Context, org string, version int64) (*toolplane.PolicyBundle, error) {
	var files []byte
	row := s.pool.QueryRow(ctx, `SELECT `+policyBundleColumns+`, files FROM policy_bundles
		WHERE organization_id = $1 AND version = $2`, org, version)
	b, err := scanPolicyBundle(row, &files)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("get policy bundle %d: %w", version, toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("get policy bundle %d: %w", version, err)
	}
	if err := json.Unmarshal(files, &b.Files); err != nil {
		return nil, fmt.Errorf("get policy bundle %d: files: %w", version, err)
	}
	return &b, nil
}

// PolicyBundleVersion answers the organization's latest version, 0 when
// it has none.
func (s *Store) PolicyBundleVersion(ctx context.Context, org string) (int64, error) {
	var v int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(MAX(version), 0) FROM policy_bundles WHERE organization_id = $1`, org).Scan(&v)
	if err != nil {
		return 0, fmt.Errorf("policy bundle version: %w", err)
	}
	return v, nil
}

// ListPolicyBundles answers the bundles older than before (all when 0),
// newest first, without their files.
func (s *Store) ListPolicyBundles(ctx context.Context, org string, before int64, limit int) ([]toolplane.PolicyBundle, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("list policy bundles: %w", err)
	}
	if before <= 0 {
		before = 1 << 62
	}
	rows, err := s.pool.Query(ctx, `SELECT `+policyBundleColumns+` FROM policy_bundles
		WHERE organization_id = $1 AND version < $2 ORDER BY version DESC LIMIT $3`, org, before, limit)
	if err != nil {
		return nil, fmt.Errorf("list policy bundles: %w", err)
	}
	out, err := collect(rows, func(r scanner) (toolplane.PolicyBundle, error) { return scanPolicyBundle(r, nil) })
	if err != nil {
		return nil, fmt.Errorf("list policy bundles: %w", err)
	}
	return out, nil
}
