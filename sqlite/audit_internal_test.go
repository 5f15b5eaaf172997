package sqlite

import (
	"errors"
	"fmt"
	"reflect"
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

// Rows of a batch share one argument slice: each row is stored with its
// own values, whether a field matches the row before it, changes, or goes
// back to an earlier row's value or to empty.
func TestAppendAuditBatchRowsKeepTheirValues(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Now().Truncate(time.Microsecond)
	full := &toolplane.AuditEvent{ID: "ev-1", OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1",
		PrincipalID: "principal-1", UserID: "user-1", Tool: "crm.lookup", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
		Outcome: "ok", ArgumentsHash: "sha256:1", Key: "key-1", Reason: "a reason", ApprovalID: "apr-1", AuthorizedBy: "apr-0",
		ConnectionID: "con-1", PolicyDecision: "allow", PolicyBundle: 7, PolicyRule: "rule-1", PolicyDegraded: true,
		PolicyInput: []byte(`{"tool":"crm.lookup"}`), Replayed: true, LatencyMicros: 1234, CreatedAt: now}
	// The same but for its id and time: every other argument is kept.
	same := *full
	same.ID, same.CreatedAt = "ev-2", now.Add(time.Microsecond)
	// Every field another value, or empty.
	other := &toolplane.AuditEvent{ID: "ev-3", OrganizationID: "org-1", RunID: "run-2", AgentID: "agent-2",
		PrincipalID: "principal-2", Tool: "crm.update", ToolVersion: "1.0.1", Source: toolplane.SourceREST,
		Outcome: "denied", ArgumentsHash: "sha256:3", PolicyBundle: 8, LatencyMicros: 7, CreatedAt: now.Add(2 * time.Microsecond)}
	// Back to the first event's values.
	again := *full
	again.ID, again.CreatedAt = "ev-4", now.Add(3*time.Microsecond)
	batch := []*toolplane.AuditEvent{full, &same, other, &again}
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, want := range batch {
		got, err := s.GetAudit(ctx, want.OrganizationID, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !got.CreatedAt.Equal(want.CreatedAt) {
			t.Errorf("%s: created at %v, want %v", want.ID, got.CreatedAt, want.CreatedAt)
		}
		got.CreatedAt = want.CreatedAt
		if !reflect.DeepEqual(*got, *want) {
			t.Errorf("%s stored as\n%+v\nwant\n%+v", want.ID, *got, *want)
		}
	}
}
