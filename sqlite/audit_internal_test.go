package sqlite

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// A batch is stored whole or not at all: a duplicate anywhere in it stores
// none of it.
func TestAppendAuditBatch(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Now()
	event := func(id string, i int) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{ID: id, OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1", Tool: "crm.lookup",
			ToolVersion: "1.0.0", Source: toolplane.SourceREST, Outcome: "ok", LatencyMicros: int64(i), CreatedAt: now.Add(time.Duration(i) * time.Millisecond)}
	}
	count := func() int {
		t.Helper()
		evs, _, err := s.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 1000)
		if err != nil {
			t.Fatal(err)
		}
		return len(evs)
	}
	var batch []*toolplane.AuditEvent
	for i := range 41 {
		batch = append(batch, event(fmt.Sprintf("ev-%03d", i), i))
	}
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != len(batch) {
		t.Fatalf("%d events stored of %d", n, len(batch))
	}
	got, _, _ := s.ListAudit(ctx, "org-1", toolplane.AuditFilter{}, "", 1)
	if len(got) != 1 || got[0].ID != batch[len(batch)-1].ID || got[0].LatencyMicros != int64(len(batch)-1) {
		t.Errorf("newest event %+v", got)
	}

	again := []*toolplane.AuditEvent{event("ev-new-1", 100), event("ev-new-2", 101), event("ev-005", 102)}
	for i := range 32 {
		again = append(again, event(fmt.Sprintf("ev-more-%03d", i), 200+i))
	}
	if err := s.AppendAuditBatch(ctx, again); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("a batch with a duplicate: %v", err)
	}
	if n := count(); n != len(batch) {
		t.Fatalf("a failed batch stored %d events", n-len(batch))
	}
}
