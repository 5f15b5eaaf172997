package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/toolplane/toolplane"
)

var _ toolplane.SpendStore = (*Store)(nil)

// putSpendCeilingRecorded and deleteSpendCeilingRecorded are each a write
// and the insert of its change record as one statement: a delete that
// matched nothing inserts no change.
var (
	putSpendCeilingRecorded = guarded(`INSERT INTO spend_ceilings (organization_id, daily_cents, updated_by, updated_at)
		VALUES ($1, $2, $3, $4) ON CONFLICT (organization_id) DO UPDATE SET
		daily_cents = excluded.daily_cents, updated_by = excluded.updated_by, updated_at = excluded.updated_at`,
		4, "changes", changeColumns, changeArgCount)
	deleteSpendCeilingRecorded = guarded(`DELETE FROM spend_ceilings WHERE organization_id = $1`,
		1, "changes", changeColumns, changeArgCount)
)

// PutSpendCeiling creates or replaces the organization's daily ceiling
// and appends ch in one statement.
func (s *Store) PutSpendCeiling(ctx context.Context, c *toolplane.SpendCeiling, ch *toolplane.Change) error {
	_, err := s.pool.Exec(ctx, putSpendCeilingRecorded, append([]any{
		c.OrganizationID, c.DailyCents, c.UpdatedBy, micros(c.UpdatedAt)}, changeArgs(ch)...)...)
	if isDuplicate(err) {
		return fmt.Errorf("put spend ceiling: append change %s: %w", ch.ID, toolplane.ErrExists)
	}
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
	err := s.pool.QueryRow(ctx, `SELECT daily_cents, updated_by, updated_at FROM spend_ceilings
		WHERE organization_id = $1`, org).Scan(&c.DailyCents, &c.UpdatedBy, &at)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("spend ceiling: %w", toolplane.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("spend ceiling: %w", err)
	}
	c.UpdatedAt = fromMicros(at)
	return c, nil
}

// DeleteSpendCeiling removes the organization's daily ceiling and appends
// ch in one statement; false when there was none.
func (s *Store) DeleteSpendCeiling(ctx context.Context, org string, ch *toolplane.Change) (bool, error) {
	tag, err := s.pool.Exec(ctx, deleteSpendCeilingRecorded, append([]any{org}, changeArgs(ch)...)...)
	if err != nil {
		return false, fmt.Errorf("delete spend ceiling: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// DaySpend answers the organization's spend of one UTC day and its
// ceiling from the day's counter row and the ceiling row, in one read.
func (s *Store) DaySpend(ctx context.Context, org string, day int64) (toolplane.DaySpend, error) {
	var d toolplane.DaySpend
	err := s.pool.QueryRow(ctx, `SELECT
		COALESCE((SELECT daily_cents FROM spend_ceilings WHERE organization_id = $1), 0),
		COALESCE((SELECT cost_cents FROM spend_days WHERE organization_id = $1 AND day = $2), 0),
		COALESCE((SELECT calls FROM spend_days WHERE organization_id = $1 AND day = $2), 0)`,
		org, day).Scan(&d.CeilingCents, &d.SpentCents, &d.Calls)
	if err != nil {
		return d, fmt.Errorf("day spend: %w", err)
	}
	return d, nil
}

// SpendReport groups the organization's usage rows of [from, to) by
// agent, tool or UTC day, read from the index usage_by_time. SUM of a
// BIGINT is a NUMERIC; the cast back answers an error past int64.
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
		key = "to_char(to_timestamp(created_at / 86400000000 * 86400) AT TIME ZONE 'UTC', 'YYYY-MM-DD')"
	default:
		return nil, fmt.Errorf("spend report: no grouping %q", by)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+key+` AS k, COUNT(*), COALESCE(SUM(cost_cents), 0)::BIGINT FROM usage
		WHERE organization_id = $1 AND created_at >= $2 AND created_at < $3
		GROUP BY k ORDER BY k LIMIT $4`, org, micros(from), micros(to), limit)
	if err != nil {
		return nil, fmt.Errorf("spend report: %w", err)
	}
	defer rows.Close()
	var out []toolplane.SpendLine
	for rows.Next() {
		var l toolplane.SpendLine
		if err := rows.Scan(&l.Key, &l.Calls, &l.CostCents); err != nil {
			return nil, fmt.Errorf("spend report: %w", err)
		}
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("spend report: %w", err)
	}
	return out, nil
}
