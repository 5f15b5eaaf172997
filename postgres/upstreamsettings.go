package postgres

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
)

// putUpstreamToolSettingRecorded is the upsert of a setting and the insert
// of its change record as one statement, atomic as a transaction and one
// round trip.
var putUpstreamToolSettingRecorded = guarded(`INSERT INTO upstream_tool_settings (upstream, tool, settings, updated_by, updated_at)
		VALUES ($1, $2, $3, $4, $5)
		ON CONFLICT (upstream, tool) DO UPDATE SET settings = excluded.settings,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`, 5, "changes", changeColumns, changeArgCount)

// deleteUpstreamToolSettingRecorded is the delete and the change insert as
// one statement: a setting that is not there inserts no change.
var deleteUpstreamToolSettingRecorded = guarded(`DELETE FROM upstream_tool_settings WHERE upstream = $1 AND tool = $2`,
	2, "changes", changeColumns, changeArgCount)

// changeArgCount is how many arguments changeArgs answers.
var changeArgCount = len(changeArgs(&toolplane.Change{}))

func changeArgs(c *toolplane.Change) []any {
	return []any{c.OrganizationID, c.ID, c.Kind, c.Subject, c.Actor, blob(c.Detail), micros(c.CreatedAt)}
}

// PutUpstreamToolSettingRecorded creates or replaces the setting of one
// tool and appends c, its record in the change log, in one transaction: a
// change that cannot be recorded (an error wrapping toolplane.ErrExists for
// a duplicate ID) is not stored either.
func (s *Store) PutUpstreamToolSettingRecorded(ctx context.Context, us *toolplane.UpstreamToolSetting, c *toolplane.Change) error {
	_, err := s.pool.Exec(ctx, putUpstreamToolSettingRecorded,
		append([]any{us.Upstream, us.Tool, us.Settings, us.UpdatedBy, micros(us.UpdatedAt)}, changeArgs(c)...)...)
	if isDuplicate(err) {
		return fmt.Errorf("put upstream tool setting %s/%s: append change %s: %w", us.Upstream, us.Tool, c.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("put upstream tool setting %s/%s: %w", us.Upstream, us.Tool, err)
	}
	return nil
}

// DeleteUpstreamToolSettingRecorded removes the setting of one tool and
// appends c, its record in the change log, in one transaction. It answers
// an error wrapping toolplane.ErrNotFound, and records nothing, when the
// tool has no setting; a change that cannot be recorded deletes nothing.
func (s *Store) DeleteUpstreamToolSettingRecorded(ctx context.Context, upstream, tool string, c *toolplane.Change) error {
	tag, err := s.pool.Exec(ctx, deleteUpstreamToolSettingRecorded, append([]any{upstream, tool}, changeArgs(c)...)...)
	if isDuplicate(err) {
		return fmt.Errorf("delete upstream tool setting %s/%s: append change %s: %w", upstream, tool, c.ID, toolplane.ErrExists)
	}
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
