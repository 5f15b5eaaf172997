package sqlite

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
	rows, err := s.query(ctx, `SELECT `+claimSelect+` FROM claims
		WHERE status = 'processing' AND lease_until < ? ORDER BY lease_until LIMIT ?`, micros(before), limit)
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
// before before, and answers how many it removed.
func (s *Store) DeleteCompletedClaims(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := checkLimit(limit); err != nil {
		return 0, fmt.Errorf("delete completed claims: %w", err)
	}
	res, err := s.exec(ctx, `DELETE FROM claims WHERE rowid IN (
		SELECT rowid FROM claims WHERE status = 'completed' AND updated_at < ? LIMIT ?)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("delete completed claims: %w", err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete completed claims: %w", err)
	}
	return int(n), nil
}

// ApprovedApprovals answers approvals resolved approved at or after since,
// oldest resolution first.
func (s *Store) ApprovedApprovals(ctx context.Context, since time.Time, limit int) ([]toolplane.Approval, error) {
	if err := checkLimit(limit); err != nil {
		return nil, fmt.Errorf("approved approvals: %w", err)
	}
	rows, err := s.query(ctx, `SELECT `+approvalColumns+` FROM approvals
		WHERE status = 'approved' AND resolved_at >= ? ORDER BY resolved_at LIMIT ?`, micros(since), limit)
	if err != nil {
		return nil, fmt.Errorf("approved approvals: %w", err)
	}
	as, err := collect(rows, scanApproval)
	if err != nil {
		return nil, fmt.Errorf("approved approvals: %w", err)
	}
	return as, nil
}
