package storetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var auditCases = []suiteCase{
	{"AppendRoundTrip", testAuditAppendRoundTrip},
	{"AppendDuplicate", testAuditAppendDuplicate},
	{"ListNewestFirst", testAuditListNewestFirst},
	{"ListFilter", testAuditListFilter},
	{"Get", testAuditGet},
	{"PagingUnderConcurrentAppends", testAuditPagingUnderConcurrentAppends},
}

// fullEvent answers an audit event with every field set.
func fullEvent(org, id string, created time.Time) *toolplane.AuditEvent {
	return &toolplane.AuditEvent{
		ID:              id,
		OrganizationID:  org,
		RunID:           "run-1",
		AgentID:         "agent-billing",
		PrincipalID:     "principal-7",
		UserID:          "user-ada",
		Tool:            "payments.refund_order",
		ToolVersion:     "2.1.0",
		Source:          toolplane.SourceMCP,
		Outcome:         "ok",
		ArgumentsHash:   "sha256:" + id,
		Key:             "k\x00\xff" + id,
		Reason:          "the worker running the call was lost",
		ApprovalID:      "apr-1",
		AuthorizedBy:    "apr-0",
		ConnectionID:    "con-1",
		ParentID:        "aud_parent-" + id,
		PolicyDecision:  "require_approval",
		PolicyBundle:    7,
		PolicyRule:      "refunds-over-500",
		PolicyDegraded:  true,
		PolicyInput:     []byte(`{"arguments":{"amount_cents":50001},"tool":{"name":"payments.refund_order"}}`),
		Replayed:        true,
		LatencyMicros:   1_234_567,
		CreatedAt:       created,
		Kind:            toolplane.AuditApproval,
		Subject:         "apr-1",
		TenantID:        "acme",
		StepPath:        "0/2",
		KeyID:           "key_1",
		Effect:          toolplane.EffectWrite,
		Destructive:     true,
		TraceID:         "4bf92f3577b34da6a3ce929d0e0e4736",
		SpanID:          "00f067aa0ba902b7",
		ApproverID:      "person-jane",
		Arguments:       []byte(`{"amount_cents":50001,"card":"[sensitive]"}`),
		PIIFields:       []string{"customer.email", "card"},
		Classifications: []string{"pii", "financial"},
		OutputHash:      "sha256:9f86d081884c7d65",
		CostCents:       42,
		Attempts:        2,
	}
}

func appendAudit(t *testing.T, s toolplane.Store, e *toolplane.AuditEvent) {
	t.Helper()
	if err := s.AppendAudit(t.Context(), e); err != nil {
		t.Fatalf("AppendAudit(%s) = %v", e.ID, err)
	}
}

// compareEvents is the audit order: newest first, ties by ID descending.
func compareEvents(a, b toolplane.AuditEvent) int {
	if c := stored(b.CreatedAt).Compare(stored(a.CreatedAt)); c != 0 {
		return c
	}
	return strings.Compare(b.ID, a.ID)
}

// listAudit pages through every matching event.
func listAudit(t *testing.T, s toolplane.Store, org string, f toolplane.AuditFilter, limit int) []toolplane.AuditEvent {
	t.Helper()
	return pageAll(t, "ListAudit", limit, nil, func(after string) ([]toolplane.AuditEvent, string, error) {
		return s.ListAudit(t.Context(), org, f, after, limit)
	})
}

func wantEvents(t *testing.T, got, want []toolplane.AuditEvent) {
	t.Helper()
	wantRows(t, "ListAudit", got, want, func(e toolplane.AuditEvent) string { return e.ID })
}

func testAuditAppendRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	full := fullEvent(org, "ev-full", at(time.Second))
	zero := &toolplane.AuditEvent{ID: "ev-zero", OrganizationID: org, CreatedAt: base}
	appendAudit(t, s, zero)
	appendAudit(t, s, full)
	got, next, err := s.ListAudit(t.Context(), org, toolplane.AuditFilter{}, "", 10)
	if err != nil || next != "" {
		t.Fatalf("ListAudit = %v, next %q; want nil, no next cursor", err, next)
	}
	wantEvents(t, got, []toolplane.AuditEvent{*full, *zero})
}

func testAuditAppendDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullEvent(org, "ev-1", base)
	appendAudit(t, s, first)
	dup := fullEvent(org, "ev-1", at(time.Hour))
	dup.Outcome = "denied"
	if err := s.AppendAudit(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second AppendAudit(ev-1) = %v, want ErrExists", err)
	}
	wantEvents(t, listAudit(t, s, org, toolplane.AuditFilter{}, 10), []toolplane.AuditEvent{*first})
}

// seedEvents appends n events out of order, with CreatedAt ties (some only at
// microsecond precision) that the ID must break, and answers them in list
// order.
func seedEvents(t *testing.T, s toolplane.Store, org string, n int) []toolplane.AuditEvent {
	t.Helper()
	all := make([]toolplane.AuditEvent, n)
	for i := range n {
		created := at(time.Duration(i/3) * time.Second)
		if i%3 == 1 {
			created = stored(created).Add(300 * time.Nanosecond)
		}
		all[i] = *fullEvent(org, fmt.Sprintf("ev-%03d", (i*37)%n), created)
	}
	for _, i := range shuffled(n) {
		appendAudit(t, s, &all[i])
	}
	slices.SortFunc(all, compareEvents)
	return all
}

func testAuditListNewestFirst(t *testing.T, s toolplane.Store) {
	org := newOrg()
	want := seedEvents(t, s, org, 40)
	for _, limit := range []int{maxLimit, 40, 39, 6, 1} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			wantEvents(t, listAudit(t, s, org, toolplane.AuditFilter{}, limit), want)
		})
	}
}

func testAuditListFilter(t *testing.T, s toolplane.Store) {
	org := newOrg()
	var all []toolplane.AuditEvent
	i := 0
	for _, run := range []string{"run-1", "run-2"} {
		for _, agent := range []string{"agent-a", "agent-b"} {
			for _, tool := range []string{"crm.read", "crm.write"} {
				for _, outcome := range []string{"ok", "denied", "approval_required"} {
					// Some events only a microsecond apart, so a time
					// bound is exact to the microsecond.
					e := fullEvent(org, fmt.Sprintf("ev-%02d", i), at(time.Duration(i%5)*time.Second+time.Duration(i%2)*time.Microsecond))
					e.RunID, e.AgentID, e.Tool, e.Outcome = run, agent, tool, outcome
					e.UserID = []string{"user-ada", "user-bob", ""}[i%3]
					e.ApprovalID = []string{"apr_1", "", "apr_2", ""}[i%4]
					appendAudit(t, s, e)
					all = append(all, *e)
					i++
				}
			}
		}
	}
	slices.SortFunc(all, compareEvents)

	tests := []struct {
		name   string
		filter toolplane.AuditFilter
	}{
		{"empty matches all", toolplane.AuditFilter{}},
		{"run", toolplane.AuditFilter{RunID: "run-2"}},
		{"agent", toolplane.AuditFilter{AgentID: "agent-a"}},
		{"tool", toolplane.AuditFilter{Tool: "crm.write"}},
		{"outcome", toolplane.AuditFilter{Outcome: "denied"}},
		{"run and outcome", toolplane.AuditFilter{RunID: "run-1", Outcome: "approval_required"}},
		{"every field", toolplane.AuditFilter{RunID: "run-1", AgentID: "agent-b", Tool: "crm.read", Outcome: "ok"}},
		{"no match", toolplane.AuditFilter{RunID: "run-3"}},
		{"no combination", toolplane.AuditFilter{Tool: "crm.read", Outcome: "ok", AgentID: "agent-c"}},
		{"user", toolplane.AuditFilter{UserID: "user-bob"}},
		{"user and tool", toolplane.AuditFilter{UserID: "user-ada", Tool: "crm.write"}},
		{"approval", toolplane.AuditFilter{ApprovalID: "apr_2"}},
		{"run and approval", toolplane.AuditFilter{RunID: "run-1", ApprovalID: "apr_1"}},
		{"any of outcomes", toolplane.AuditFilter{Outcomes: []string{"denied", "approval_required"}}},
		{"one of outcomes", toolplane.AuditFilter{Outcomes: []string{"denied"}, AgentID: "agent-b"}},
		{"outcome and outcomes", toolplane.AuditFilter{Outcome: "ok", Outcomes: []string{"denied"}}},
		{"since", toolplane.AuditFilter{Since: at(3 * time.Second)}},
		{"since a microsecond", toolplane.AuditFilter{Since: at(2*time.Second + time.Microsecond)}},
		{"until", toolplane.AuditFilter{Until: at(2 * time.Second)}},
		{"until a microsecond", toolplane.AuditFilter{Until: at(time.Second + time.Microsecond)}},
		{"between", toolplane.AuditFilter{Since: at(time.Second), Until: at(3 * time.Second), Tool: "crm.read"}},
		{"empty range", toolplane.AuditFilter{Since: at(3 * time.Second), Until: at(3 * time.Second)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []toolplane.AuditEvent
			for _, e := range all {
				f, when := tt.filter, stored(e.CreatedAt)
				if (f.RunID == "" || f.RunID == e.RunID) && (f.AgentID == "" || f.AgentID == e.AgentID) &&
					(f.UserID == "" || f.UserID == e.UserID) && (f.Tool == "" || f.Tool == e.Tool) &&
					(f.Outcome == "" || f.Outcome == e.Outcome) && (f.ApprovalID == "" || f.ApprovalID == e.ApprovalID) && (len(f.Outcomes) == 0 || slices.Contains(f.Outcomes, e.Outcome)) &&
					(f.Since.IsZero() || !when.Before(stored(f.Since))) && (f.Until.IsZero() || when.Before(stored(f.Until))) {
					want = append(want, e)
				}
			}
			if len(want) == 0 && !strings.HasPrefix(tt.name, "no ") && tt.name != "empty range" && tt.name != "outcome and outcomes" {
				t.Fatalf("the case matches nothing: it tests nothing")
			}
			wantEvents(t, listAudit(t, s, org, tt.filter, 5), want)
		})
	}
}

func testAuditPagingUnderConcurrentAppends(t *testing.T, s toolplane.Store) {
	org := newOrg()
	seeded := seedEvents(t, s, org, 120)

	// While one reader pages, writers append events both newer than every
	// seeded one (the usual case) and older (a late clock): neither may make
	// the reader skip or repeat a row.
	done := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			// Bounded, so older events cannot outpace the reader forever.
			for n := range 150 {
				select {
				case <-done:
					return
				default:
				}
				created := at(time.Hour + time.Duration(n)*time.Millisecond)
				if n%2 == 1 {
					created = at(-time.Hour - time.Duration(n)*time.Millisecond)
				}
				if err := s.AppendAudit(t.Context(), fullEvent(org, fmt.Sprintf("ev-w%d-%05d", w, n), created)); err != nil {
					t.Errorf("AppendAudit = %v", err)
					return
				}
			}
		})
	}
	got := listAudit(t, s, org, toolplane.AuditFilter{}, 7)
	close(done)
	wg.Wait()

	seen := make(map[string]int)
	for i, e := range got {
		seen[e.ID]++
		if i > 0 && compareEvents(got[i-1], e) >= 0 {
			t.Errorf("row %d (%s) does not follow row %d (%s)", i, e.ID, i-1, got[i-1].ID)
		}
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("event %s listed %d times", id, k)
		}
	}
	for _, e := range seeded {
		if seen[e.ID] != 1 {
			t.Errorf("event %s skipped", e.ID)
		}
	}
}

func testAuditGet(t *testing.T, s toolplane.Store) {
	org := newOrg()
	full := fullEvent(org, "ev-full", at(time.Second))
	zero := &toolplane.AuditEvent{ID: "ev-zero", OrganizationID: org, CreatedAt: base}
	appendAudit(t, s, full)
	appendAudit(t, s, zero)
	for _, want := range []*toolplane.AuditEvent{full, zero} {
		got, err := s.GetAudit(t.Context(), org, want.ID)
		if err != nil {
			t.Fatalf("GetAudit(%s) = %v", want.ID, err)
		}
		wantEvents(t, []toolplane.AuditEvent{*got}, []toolplane.AuditEvent{*want})
	}
	for _, id := range []string{"ev-none", "", "ev-\x00", "\xff"} {
		if _, err := s.GetAudit(t.Context(), org, id); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("GetAudit(%q) = %v, want ErrNotFound", id, err)
		}
	}
}
