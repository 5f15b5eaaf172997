package sqlite

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
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

// Rows of a batch share one argument slice, and events stored one by one
// share the store's (see auditArgs): each row is stored with its own
// values, whether a field matches the row before it, changes, or goes back
// to an earlier row's value or to empty, and an event refused (a
// duplicate) leaves nothing behind for the next.
func TestAppendAuditRowsKeepTheirValues(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		store func(*testing.T, *Store, []*toolplane.AuditEvent)
	}{
		{"batch", func(t *testing.T, s *Store, batch []*toolplane.AuditEvent) {
			if err := s.AppendAuditBatch(t.Context(), batch); err != nil {
				t.Fatal(err)
			}
		}},
		{"alone", func(t *testing.T, s *Store, batch []*toolplane.AuditEvent) {
			for i, e := range batch {
				if err := s.AppendAudit(t.Context(), e); err != nil {
					t.Fatal(err)
				}
				if e.Seq != int64(i+1) {
					t.Fatalf("%s numbered %d, want %d", e.ID, e.Seq, i+1)
				}
				// A duplicate of it, every other field another value, is
				// refused between each event and the next.
				dup := *batch[(i+2)%len(batch)]
				dup.ID, dup.Seq, dup.PrevHash, dup.Hash = e.ID, 0, nil, nil
				if err := s.AppendAudit(t.Context(), &dup); !errors.Is(err, toolplane.ErrExists) {
					t.Fatalf("a duplicate of %s: %v", e.ID, err)
				}
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t)
			batch := rowsOfEveryShape()
			tc.store(t, s, batch)
			for _, want := range batch {
				got, err := s.GetAudit(t.Context(), want.OrganizationID, want.ID)
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
		})
	}
}

// rowsOfEveryShape answers events of one organization whose fields repeat,
// change, go back to earlier values and to empty from one to the next.
func rowsOfEveryShape() []*toolplane.AuditEvent {
	now := time.Now().Truncate(time.Microsecond)
	full := &toolplane.AuditEvent{ID: "ev-1", OrganizationID: "org-1", RunID: "run-1", AgentID: "agent-1",
		PrincipalID: "principal-1", UserID: "user-1", Tool: "crm.lookup", ToolVersion: "1.0.0", Source: toolplane.SourceMCP,
		Outcome: "ok", ArgumentsHash: "sha256:1", Key: "key-1", Reason: "a reason", ApprovalID: "apr-1", AuthorizedBy: "apr-0",
		ConnectionID: "con-1", PolicyDecision: "allow", PolicyBundle: 7, PolicyRule: "rule-1", PolicyDegraded: true,
		PolicyInput: []byte(`{"tool":"crm.lookup"}`), Replayed: true, LatencyMicros: 1234, CreatedAt: now,
		Kind: toolplane.AuditApproval, Subject: "apr-1", TenantID: "acme", StepPath: "0/2", KeyID: "key_1",
		Effect: toolplane.EffectWrite, Destructive: true, TraceID: "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID: "00f067aa0ba902b7", ApproverID: "person-jane", Arguments: []byte(`{"amount_cents":50001}`),
		PIIFields: []string{"customer.email"}, Classifications: []string{"pii"}, OutputHash: "sha256:9f86",
		CostCents: 42, Attempts: 2}
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
	// Nothing but what an event must hold.
	bare := &toolplane.AuditEvent{ID: "ev-5", OrganizationID: "org-1", CreatedAt: now.Add(4 * time.Microsecond)}
	return []*toolplane.AuditEvent{full, &same, other, &again, bare}
}

// An empty text is bound as NULL (setText) and stored as the ” it is:
// every text column of an event holding nothing but its id, organization
// and time is a text, and empty, stored alone or in a batch; and only a
// text argument (textArgs) or a document is ever bound as NULL.
func TestAuditEmptyTextsStoredAsText(t *testing.T) {
	t.Parallel()
	cols := strings.Split(auditColumns, ",")
	args := make([]any, chainArgCount)
	setAuditArgs(args, rowsOfEveryShape()[4])
	for i, a := range args[:auditArgCount] {
		if a == nil && !textArgs[i] && i != argPolicyInput && i != argArguments {
			t.Errorf("argument %d (%s) bound as NULL", i, strings.TrimSpace(cols[i]))
		}
	}
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Now()
	bare := func(id string) *toolplane.AuditEvent {
		return &toolplane.AuditEvent{ID: id, OrganizationID: "org-1", CreatedAt: now}
	}
	if err := s.AppendAudit(ctx, bare("ev-alone")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAudit(ctx, bare("ev-alone-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendAuditBatch(ctx, []*toolplane.AuditEvent{bare("ev-batch-1"), bare("ev-batch-2")}); err != nil {
		t.Fatal(err)
	}
	for i, text := range textArgs {
		if !text || i == 1 {
			continue
		}
		col := strings.TrimSpace(cols[i])
		var n int
		if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM audit_events WHERE typeof(`+col+`) = 'text' AND `+col+` = ''`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if n != 4 {
			t.Errorf("%s: %d of 4 events hold ''", col, n)
		}
	}
}

// Events of more shapes than the store makes statements for (auditShape,
// maxAuditShapes), stored in a batch and alone, mixed from one event to
// the next, each read back as it was, and the chain verifies.
func TestAuditShapesPastTheirBound(t *testing.T) {
	t.Parallel()
	now := time.Now().Truncate(time.Microsecond)
	events := func(prefix string) []*toolplane.AuditEvent {
		var out []*toolplane.AuditEvent
		for i := range 2 * maxAuditShapes {
			e := &toolplane.AuditEvent{ID: fmt.Sprintf("%s-%03d", prefix, i), OrganizationID: "org-1", RunID: "run-1",
				AgentID: "agent-1", Tool: "crm.lookup", Outcome: "ok", CreatedAt: now.Add(time.Duration(i) * time.Microsecond)}
			// Seven fields set or empty by the bits of i: 128 shapes.
			if i&1 != 0 {
				e.UserID = "user-1"
			}
			if i&2 != 0 {
				e.ApprovalID = "apr-1"
			}
			if i&4 != 0 {
				e.Reason = "a reason"
			}
			if i&8 != 0 {
				e.Destructive = true
			}
			if i&16 != 0 {
				e.CostCents = 42
			}
			if i&32 != 0 {
				e.PolicyInput = []byte(`{"tool":"crm.lookup"}`)
			}
			if i&64 != 0 {
				e.Attempts = 2
			}
			out = append(out, e)
		}
		return out
	}
	s := newTestStore(t)
	ctx := t.Context()
	batch, alone := events("batch"), events("alone")
	if err := s.AppendAuditBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	for _, e := range alone {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range append(batch, alone...) {
		got, err := s.GetAudit(ctx, want.OrganizationID, want.ID)
		if err != nil {
			t.Fatal(err)
		}
		got.CreatedAt = want.CreatedAt
		if !reflect.DeepEqual(*got, *want) {
			t.Errorf("%s stored as\n%+v\nwant\n%+v", want.ID, *got, *want)
		}
	}
	if n := len(s.auditShapes.m); n != maxAuditShapes {
		t.Errorf("%d statements made for shapes, want %d", n, maxAuditShapes)
	}
	r, err := auditchain.VerifyStore(ctx, s, &auditchain.KeySet{}, "org-1", 0, 0)
	if err != nil || !r.OK || r.Events != 4*maxAuditShapes {
		t.Fatalf("verify = %+v, %v", r, err)
	}
}
