package sqlite

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// CountOrgClaims implements toolplane.OrgClaimCounter.
func (s *Store) CountOrgClaims(ctx context.Context, org string, status toolplane.ClaimStatus, limit int) (int, error) {
	q, err := sqlstore.CountOrgClaims(dialect, org, status, limit)
	return s.countBounded(ctx, "count claims", q, err)
}

// CountAnomalies implements toolplane.AnomalyStore.
func (s *Store) CountAnomalies(ctx context.Context, org string, status toolplane.AnomalyStatus, limit int) (int, error) {
	q, err := sqlstore.CountAnomalies(dialect, org, status, limit)
	return s.countBounded(ctx, "count anomalies", q, err)
}

// countBounded runs a bounded count q (op names it in an error).
func (s *Store) countBounded(ctx context.Context, op string, q *sqlstore.Query, err error) (int, error) {
	if err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	var n int
	if q.Unbindable() {
		return 0, nil // no stored row holds a string SQLite cannot bind
	}
	if err := s.queryRow(ctx, q.String(), q.Args()...).Scan(&n); err != nil {
		return 0, fmt.Errorf("%s: %w", op, err)
	}
	return n, nil
}
