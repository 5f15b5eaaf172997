package sqlite

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/auditchain"
)

// TestVerifyLongChainTampered: a chain long enough to be read in two
// halves at once is verified as one trail: an intact one holds, and a row
// changed or deleted on either side of where the halves meet (row 2,250 of
// 4,500) is named with its kind and position.
func TestVerifyLongChainTampered(t *testing.T) {
	t.Parallel()
	const n = 4500
	cases := []struct {
		name string
		sql  string
		kind auditchain.Kind
		seq  int64
	}{
		{"intact", "", "", 0},
		{"last of the first half deleted", `DELETE FROM audit_events WHERE seq = 2250`, auditchain.Deleted, 2250},
		{"first of the second half deleted", `DELETE FROM audit_events WHERE seq = 2251`, auditchain.Deleted, 2251},
		{"changed late", `UPDATE audit_events SET outcome = 'denied' WHERE seq = 4499`, auditchain.Changed, 4499},
		// A policy input that no longer reads back as a packed document
		// (a marker byte and a cut-short digest) is a changed row, not a
		// failed read.
		{"packed policy input damaged", `UPDATE audit_events SET policy_input = X'1F01' WHERE seq = 3000`, auditchain.Changed, 3000},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newTestStore(t)
			now := time.Now()
			for i := 0; i < n; i += 500 {
				evs := make([]*toolplane.AuditEvent, 500)
				for j := range evs {
					evs[j] = &toolplane.AuditEvent{ID: "ev-" + strconv.Itoa(i+j), OrganizationID: "org-1", RunID: "run-1",
						Tool: "payments.refund_order", Source: toolplane.SourceMCP, Outcome: "ok",
						CreatedAt: now.Add(time.Duration(i+j) * time.Microsecond)}
				}
				if err := s.AppendAuditBatch(t.Context(), evs); err != nil {
					t.Fatal(err)
				}
			}
			if c.sql != "" {
				for _, q := range []string{`DROP TRIGGER audit_events_no_update`, `DROP TRIGGER audit_events_no_delete`, c.sql} {
					if _, err := s.db.ExecContext(t.Context(), q); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
			}
			r, err := auditchain.VerifyStore(t.Context(), s, &auditchain.KeySet{}, "org-1", 0, 0)
			if err != nil {
				t.Fatal(err)
			}
			// Whatever was done to a row, the trail around it still lists.
			if _, _, err := s.ListAudit(t.Context(), "org-1", toolplane.AuditFilter{RunID: "run-1"}, "", 1000); err != nil {
				t.Fatalf("list after %q: %v", c.name, err)
			}
			got := "ok"
			if r.Break != nil {
				got = fmt.Sprintf("%s at %d", r.Break.Kind, r.Break.Seq)
			}
			want := "ok"
			if c.kind != "" {
				want = fmt.Sprintf("%s at %d", c.kind, c.seq)
			}
			if got != want || (c.kind == "" && r.Events != n) {
				t.Fatalf("verify = %s (%d events), want %s", got, r.Events, want)
			}
		})
	}
}

// TestChainHintNeverTakenOnTrust: where a store last chained an
// organization is only a hint. Another store on the same database (a
// second process) moving the chain, and a batch rolled back after its
// first event was chained, leave the hint behind; the next event still
// follows the chain's real head, with no gap and no number twice.
func TestChainHintNeverTakenOnTrust(t *testing.T) {
	t.Parallel()
	a := newTestStore(t)
	b := New(a.db)
	now := time.Now()
	n := 0
	event := func() *toolplane.AuditEvent {
		n++
		return &toolplane.AuditEvent{ID: "ev-" + strconv.Itoa(n), OrganizationID: "org-1", Tool: "crm.update",
			Outcome: "ok", CreatedAt: now.Add(time.Duration(n) * time.Second)}
	}
	for i, s := range []*Store{a, b, a, a, b, a} {
		e := event()
		if err := s.AppendAudit(t.Context(), e); err != nil {
			t.Fatal(err)
		}
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d numbered %d", i+1, e.Seq)
		}
	}
	// A batch whose second event is refused: the first, chained at 7, is
	// rolled back with it.
	dup := event()
	dup.ID = "ev-1"
	if err := a.AppendAuditBatch(t.Context(), []*toolplane.AuditEvent{event(), dup}); err == nil {
		t.Fatal("a batch with a duplicate ID was stored")
	}
	e := event()
	if err := a.AppendAudit(t.Context(), e); err != nil || e.Seq != 7 {
		t.Fatalf("after the rolled-back batch: seq %d, %v; want 7", e.Seq, err)
	}
	r, err := auditchain.VerifyStore(t.Context(), a, &auditchain.KeySet{}, "org-1", 0, 0)
	if err != nil || !r.OK || r.Events != 7 {
		t.Fatalf("verify = %+v (break %+v), %v", r, r.Break, err)
	}
}

// TestChainTextWithNUL: an event whose text holds a NUL byte (which the
// chain's cheaper packing cannot tell from its separator) is read as
// GetAudit reads it, and its chain verifies; the NUL moved into another
// column would not.
func TestChainTextWithNUL(t *testing.T) {
	t.Parallel()
	s := newTestStore(t)
	ctx := t.Context()
	now := time.Now()
	evs := []*toolplane.AuditEvent{
		{ID: "ev-1", OrganizationID: "org-1", Tool: "demo.noop", Outcome: "ok", CreatedAt: now},
		{ID: "ev-2", OrganizationID: "org-1", Tool: "demo.noop", Outcome: "ok", Reason: "a\x00b", Subject: "\x00", CreatedAt: now},
		{ID: "ev-3", OrganizationID: "org-1", Tool: "demo.noop", Outcome: "ok", CreatedAt: now},
	}
	for _, e := range evs {
		if err := s.AppendAudit(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	chain, err := s.AuditChain(ctx, "org-1", 1, 0, 10)
	if err != nil || len(chain) != 3 {
		t.Fatalf("AuditChain = %d events, %v", len(chain), err)
	}
	for _, e := range chain {
		got, err := s.GetAudit(ctx, "org-1", e.ID)
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprintf("%+v", *got) != fmt.Sprintf("%+v", e) {
			t.Fatalf("AuditChain's %s =\n%+v\nGetAudit's =\n%+v", e.ID, e, *got)
		}
	}
	if chain[1].Reason != "a\x00b" || chain[1].Subject != "\x00" {
		t.Fatalf("reason %q, subject %q", chain[1].Reason, chain[1].Subject)
	}
	if r, err := auditchain.VerifyStore(ctx, s, &auditchain.KeySet{}, "org-1", 0, 0); err != nil || !r.OK || r.Events != 3 {
		t.Fatalf("verify = %+v (break %+v), %v", r, r.Break, err)
	}
	for _, q := range []string{`DROP TRIGGER audit_events_no_update`, `UPDATE audit_events SET reason = 'a', subject = 'b' || char(0) || char(0) WHERE id = 'ev-2'`} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if r, err := auditchain.VerifyStore(ctx, s, &auditchain.KeySet{}, "org-1", 0, 0); err != nil || r.OK || r.Break.Kind != auditchain.Changed || r.Break.Seq != 2 {
		t.Fatalf("verify = %+v (break %+v), %v; want changed at 2", r, r.Break, err)
	}
}
