package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/toolplane/toolplane"
)

// The maintenance reads and deletes below cross organizations on purpose:
// they are the background sweeps' own, never reachable from a request, and
// each is bounded by a limit.

// ExpiredClaims answers processing claims whose lease ended before before,
// oldest lease first.
func (s *Store) ExpiredClaims(ctx context.Context, before time.Time, limit int) ([]toolplane.Claim, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("expired claims: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+claimColumns+` FROM claims
		WHERE status = 'processing' AND lease_until < $1 ORDER BY lease_until LIMIT $2`, micros(before), limit)
	if err != nil {
		return nil, fmt.Errorf("expired claims: %w", err)
	}
	cs, err := collect(rows, scanClaim)
	if err != nil {
		return nil, fmt.Errorf("expired claims: %w", err)
	}
	return cs, nil
}

// DeleteCompletedClaims removes at most limit completed claims last updated
// before before, and answers how many it removed. The outer statement
// repeats the conditions: a row another node updates between the choice and
// the delete is re-checked as it is after that update, never deleted for
// what it was.
func (s *Store) DeleteCompletedClaims(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete completed claims: %w", err)
	}
	tag, err := s.pool.Exec(ctx, `DELETE FROM claims
		WHERE status = 'completed' AND updated_at < $1 AND (organization_id, tool, key) IN (
			SELECT organization_id, tool, key FROM claims
			WHERE status = 'completed' AND updated_at < $1 LIMIT $2)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete completed claims: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// ApprovedApprovals answers approvals resolved approved at or after since,
// oldest resolution first.
func (s *Store) ApprovedApprovals(ctx context.Context, since time.Time, limit int) ([]toolplane.Approval, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("approved approvals: %w", err)
	}
	rows, err := s.pool.Query(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE status = 'approved' AND resolved_at >= $1 ORDER BY resolved_at LIMIT $2`, micros(since), limit)
	if err != nil {
		return nil, fmt.Errorf("approved approvals: %w", err)
	}
	as, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("approved approvals: %w", err)
	}
	return as, nil
}
