package sqlstore

import (
	"fmt"

	"github.com/toolplane/toolplane"
)

// countBounded answers the statement counting the rows of table where
// organization_id and status are as given, at most limit of them: the
// inner LIMIT keeps the read to limit index entries however many match.
// and is the query's further condition, "" or one that begins " AND".
func countBounded(d Dialect, table, org, status, and string, limit int) (*Query, error) {
	if limit < 1 {
		return nil, fmt.Errorf("%w: a count's bound must be positive, not %d", toolplane.ErrInvalid, limit)
	}
	return New(d, `SELECT COUNT(*) FROM (SELECT 1 FROM `+table+` WHERE organization_id = ? AND status = ?`+and+` LIMIT ?) AS bounded`, org, status, limit), nil
}

// CountOrgClaims is the bounded count of an organization's claims in
// status (toolplane.OrgClaimCounter), over the claims_by_status index
// (see OpenClaims).
func CountOrgClaims(d Dialect, org string, status toolplane.ClaimStatus, limit int) (*Query, error) {
	return countBounded(d, "claims", org, string(status), OpenClaims(status), limit)
}

// CountAnomalies is the bounded count of an organization's items in
// status, over the anomalies_by_status index.
func CountAnomalies(d Dialect, org string, status toolplane.AnomalyStatus, limit int) (*Query, error) {
	return countBounded(d, "anomalies", org, string(status), "", limit)
}
