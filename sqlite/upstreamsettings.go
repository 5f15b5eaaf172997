package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/toolplane/toolplane"
)

const (
	putUpstreamToolSetting = `INSERT INTO upstream_tool_settings (upstream, tool, settings, updated_by, updated_at)
		VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (upstream, tool) DO UPDATE SET settings = excluded.settings,
			updated_by = excluded.updated_by, updated_at = excluded.updated_at`
	deleteUpstreamToolSetting = `DELETE FROM upstream_tool_settings WHERE upstream = ? AND tool = ?`
	insertChange              = `INSERT INTO changes (` + changeColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`
)

// PutUpstreamToolSettingRecorded creates or replaces the setting of one
// tool and appends c, its record in the change log, in one transaction: a
// change that cannot be recorded (an error wrapping toolplane.ErrExists for
// a duplicate ID) is not stored either.
func (s *Store) PutUpstreamToolSettingRecorded(ctx context.Context, us *toolplane.UpstreamToolSetting, c *toolplane.Change) error {
	defer s.upstreamSettingsChanged(us.Upstream)
	err := s.recorded(ctx, c, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, putUpstreamToolSetting,
			us.Upstream, us.Tool, us.Settings, us.UpdatedBy, micros(us.UpdatedAt))
		return err
	})
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
	defer s.upstreamSettingsChanged(upstream)
	err := s.recorded(ctx, c, func(ctx context.Context, tx *sql.Tx) error {
		res, err := tx.ExecContext(ctx, deleteUpstreamToolSetting, upstream, tool)
		if err != nil {
			return err
		}
		if n, err := res.RowsAffected(); err != nil {
			return err
		} else if n == 0 {
			return toolplane.ErrNotFound
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete upstream tool setting %s/%s: %w", upstream, tool, err)
	}
	return nil
}

func changeArgs(c *toolplane.Change) []any {
	return []any{c.OrganizationID, c.ID, c.Kind, c.Subject, c.Actor, blob(c.Detail), micros(c.CreatedAt)}
}

// recorded runs write and appends c in one transaction, committed only
// when both succeed. write runs as the fn of Store.write, under its rules.
func (s *Store) recorded(ctx context.Context, c *toolplane.Change, write func(context.Context, *sql.Tx) error) error {
	return s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if err := write(ctx, tx); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, insertChange, changeArgs(c)...)
		if isDuplicate(err) {
			return fmt.Errorf("append change %s: %w", c.ID, toolplane.ErrExists)
		}
		if err != nil {
			return fmt.Errorf("append change %s: %w", c.ID, err)
		}
		return nil
	})
}

// ListUpstreamToolSettings answers every setting, by upstream then tool.
func (s *Store) ListUpstreamToolSettings(ctx context.Context) ([]toolplane.UpstreamToolSetting, error) {
	rows, err := s.query(ctx, `SELECT upstream, tool, settings, updated_by, updated_at
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
