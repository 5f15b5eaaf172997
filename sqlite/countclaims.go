package sqlite

import (
	"context"
	"fmt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/sqlstore"
)

// CountClaims answers how many claims are in status, by organization
// (toolplane.ClaimCounter): the uncertain actions open, for the metrics.
func (s *Store) CountClaims(ctx context.Context, status toolplane.ClaimStatus) (map[string]int, error) {
	rows, err := s.query(ctx, `SELECT organization_id, COUNT(*) FROM claims WHERE status = ?`+sqlstore.OpenClaims(status)+`
		GROUP BY organization_id`, string(status))
	if err != nil {
		return nil, fmt.Errorf("count claims: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var org string
		var n int
		if err := rows.Scan(&org, &n); err != nil {
			return nil, fmt.Errorf("count claims: %w", err)
		}
		out[org] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count claims: %w", err)
	}
	return out, nil
}
