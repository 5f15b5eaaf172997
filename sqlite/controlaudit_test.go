package sqlite

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane/storetest"
)

// TestControlAuditRefused: when SQLite refuses an organization's events
// (a trigger on the chained table), no audited control-plane write of it
// stores anything.
func TestControlAuditRefused(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	var n atomic.Int64
	storetest.RunAuditRefused(t, s, func(t *testing.T, org string) {
		_, err := s.db.ExecContext(t.Context(), fmt.Sprintf(`CREATE TRIGGER refuse_%d BEFORE INSERT ON audit_events
			WHEN NEW.organization_id = '%s'
			BEGIN SELECT RAISE(ABORT, 'the chain refuses this organization'); END`, n.Add(1), org))
		if err != nil {
			t.Fatal(err)
		}
	})
}
