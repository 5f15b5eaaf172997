package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// InsertUsage stores u and adds it to its organization's spend of its
// UTC day, in one statement, or answers an error wrapping
// toolplane.ErrExists when its organization already has a usage row with
// that ID: a retried meter write never charges twice.
func (s *Store) InsertUsage(ctx context.Context, u *toolplane.Usage) error {
	_, err := s.pool.Exec(ctx, insertUsageAccrued,
		u.OrganizationID, u.ID, u.RunID, u.RootRunID, u.AgentID, u.Tool, u.CostCents, u.Units, micros(u.CreatedAt),
		toolplane.SpendDay(u.CreatedAt))
	if isDuplicate(err) {
		return fmt.Errorf("insert usage %s: %w", u.ID, toolplane.ErrExists)
	}
	if err != nil {
		return fmt.Errorf("insert usage %s: %w", u.ID, err)
	}
	return nil
}

// accrueInserted adds the rows the statement's CTE "u" inserted to their
// organization's day ($10): a row not inserted (one already there) adds
// nothing. The counter row is locked until the statement's transaction
// ends, so concurrent writers of one organization's day add up, never
// overwrite one another.
const accrueInserted = ` INSERT INTO spend_days (organization_id, day, cost_cents, calls)
	SELECT organization_id, $10, cost_cents, 1 FROM u
	ON CONFLICT (organization_id, day) DO UPDATE SET
	cost_cents = spend_days.cost_cents + excluded.cost_cents, calls = spend_days.calls + 1`

// insertUsageAccrued is the meter's insert and the accrual of its day as
// one statement, atomic as a transaction and one round trip.
const insertUsageAccrued = `WITH u AS (INSERT INTO usage
	(organization_id, id, run_id, root_run_id, agent_id, tool, cost_cents, units, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING organization_id, cost_cents)` + accrueInserted

// insertJobUsageAccrued is insertUsageAccrued for a provider job's
// settlement, where a row already there (an earlier attempt's) is kept
// and not counted again.
const insertJobUsageAccrued = `WITH u AS (INSERT INTO usage
	(organization_id, id, run_id, root_run_id, agent_id, tool, cost_cents, units, created_at)
	VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (organization_id, id) DO NOTHING
	RETURNING organization_id, cost_cents)` + accrueInserted

// RunTreeCost answers the summed cost of the run tree's usage rows, 0 when
// there are none. The sum is read from the rows themselves on every call
// (from an index that holds the cost), so it never lags a write. SUM of a
// BIGINT is a NUMERIC; the cast back answers an error, never a wrapped
// total, past the int64 range.
func (s *Store) RunTreeCost(ctx context.Context, org, rootRunID string) (int64, error) {
	var total int64
	err := s.pool.QueryRow(ctx, `SELECT COALESCE(SUM(cost_cents), 0)::BIGINT FROM usage
		WHERE organization_id = $1 AND root_run_id = $2`, org, rootRunID).Scan(&total)
	if err != nil {
		return 0, fmt.Errorf("run tree cost %s: %w", rootRunID, err)
	}
	return total, nil
}

// ToolUsage answers the count, the average and the largest cost of the
// newest usage rows (at most toolplane.MaxUsageSample) of the
// organization's tool since then, read from the index usage_by_tool. AVG
// of a BIGINT is a NUMERIC; an estimate needs no more than a float's
// precision.
func (s *Store) ToolUsage(ctx context.Context, org, tool string, since time.Time) (toolplane.UsageStats, error) {
	var st toolplane.UsageStats
	var calls int64
	err := s.pool.QueryRow(ctx, `SELECT COUNT(*), COALESCE(AVG(cost_cents), 0)::FLOAT8, COALESCE(MAX(cost_cents), 0) FROM (
		SELECT cost_cents FROM usage
		WHERE organization_id = $1 AND tool = $2 AND created_at >= $3
		ORDER BY created_at DESC LIMIT $4) AS newest`, org, tool, micros(since), toolplane.MaxUsageSample).Scan(&calls, &st.AverageCents, &st.MaxCents)
	if err != nil {
		return toolplane.UsageStats{}, fmt.Errorf("usage of %s: %w", tool, err)
	}
	st.Calls = int(calls)
	return st, nil
}
