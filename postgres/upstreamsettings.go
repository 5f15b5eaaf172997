package postgres

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
)

// PutUpstreamToolSetting creates or replaces the setting of one tool.
func (s *Store) PutUpstreamToolSetting(ctx context.Context, us *toolplane.UpstreamToolSetting) error {
	_, err := s.pool.Exec(ctx, `INSERT INTO upstream_tool_settings (upstream, tool, settings, updated_by, updated_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (upstream, tool) DO UPDATE SET settings = excluded.settings,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		us.Upstream, us.Tool, us.Settings, us.UpdatedBy, micros(us.UpdatedAt))
	if err != nil {
		return fmt.Errorf("put upstream tool setting %s/%s: %w", us.Upstream, us.Tool, err)
	}
	return nil
}

// DeleteUpstreamToolSetting removes the setting of one tool, or answers an
// error wrapping toolplane.ErrNotFound.
func (s *Store) DeleteUpstreamToolSetting(ctx context.Context, upstream, tool string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM upstream_tool_settings WHERE upstream = $1 AND tool = $2`, upstream, tool)
	if err != nil {
		return fmt.Errorf("delete upstream tool setting %s/%s: %w", upstream, tool, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete upstream tool setting %s/%s: %w", upstream, tool, toolplane.ErrNotFound)
	}
	return nil
}

// ListUpstreamToolSettings answers every setting, by upstream then tool.
func (s *Store) ListUpstreamToolSettings(ctx context.Context) ([]toolplane.UpstreamToolSetting, error) {
	rows, err := s.pool.Query(ctx, `SELECT upstream, tool, settings, updated_by, updated_at
		FROM upstream_tool_settings ORDER BY upstream, tool`)
	if err != nil {
		return nil, fmt.Errorf("list upstream tool settings: %w", err)
	}
	defer rows.Close()
	var out []toolplane.UpstreamToolSetting
	for rows.Next() {
		var (
			us      toolplane.UpstreamToolSetting
			updated int64
		)
		if err := rows.Scan(&us.Upstream, &us.Tool, &us.Settings, &us.UpdatedBy, &updated); err != nil {
			return nil, fmt.Errorf("list upstream tool settings: %w", err)
		}
		us.UpdatedAt = fromMicros(updated)
		out = append(out, us)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list upstream tool settings: %w", err)
	}
	return out, nil
}
