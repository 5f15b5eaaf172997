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

var approvalCases = []suiteCase{
	{"InsertDuplicate", testApprovalInsertDuplicate},
	{"GetRoundTrip", testApprovalGetRoundTrip},
	{"GetMissing", testApprovalGetMissing},
	{"UpdateCompareAndSwap", testApprovalUpdateCompareAndSwap},
	{"UpdateMissing", testApprovalUpdateMissing},
	{"FindNewestFirst", testApprovalFindNewestFirst},
	{"FindOpenAcrossRuns", testApprovalFindOpen},
	{"FindOpenSkipsExpired", testApprovalFindOpenSkipsExpired},
	{"ListByStatus", testApprovalListByStatus},
	{"ListNewestByGroup", testApprovalListNewest},
	{"SearchFiltered", testApprovalSearch},
	{"CountByOrganization", testApprovalCountByOrganization},
	{"UpdateAuditedIsOneTransaction", testApprovalUpdateAudited},
	{"OnePendingPerCall", testApprovalOnePendingPerCall},
	{"ConcurrentFile", testApprovalConcurrentFile},
	{"ConcurrentInsertPending", testApprovalConcurrentInsertPending},
}

// fullApproval answers an approval with every field set.
func fullApproval(org, id, runID, key string, created time.Time) *toolplane.Approval {
	return &toolplane.Approval{
		ID:               id,
		OrganizationID:   org,
		RunID:            runID,
		StepPath:         "agent/step-4",
		Tool:             "payments.refund_order",
		ToolVersion:      "2.1.0",
		Key:              key,
		ArgumentsHash:    "sha256:" + key,
		Arguments:        []byte{'{', 0x00, 0xff, '}'},
		Invocation:       []byte(`{"organization_id":"` + org + `","run_id":"` + runID + `"}`),
		PrincipalID:      "agent-billing",
		Preview:          "Refund 12.50 EUR on order ord_1",
		Status:           toolplane.ApprovalPending,
		DefaultOnTimeout: "deny",
		ExpiresAt:        created.Add(24*time.Hour + 7*time.Nanosecond),
		CreatedAt:        created,
		ResolvedAt:       created.Add(time.Hour + 999*time.Nanosecond),
		ResolvedBy:       "user-ada",
		Reason:           "within policy",
		Version:          1,
		Level:            1,
		ApproverGroup:    "finance-leads",
		EscalatedFrom:    "apr-earlier",
		Rule:             "refunds-over-500",
		Approvers:        2,
		Approver:         "user-manager",
		ApprovedBy:       []string{"user-bob"},
	}
}

func insertApproval(t *testing.T, s toolplane.Store, a *toolplane.Approval) {
	t.Helper()
	if err := s.InsertApproval(t.Context(), a); err != nil {
		t.Fatalf("InsertApproval(%s) = %v", a.ID, err)
	}
}

// wantApproval fails t unless the stored approval is want.
func wantApproval(t *testing.T, s toolplane.Store, want *toolplane.Approval) {
	t.Helper()
	got, err := s.GetApproval(t.Context(), want.OrganizationID, want.ID)
	if err != nil {
		t.Fatalf("GetApproval(%s) = %v", want.ID, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetApproval(%s): %s", want.ID, d)
	}
}

// compareApprovals is the list order: CreatedAt as stored, then ID.
func compareApprovals(a, b toolplane.Approval) int {
	if c := stored(a.CreatedAt).Compare(stored(b.CreatedAt)); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func testApprovalInsertDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullApproval(org, "apr-1", "run-1", "k1", base)
	insertApproval(t, s, first)

	dup := fullApproval(org, "apr-1", "run-2", "k2", at(time.Hour))
	dup.Status = toolplane.ApprovalApproved
	if err := s.InsertApproval(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertApproval(apr-1) = %v, want ErrExists", err)
	}
	wantApproval(t, s, first)
}

func testApprovalGetRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	tests := []struct {
		name     string
		approval *toolplane.Approval
	}{
		{"every field set", fullApproval(org, "apr-full", "run-1", "k", base)},
		{"optional fields zero", &toolplane.Approval{
			ID: "apr-zero", OrganizationID: org, Status: toolplane.ApprovalPending, CreatedAt: base,
		}},
		{"empty byte slices", func() *toolplane.Approval {
			a := fullApproval(org, "apr-empty", "run-1", "k-empty", base)
			a.Arguments, a.Invocation = []byte{}, []byte{}
			return a
		}()},
		{"key with any byte", fullApproval(org, "apr-bytes", "run-1", "3:\x00\xff\xfe,1:\x00", base)},
		{"rejected", func() *toolplane.Approval {
			a := fullApproval(org, "apr-rejected", "run-1", "k", base)
			a.Status, a.Version = toolplane.ApprovalRejected, 9
			return a
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertApproval(t, s, tt.approval)
			wantApproval(t, s, tt.approval)
		})
	}
}

func testApprovalGetMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertApproval(t, s, fullApproval(org, "apr-1", "run-1", "k", base))
	for _, id := range []string{"apr-2", "", "APR-1"} {
		a, err := s.GetApproval(t.Context(), org, id)
		if !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("GetApproval(%q) = %+v, %v; want ErrNotFound", id, a, err)
		}
	}
}

func testApprovalUpdateCompareAndSwap(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullApproval(org, "apr-1", "run-1", "k", base)
	orig.ResolvedAt, orig.ResolvedBy, orig.Reason = time.Time{}, "", ""
	insertApproval(t, s, orig)

	cur := *orig
	cur.Status = toolplane.ApprovalApproved
	cur.ResolvedAt = at(time.Minute)
	cur.ResolvedBy = "user-grace"
	cur.Reason = "checked the order"
	cur.Preview = ""
	cur.Level, cur.ApproverGroup = 2, "directors"
	cur.CreatedAt = at(48 * time.Hour) // must not move
	ok, err := s.UpdateApproval(t.Context(), &cur)
	if !ok || err != nil {
		t.Fatalf("UpdateApproval(current version) = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != orig.Version+1 {
		t.Fatalf("after UpdateApproval, a.Version = %d, want %d", cur.Version, orig.Version+1)
	}
	want := cur
	want.CreatedAt = orig.CreatedAt
	wantApproval(t, s, &want)

	for _, v := range []int64{orig.Version, cur.Version + 1, 0} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			other := want
			other.Version = v
			other.Status = toolplane.ApprovalRejected
			ok, err := s.UpdateApproval(t.Context(), &other)
			if ok || err != nil {
				t.Fatalf("UpdateApproval(version %d, stored %d) = %v, %v; want false, nil", v, want.Version, ok, err)
			}
			if other.Version != v {
				t.Errorf("failed UpdateApproval changed a.Version to %d, want %d", other.Version, v)
			}
			wantApproval(t, s, &want)
		})
	}
}

func testApprovalUpdateMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	a := fullApproval(org, "apr-absent", "run-1", "k", base)
	ok, err := s.UpdateApproval(t.Context(), a)
	if !refused(ok, err) {
		t.Fatalf("UpdateApproval(missing) = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if _, err := s.GetApproval(t.Context(), org, a.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("UpdateApproval(missing) created a row: GetApproval err = %v", err)
	}
}

// testApprovalFindNewestFirst: FindApprovals answers one call's
// approvals, its tool and key, in every run and state, newest first, and
// no other call's.
func testApprovalFindNewestFirst(t *testing.T, s toolplane.Store) {
	org := newOrg()
	var want []toolplane.Approval
	rows := []*toolplane.Approval{
		fullApproval(org, "apr-b", "run-1", "k1", at(time.Minute)),
		fullApproval(org, "apr-a", "run-1", "k1", at(time.Minute)), // tie: ID breaks it
		fullApproval(org, "apr-c", "run-1", "k1", at(time.Hour)),
		fullApproval(org, "apr-d", "run-1", "k1", base),
		fullApproval(org, "apr-e", "run-1", "k2", at(2*time.Hour)),
		fullApproval(org, "apr-f", "run-2", "k1", at(2*time.Hour)), // another run: the key names the call
		fullApproval(org, "apr-g", "run-1", "k1", at(3*time.Hour)),
	}
	// Any status is found; one call has one pending approval at most.
	rows[0].Status = toolplane.ApprovalExpired
	rows[1].Status = toolplane.ApprovalApproved
	rows[2].Status = toolplane.ApprovalRejected
	rows[3].Status = toolplane.ApprovalExpired
	rows[6].Tool = "payments.void_order" // the same key for another tool is another call
	for _, a := range rows {
		insertApproval(t, s, a)
		if a.Tool == "payments.refund_order" && a.Key == "k1" {
			want = append(want, *a)
		}
	}
	slices.SortFunc(want, func(a, b toolplane.Approval) int { return compareApprovals(b, a) })

	tests := []struct {
		name, tool, key string
		want            []toolplane.Approval
	}{
		{"several, across runs", "payments.refund_order", "k1", want},
		{"one", "payments.refund_order", "k2", []toolplane.Approval{*rows[4]}},
		{"another tool with the key", "payments.void_order", "k1", []toolplane.Approval{*rows[6]}},
		{"none for the key", "payments.refund_order", "k3", nil},
		{"none for the tool", "payments.other", "k1", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.FindApprovals(t.Context(), org, tt.tool, tt.key)
			if err != nil {
				t.Fatalf("FindApprovals = %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("FindApprovals answered %d approvals (%v), want %d", len(got), idsOf(got), len(tt.want))
			}
			for i := range got {
				if d := diff(got[i], tt.want[i]); d != "" {
					t.Errorf("row %d (%s): %s", i, tt.want[i].ID, d)
				}
			}
		})
	}
}

// FindOpenApprovals finds one principal's call (tool and arguments hash) in
// any run, pending or approved only, newest first, bounded, and only in the
// organization asked.
func testApprovalFindOpen(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	call := func(id, run string, created time.Time, status toolplane.ApprovalStatus) *toolplane.Approval {
		a := fullApproval(org, id, run, "k-"+id, created)
		a.ArgumentsHash, a.Status = "sha256:same", status
		return a
	}
	rows := []*toolplane.Approval{
		call("apr-1", "run-1", at(time.Minute), toolplane.ApprovalPending),
		call("apr-2", "run-2", at(time.Hour), toolplane.ApprovalApproved),
		call("apr-0", "run-3", at(time.Hour), toolplane.ApprovalPending), // tie: ID breaks it
		call("apr-3", "run-4", at(2*time.Hour), toolplane.ApprovalRejected),
		call("apr-4", "run-5", at(3*time.Hour), toolplane.ApprovalExpired),
	}
	otherPrincipal := call("apr-5", "run-6", at(time.Hour), toolplane.ApprovalPending)
	otherPrincipal.PrincipalID = "agent-other"
	otherTool := call("apr-6", "run-7", at(time.Hour), toolplane.ApprovalPending)
	otherTool.Tool = "payments.void_order"
	otherArgs := call("apr-7", "run-8", at(time.Hour), toolplane.ApprovalPending)
	otherArgs.ArgumentsHash = "sha256:other"
	otherOrg := call("apr-8", "run-9", at(time.Hour), toolplane.ApprovalPending)
	otherOrg.OrganizationID = other
	rows = append(rows, otherPrincipal, otherTool, otherArgs, otherOrg)
	for _, a := range rows {
		insertApproval(t, s, a)
	}
	got, err := s.FindOpenApprovals(t.Context(), org, "agent-billing", "payments.refund_order", "sha256:same", base)
	if err != nil {
		t.Fatalf("FindOpenApprovals = %v", err)
	}
	want := []*toolplane.Approval{rows[1], rows[2], rows[0]}
	if len(got) != len(want) {
		t.Fatalf("FindOpenApprovals answered %d approvals, want %d (apr-2, apr-0, apr-1)", len(got), len(want))
	}
	for i := range got {
		if d := diff(got[i], *want[i]); d != "" {
			t.Errorf("row %d (%s): %s", i, want[i].ID, d)
		}
	}
	// Bounded: the newest MaxOpenApprovals of a call filed many times.
	for i := range toolplane.MaxOpenApprovals + 2 {
		insertApproval(t, s, call(fmt.Sprintf("apr-many-%02d", i), "run-m", at(time.Duration(10+i)*time.Hour), toolplane.ApprovalPending))
	}
	got, err = s.FindOpenApprovals(t.Context(), org, "agent-billing", "payments.refund_order", "sha256:same", base)
	if err != nil || len(got) != toolplane.MaxOpenApprovals || got[0].ID != fmt.Sprintf("apr-many-%02d", toolplane.MaxOpenApprovals+1) {
		t.Fatalf("FindOpenApprovals of a call filed %d times = %d rows (first %v), %v; want the newest %d", toolplane.MaxOpenApprovals+5, len(got), got[0].ID, err, toolplane.MaxOpenApprovals)
	}
}

// testApprovalFindOpenSkipsExpired: approvals past their expiry are not
// open, and the query leaves them out before its bound, so a call filed
// more than MaxOpenApprovals times whose newer filings all expired still
// finds its older open one.
func testApprovalFindOpenSkipsExpired(t *testing.T, s toolplane.Store) {
	org := newOrg()
	open := fullApproval(org, "apr-open", "run-open", "k-open", at(0))
	open.ArgumentsHash, open.ExpiresAt = "sha256:same", at(48*time.Hour)
	insertApproval(t, s, open)
	for i := range toolplane.MaxOpenApprovals + 2 {
		a := fullApproval(org, fmt.Sprintf("apr-expired-%02d", i), "run-expired", fmt.Sprintf("k-expired-%02d", i), at(time.Duration(i+1)*time.Minute))
		a.ArgumentsHash, a.ExpiresAt = "sha256:same", at(time.Hour)
		insertApproval(t, s, a)
	}
	tests := []struct {
		name string
		now  time.Time
		want []string
	}{
		{"at its expiry an approval is no longer open", at(time.Hour), []string{"apr-open"}},
		{"after every expiry", at(2 * time.Hour), []string{"apr-open"}},
		{"after the last expiry", at(48 * time.Hour), nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := s.FindOpenApprovals(t.Context(), org, "agent-billing", "payments.refund_order", "sha256:same", tt.now)
			if err != nil {
				t.Fatalf("FindOpenApprovals = %v", err)
			}
			var ids []string
			for _, a := range got {
				ids = append(ids, a.ID)
			}
			if !slices.Equal(ids, tt.want) {
				t.Errorf("FindOpenApprovals(now %v) = %v, want %v", tt.now, ids, tt.want)
			}
		})
	}
}

// listApprovals pages through every approval in status, calling between (if
// not nil) after each page but the last.
func listApprovals(t *testing.T, s toolplane.Store, org string, status toolplane.ApprovalStatus, limit int, between func()) []toolplane.Approval {
	t.Helper()
	return pageAll(t, "ListApprovals", limit, between, func(after string) ([]toolplane.Approval, string, error) {
		return s.ListApprovals(t.Context(), org, status, after, limit)
	})
}

func testApprovalListByStatus(t *testing.T, s toolplane.Store) {
	org := newOrg()
	var pending []toolplane.Approval
	const n = 25
	for _, i := range shuffled(n) {
		a := fullApproval(org, fmt.Sprintf("apr-%03d", n-i), "run-1", fmt.Sprintf("k%d", i), at(time.Duration(i/2)*time.Second))
		insertApproval(t, s, a)
		pending = append(pending, *a)
	}
	for i := range 5 {
		a := fullApproval(org, fmt.Sprintf("apr-approved-%d", i), "run-1", "k", at(time.Duration(i)*time.Second))
		a.Status = toolplane.ApprovalApproved
		insertApproval(t, s, a)
	}
	slices.SortFunc(pending, compareApprovals)

	// Between pages, file a newer pending approval: paging must reach it.
	extra := 0
	between := func() {
		extra++
		a := fullApproval(org, fmt.Sprintf("apr-late-%03d", extra), "run-2", fmt.Sprintf("k-late-%d", extra), at(time.Hour+time.Duration(extra)*time.Second))
		insertApproval(t, s, a)
		pending = append(pending, *a)
	}
	got := listApprovals(t, s, org, toolplane.ApprovalPending, 4, between)
	if len(got) != len(pending) {
		t.Fatalf("listed %d pending approvals, want %d", len(got), len(pending))
	}
	for i := range got {
		if d := diff(got[i], pending[i]); d != "" {
			t.Errorf("row %d (%s): %s", i, pending[i].ID, d)
		}
	}

	rows, next, err := s.ListApprovals(t.Context(), org, toolplane.ApprovalExpired, "", 10)
	if err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListApprovals(expired) = %d rows, %q, %v; want none", len(rows), next, err)
	}
}

// testApprovalCountByOrganization: the count covers every organization,
// each under its own id, and only the state asked for.
func testApprovalCountByOrganization(t *testing.T, s toolplane.Store) {
	orgA, orgB, orgC := newOrg(), newOrg(), newOrg()
	for i, o := range []string{orgA, orgA, orgA, orgB} {
		insertApproval(t, s, fullApproval(o, fmt.Sprintf("apr-p%d", i), "run-1", fmt.Sprintf("k%d", i), at(time.Duration(i)*time.Second)))
	}
	done := fullApproval(orgC, "apr-done", "run-1", "k", at(0))
	done.Status = toolplane.ApprovalApproved
	insertApproval(t, s, done)

	got, err := s.CountApprovals(t.Context(), toolplane.ApprovalPending)
	if err != nil {
		t.Fatalf("CountApprovals = %v", err)
	}
	// The store may hold other organizations' rows (a shared database):
	// judge only the three made here.
	for _, c := range []struct {
		org  string
		want int
	}{{orgA, 3}, {orgB, 1}, {orgC, 0}} {
		if got[c.org] != c.want {
			t.Errorf("pending in %s: %d, want %d", c.org, got[c.org], c.want)
		}
	}
	if _, listed := got[orgC]; listed {
		t.Errorf("an organization with none pending is listed: %v", got)
	}
	approved, err := s.CountApprovals(t.Context(), toolplane.ApprovalApproved)
	if err != nil {
		t.Fatalf("CountApprovals(approved) = %v", err)
	}
	if approved[orgC] != 1 || approved[orgA] != 0 {
		t.Errorf("approved: %v", approved)
	}
}

// testApprovalUpdateAudited: an approval's change and its audit event are
// stored together or not at all.
func testApprovalUpdateAudited(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullApproval(org, "apr-1", "run-1", "k", base)
	insertApproval(t, s, orig)
	cur, err := s.GetApproval(t.Context(), org, orig.ID)
	if err != nil {
		t.Fatal(err)
	}

	// A stale version stores neither.
	stale := *cur
	stale.Version--
	stale.Status = toolplane.ApprovalExpired
	if ok, err := s.UpdateApprovalAudited(t.Context(), &stale, fullEvent(org, "ev-stale", at(time.Minute))); ok || err != nil {
		t.Fatalf("UpdateApprovalAudited(stale) = %v, %v; want false, nil", ok, err)
	}
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("a stale update stored its event: %+v", got)
	}
	wantApproval(t, s, cur)

	// An event that cannot be stored (a duplicate id) rolls the update back.
	appendAudit(t, s, fullEvent(org, "ev-dup", at(time.Second)))
	next := *cur
	next.Status, next.ResolvedAt, next.Reason = toolplane.ApprovalExpired, at(time.Hour), "expired: default deny"
	ok, err := s.UpdateApprovalAudited(t.Context(), &next, fullEvent(org, "ev-dup", at(time.Minute)))
	if ok || !errors.Is(err, toolplane.ErrExists) || next.Version != cur.Version {
		t.Fatalf("UpdateApprovalAudited(duplicate event) = %v, %v (version %d); want false, ErrExists, version unchanged", ok, err, next.Version)
	}
	wantApproval(t, s, cur)

	// Another organization's approval is out of reach, and so is its event.
	other := next
	other.OrganizationID = newOrg()
	if ok, _ := s.UpdateApprovalAudited(t.Context(), &other, fullEvent(other.OrganizationID, "ev-x", at(time.Hour))); ok {
		t.Fatal("updated another organization's approval")
	}
	if got := listAudit(t, s, other.OrganizationID, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("an event was stored for an update that did not apply: %+v", got)
	}

	// The current version stores both.
	ev := fullEvent(org, "ev-1", at(time.Minute))
	if ok, err := s.UpdateApprovalAudited(t.Context(), &next, ev); !ok || err != nil || next.Version != cur.Version+1 {
		t.Fatalf("UpdateApprovalAudited = %v, %v (version %d)", ok, err, next.Version)
	}
	wantApproval(t, s, &next)
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 2 || got[0].ID != "ev-1" {
		t.Fatalf("events = %+v", got)
	}
}

// testApprovalListNewest: the newest-first list answers a state's
// approvals in reverse list order, the whole of it or only those routed to
// the groups asked for ("" naming the approvals routed to none), and paging
// by its cursor loses and repeats none, with ties in time broken by ID.
func testApprovalListNewest(t *testing.T, s toolplane.Store) {
	org := newOrg()
	groupOf := []string{"", "finance", "ops", "finance-leads"}
	var pending []toolplane.Approval
	const n = 30
	for _, i := range shuffled(n) {
		// Pairs share a time: the ID breaks the tie.
		a := fullApproval(org, fmt.Sprintf("apr-%03d", i), "run-1", fmt.Sprintf("k%d", i), at(time.Duration(i/2)*time.Second))
		a.ApproverGroup = groupOf[i%len(groupOf)]
		insertApproval(t, s, a)
		pending = append(pending, *a)
	}
	done := fullApproval(org, "apr-approved", "run-1", "k", at(time.Hour))
	done.Status, done.ApproverGroup = toolplane.ApprovalApproved, "finance"
	insertApproval(t, s, done)
	newest := func(a, b toolplane.Approval) int { return compareApprovals(b, a) }
	slices.SortFunc(pending, newest)
	only := func(groups ...string) []toolplane.Approval {
		var out []toolplane.Approval
		for _, a := range pending {
			if slices.Contains(groups, a.ApproverGroup) {
				out = append(out, a)
			}
		}
		return out
	}

	tests := []struct {
		name   string
		groups []string
		want   []toolplane.Approval
	}{
		{"every group", nil, pending},
		{"one group, not a prefix of another", []string{"finance"}, only("finance")},
		{"no group and two groups", []string{"", "finance", "ops"}, only("", "finance", "ops")},
		{"a group nobody routed to", []string{"legal"}, nil},
		{"no groups at all", []string{}, nil},
	}
	for _, tt := range tests {
		for _, limit := range []int{1, 4, maxLimit} {
			got := pageAll(t, "ListApprovalsNewest", limit, nil, func(after string) ([]toolplane.Approval, string, error) {
				return s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalPending, tt.groups, after, limit)
			})
			if len(got) != len(tt.want) {
				t.Fatalf("%s (limit %d): listed %d approvals, want %d", tt.name, limit, len(got), len(tt.want))
			}
			for i := range got {
				if d := diff(got[i], tt.want[i]); d != "" {
					t.Errorf("%s (limit %d) row %d (%s): %s", tt.name, limit, i, tt.want[i].ID, d)
				}
			}
		}
	}

	// A newer approval filed between pages is not in the pages after the
	// cursor (it is newer than every one of them), and nothing repeats.
	first, next, err := s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalPending, nil, "", 5)
	if err != nil || len(first) != 5 || next == "" {
		t.Fatalf("first page = %d rows, %q, %v", len(first), next, err)
	}
	insertApproval(t, s, fullApproval(org, "apr-late", "run-2", "k-late", at(2*time.Hour)))
	rest := pageAll(t, "ListApprovalsNewest", 7, nil, func(after string) ([]toolplane.Approval, string, error) {
		if after == "" {
			after = next
		}
		return s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalPending, nil, after, 7)
	})
	if len(rest) != n-5 || rest[0].ID != pending[5].ID {
		t.Errorf("after the first page: %d rows from %v, want %d from %s", len(rest), idsOf(rest[:min(1, len(rest))]), n-5, pending[5].ID)
	}

	if _, _, err := s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalPending, make([]string, toolplane.MaxApprovalGroups+1), "", 10); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("ListApprovalsNewest(%d groups) = %v; want ErrInvalid", toolplane.MaxApprovalGroups+1, err)
	}
	approved, next, err := s.ListApprovalsNewest(t.Context(), org, toolplane.ApprovalApproved, []string{"finance"}, "", 10)
	if err != nil || len(approved) != 1 || approved[0].ID != done.ID || next != "" {
		t.Errorf("ListApprovalsNewest(approved) = %v, %q, %v; want %s alone", idsOf(approved), next, err, done.ID)
	}
}

// idsOf answers the IDs of as, for a failure's message.
func idsOf(as []toolplane.Approval) []string {
	ids := make([]string, len(as))
	for i, a := range as {
		ids[i] = a.ID
	}
	return ids
}

// pendingApproval answers a with the fields a filing sets: pending and
// unresolved.
func pendingApproval(org, id, runID, key string, created time.Time) *toolplane.Approval {
	a := fullApproval(org, id, runID, key, created)
	a.Status, a.ResolvedAt, a.ResolvedBy, a.Reason, a.ApprovedBy = toolplane.ApprovalPending, time.Time{}, "", "", nil
	return a
}

// testApprovalOnePendingPerCall: one call (organization, tool, key) has at
// most one pending approval. FileApproval answers the one already
// pending and stores nothing; InsertApproval refuses a second pending one;
// approvals in other states, of another tool, or of another organization
// are other rows; once the pending one is answered, the call may be filed
// for again.
func testApprovalOnePendingPerCall(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org, other := newOrg(), newOrg()
	first := pendingApproval(org, "apr-1", "run-1", "k", base)
	got, err := s.FileApproval(ctx, first)
	if err != nil || got == nil || got.ID != first.ID {
		t.Fatalf("FileApproval(new call) = %+v, %v; want it stored", got, err)
	}
	wantApproval(t, s, first)

	// The same call again, from another run (a caller's key names the
	// call across runs): the first answers, nothing is stored.
	again := pendingApproval(org, "apr-2", "run-2", "k", at(time.Minute))
	again.ArgumentsHash = "sha256:other"
	got, err = s.FileApproval(ctx, again)
	if err != nil || got == nil {
		t.Fatalf("FileApproval(same call) = %+v, %v", got, err)
	}
	if d := diff(*got, *first); d != "" {
		t.Errorf("FileApproval(same call) answered another approval: %s", d)
	}
	if _, err := s.GetApproval(ctx, org, again.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("FileApproval(same call) stored %s: %v", again.ID, err)
	}
	if err := s.InsertApproval(ctx, again); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("InsertApproval(a second pending approval of the call) = %v, want ErrExists", err)
	}

	// Other rows: another state, another tool, another organization.
	decided := fullApproval(org, "apr-3", "run-3", "k", at(2*time.Minute))
	decided.Status = toolplane.ApprovalRejected
	insertApproval(t, s, decided)
	otherTool := pendingApproval(org, "apr-4", "run-1", "k", at(3*time.Minute))
	otherTool.Tool = "payments.void_order"
	otherOrg := pendingApproval(other, "apr-1", "run-1", "k", at(3*time.Minute))
	for _, a := range []*toolplane.Approval{otherTool, otherOrg} {
		if got, err := s.FileApproval(ctx, a); err != nil || got == nil || got.ID != a.ID || got.OrganizationID != a.OrganizationID {
			t.Errorf("FileApproval(%s in %s, tool %s) = %+v, %v; want its own row", a.ID, a.OrganizationID, a.Tool, got, err)
		}
		wantApproval(t, s, a)
	}

	// An ID already taken is refused, even for another call; so is a
	// filing that is not pending.
	taken := pendingApproval(org, "apr-1", "run-9", "k-taken", at(4*time.Minute))
	if got, err := s.FileApproval(ctx, taken); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("FileApproval(taken ID) = %+v, %v; want ErrExists", got, err)
	}
	approved := pendingApproval(org, "apr-5", "run-1", "k-approved", at(4*time.Minute))
	approved.Status = toolplane.ApprovalApproved
	if got, err := s.FileApproval(ctx, approved); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("FileApproval(approved) = %+v, %v; want ErrInvalid", got, err)
	}

	// Answered, the call's approval is no longer pending: the next filing
	// is a new approval.
	cur := *first
	cur.Status, cur.ResolvedAt, cur.ResolvedBy = toolplane.ApprovalRejected, at(5*time.Minute), "user-ada"
	if ok, err := s.UpdateApproval(ctx, &cur); !ok || err != nil {
		t.Fatalf("UpdateApproval(reject) = %v, %v", ok, err)
	}
	next := pendingApproval(org, "apr-6", "run-1", "k", at(6*time.Minute))
	if got, err := s.FileApproval(ctx, next); err != nil || got == nil || got.ID != next.ID {
		t.Fatalf("FileApproval(after the answer) = %+v, %v; want a new approval", got, err)
	}
	all, err := s.FindApprovals(ctx, org, first.Tool, first.Key)
	if err != nil {
		t.Fatal(err)
	}
	if ids := idsOf(all); !slices.Equal(ids, []string{"apr-6", "apr-3", "apr-1"}) {
		t.Errorf("FindApprovals = %v, want [apr-6 apr-3 apr-1]", ids)
	}
}

// testApprovalConcurrentFile: identical calls filed at the same moment
// (each with an ID of its own) all answer the one approval stored.
func testApprovalConcurrentFile(t *testing.T, s toolplane.Store) {
	org := newOrg()
	start := make(chan struct{})
	ids := make([]string, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			a := pendingApproval(org, fmt.Sprintf("apr-%02d", i), fmt.Sprintf("run-%d", i%3), "contended", base)
			<-start
			got, err := s.FileApproval(t.Context(), a)
			if err != nil || got == nil {
				t.Errorf("FileApproval(writer %d) = %+v, %v", i, got, err)
				return
			}
			ids[i] = got.ID
		})
	}
	close(start)
	wg.Wait()
	answered := slices.Compact(slices.Sorted(slices.Values(ids)))
	if len(answered) != 1 || answered[0] == "" {
		t.Fatalf("%d concurrent filings of one call answered the approvals %q; want one", writers, answered)
	}
	stored, err := s.FindApprovals(t.Context(), org, "payments.refund_order", "contended")
	if err != nil || len(stored) != 1 || stored[0].ID != answered[0] {
		t.Fatalf("FindApprovals = %v, %v; want %s alone", idsOf(stored), err, answered[0])
	}
}

// testApprovalConcurrentInsertPending: of pending approvals of one call
// inserted at the same moment, exactly one is stored.
func testApprovalConcurrentInsertPending(t *testing.T, s toolplane.Store) {
	org := newOrg()
	w := race(t, "InsertApproval", func(i int) *toolplane.Approval {
		return pendingApproval(org, fmt.Sprintf("apr-%02d", i), "run-1", "contended", base)
	}, func(a *toolplane.Approval) (bool, error) { return inserted(s.InsertApproval(t.Context(), a)) })
	wantApproval(t, s, w)
}
