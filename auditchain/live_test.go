package auditchain_test

import (
	"context"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// appendingStore appends one event of its organization right after the
// first head it answers, as a live trail does while a verification reads.
type appendingStore struct {
	*sqlite.Store
	ev *toolplane.AuditEvent
}

func (s *appendingStore) AuditHead(ctx context.Context, org string) (toolplane.AuditHead, int64, error) {
	h, first, err := s.Store.AuditHead(ctx, org)
	if s.ev != nil {
		ev := s.ev
		s.ev = nil
		if err := s.AppendAudit(ctx, ev); err != nil {
			return h, first, err
		}
	}
	return h, first, err
}

// TestVerifyWhileAppending: an event appended between reading the chain's
// head and reading its events is the chain's, not an insertion.
func TestVerifyWhileAppending(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := sqlitetest.New(t)
	for i := range 3 {
		if err := s.AppendAudit(ctx, &toolplane.AuditEvent{ID: "ev-" + string(rune('a'+i)), OrganizationID: "org-1", Tool: "demo.noop", Outcome: "ok", CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
	}
	live := &appendingStore{Store: s, ev: &toolplane.AuditEvent{ID: "ev-late", OrganizationID: "org-1", Tool: "demo.noop", Outcome: "ok", CreatedAt: time.Now()}}
	r, err := auditchain.VerifyStore(ctx, live, &auditchain.KeySet{}, "org-1", 0, 0)
	if err != nil || !r.OK || r.Events != 4 {
		t.Fatalf("verify while appending = %+v (break %+v), %v; want OK over 4 events", r, r.Break, err)
	}
}
