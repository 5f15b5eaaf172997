package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

var _ toolplane.SpendStore = (*Store)(nil)

// PutSpendCeiling creates or replaces the organization's daily ceiling
// and appends ch in one transaction.
func (s *Store) PutSpendCeiling(ctx context.Context, c *toolplane.SpendCeiling, ch *toolplane.Change) error {
	err := s.recorded(ctx, ch, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO spend_ceilings (organization_id, daily_cents, updated_by, updated_at)
			VALUES (?, ?, ?, ?) ON CONFLICT (organization_id) DO UPDATE SET
			daily_cents = excluded.daily_cents, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
			c.OrganizationID, c.DailyCents, c.UpdatedBy, micros(c.UpdatedAt))
		return err
	})
	if err != nil {
		return fmt.Errorf("put spend ceiling: %w", err)
	}
	return nil
}

// GetSpendCeiling answers the organization's daily ceiling, or an error
// wrapping toolplane.ErrNotFound.
func (s *Store) GetSpendCeiling(ctx context.Context, org string) (*toolplane.SpendCeiling, error) {
	c := &toolplane.SpendCeiling{OrganizationID: org}
	var at int64
	err := s.db.QueryRowContext(ctx, `SELECT daily_cents, updated_by, updated_at FROM spend_ceilings
		WHERE organization_id = ?`, org).Scan(&c.DailyCents, &c.UpdatedBy, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("spend ceiling: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("spend ceiling: %w", err)
	}
	c.UpdatedAt = fromMicros(at)
	return c, nil
}

// DeleteSpendCeiling removes the organization's daily ceiling and appends
// ch in one transaction; false when there was none.
func (s *Store) DeleteSpendCeiling(ctx context.Context, org string, ch *toolplane.Change) (bool, error) {
	var ok bool
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ok = false
		res, err := tx.ExecContext(ctx, `DELETE FROM spend_ceilings WHERE organization_id = ?`, org)
		if err != nil {
			return err
		}
		if ok, err = affected(res); err != nil || !ok {
			return err
		}
		_, err = tx.ExecContext(ctx, insertChange, changeArgs(ch)...)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("delete spend ceiling: %w", err)
	}
	return ok, nil
}

// DaySpend answers the organization's spend of one UTC day and its
// ceiling from the day's counter row and the ceiling row.
func (s *Store) DaySpend(ctx context.Context, org string, day int64) (toolplane.DaySpend, error) {
	var d toolplane.DaySpend
	err := s.db.QueryRowContext(ctx, `SELECT
		COALESCE((SELECT daily_cents FROM spend_ceilings WHERE organization_id = ?), 0),
		COALESCE(d.cost_cents, 0), COALESCE(d.calls, 0)
		FROM (SELECT 1) LEFT JOIN spend_days AS d ON d.organization_id = ? AND d.day = ?`,
		org, org, day).Scan(&d.CeilingCents, &d.SpentCents, &d.Calls)
	if err != nil {
		return d, fmt.Errorf("day spend: %w", err)
	}
	return d, nil
}

// SpendReport groups the organization's usage rows of [from, to) by
// agent, tool or UTC day, read from the index usage_by_time.
func (s *Store) SpendReport(ctx context.Context, org string, from, to time.Time, by toolplane.SpendBy, limit int) ([]toolplane.SpendLine, error) {
	if limit < 1 || limit > toolplane.MaxSpendLines {
		return nil, fmt.Errorf("spend report: limit %d out of 1..%d", limit, toolplane.MaxSpendLines)
	}
	var key string
	switch by {
	case toolplane.SpendByAgent:
		key = "agent_id"
	case toolplane.SpendByTool:
		key = "tool"
	case toolplane.SpendByDay:
		key = "created_at / 86400000000"
	default:
		return nil, fmt.Errorf("spend report: no grouping %q", by)
	}
	rows, err := s.db.QueryContext(ctx, `SELECT `+key+` AS k, COUNT(*), COALESCE(SUM(cost_cents), 0) FROM usage
		WHERE organization_id = ? AND created_at >= ? AND created_at < ?
		GROUP BY k ORDER BY k LIMIT ?`, org, micros(from), micros(to), limit)
	if err != nil {
		return nil, fmt.Errorf("spend report: %w", err)
	}
	defer rows.Close()
	var out []toolplane.SpendLine
	for rows.Next() {
		var l toolplane.SpendLine
		var k any
		if err := rows.Scan(&k, &l.Calls, &l.CostCents); err != nil {
			return nil, fmt.Errorf("spend report: %w", err)
		}
		l.Key = spendKey(by, k)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("spend report: %w", err)
	}
	return out, nil
}

// spendKey renders a report's group key: a day number as its date.
func spendKey(by toolplane.SpendBy, k any) string {
	switch v := k.(type) {
	case int64:
		if by == toolplane.SpendByDay {
			return time.Unix(v*86400, 0).UTC().Format(time.DateOnly)
		}
		return fmt.Sprint(v)
	case string:
		return v
	case []byte:
		return string(v)
	}
	return fmt.Sprint(k)
}
