package sqlstore

import (
	"fmt"

	"github.com/toolplane/toolplane"
)

// FirstChained reads the organization's first stored chained event (NULL
// when none is), what a drop checks its range still starts at.
const FirstChained = `SELECT MIN(seq) FROM audit_events WHERE organization_id = ? AND seq > 0`

// DroppedMeanwhile answers the refusal of toolplane.AuditChainStore's
// DropAudit when the range, read to start at from, starts elsewhere in the
// drop's transaction (first: the first stored chained event, nil when
// none is): another drop took its start meanwhile, and this one would
// drop or record part of that range again. It wraps toolplane.ErrConflict.
func DroppedMeanwhile(from int64, first *int64) error {
	if first != nil && *first == from {
		return nil
	}
	now := "nothing is stored"
	if first != nil {
		now = fmt.Sprintf("the first stored event is %d", *first)
	}
	return fmt.Errorf("the range from %d was dropped meanwhile (%s): %w", from, now, toolplane.ErrConflict)
}
