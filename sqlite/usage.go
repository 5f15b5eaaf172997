package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// InsertUsage stores u and adds it to its organization's spend of its
// UTC day, in one transaction, or answers an error wrapping
// toolplane.ErrExists when its organization already has a usage row with
// that ID: a retried meter write never charges twice.
func (s *Store) InsertUsage(ctx context.Context, u *toolplane.Usage) error {
	err := s.write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if _, err := tx.ExecContext(ctx, insertUsage,
			u.OrganizationID, u.ID, u.RunID, u.RootRunID, u.AgentID, u.Tool, u.CostCents, u.Units, micros(u.CreatedAt)); err != nil {
			return err
		}
		_, err := tx.ExecContext(ctx, accrueDay, u.OrganizationID, toolplane.SpendDay(u.CreatedAt), u.CostCents)
		return err
	})
	if isDuplicate(err) {
		return fmt.Errorf("insert usage %s: %w", u.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert usage %s: %w", u.ID, err)
	}
	return nil
}

// insertUsage is the meter's insert; accrueDay adds one row's cost to its
// organization's day.
const (
	insertUsage = `INSERT INTO usage
		(organization_id, id, run_id, root_run_id, agent_id, tool, cost_cents, units, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`
	accrueDay = `INSERT INTO spend_days (organization_id, day, cost_cents, calls) VALUES (?, ?, ?, 1)
		ON CONFLICT (organization_id, day) DO UPDATE SET
		cost_cents = spend_days.cost_cents + excluded.cost_cents, calls = spend_days.calls + 1`
)

// RunTreeCost answers the summed cost of the run tree's usage rows, 0 when
// there are none. The sum is read from the rows themselves on every call
// (from an index that holds the cost), so it never lags a write.
func (s *Store) RunTreeCost(ctx context.Context, org, rootRunID string) (int64, error) {
	var total int64
	err := s.queryRow(ctx, `SELECT COALESCE(SUM(cost_cents), 0) FROM usage
		WHERE organization_id = ? AND root_run_id = ?`, org, rootRunID).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("run tree cost %s: %w", rootRunID, err)
	}
	return total, nil
}

// ToolUsage answers the count, the average and the largest cost of the
// newest usage rows (at most toolplane.MaxUsageSample) of the
// organization's tool since then, read from the index usage_by_tool.
func (s *Store) ToolUsage(ctx context.Context, org, tool string, since time.Time) (toolplane.UsageStats, error) {
	var st toolplane.UsageStats
	var calls int64
	err := s.queryRow(ctx, `SELECT COUNT(*), COALESCE(AVG(cost_cents), 0), COALESCE(MAX(cost_cents), 0) FROM (
		SELECT cost_cents FROM usage
		WHERE organization_id = ? AND tool = ? AND created_at >= ?
		ORDER BY created_at DESC LIMIT ?)`, org, tool, micros(since), toolplane.MaxUsageSample).Scan(&calls, &st.AverageCents, &st.MaxCents)
	if err != nil {
		return toolplane.UsageStats{}, fmt.Errorf("usage of %s: %w", tool, err)
	}
	st.Calls = int(calls)
	return st, nil
}
