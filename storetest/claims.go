package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var claimCases = []suiteCase{
	{"InsertOnce", testClaimInsertOnce},
	{"GetRoundTrip", testClaimGetRoundTrip},
	{"GetMissing", testClaimGetMissing},
	{"UpdateCompareAndSwap", testClaimUpdateCompareAndSwap},
	{"UpdateKeepsIdentity", testClaimUpdateKeepsIdentity},
	{"UpdateKeepingStatusOrLease", testClaimUpdateKeepingStatusOrLease},
	{"UpdateMissing", testClaimUpdateMissing},
	{"DispatchCompareAndSwap", testClaimDispatch},
	{"CompleteAuditedIsOneTransaction", testClaimCompleteAudited},
	{"DeleteCompareAndSwap", testClaimDeleteCompareAndSwap},
	{"ListByStatus", testClaimListByStatus},
	{"ListPagingWithInserts", testClaimListPagingWithInserts},
	{"ConcurrentInsert", testClaimConcurrentInsert},
	{"ConcurrentUpdate", testClaimConcurrentUpdate},
	{"UpdateAuditedIsOneTransaction", testClaimUpdateAudited},
	{"DeleteAuditedIsOneTransaction", testClaimDeleteAudited},
	{"CountByOrganization", testClaimCountByOrganization},
	{"CountOfOrganization", testClaimCountOfOrganization},
	{"DerivedKeys", testClaimDerivedKeys},
}

// fullClaim answers a claim with every field set to a value a store could
// lose: binary bytes, sub-microsecond times in a foreign zone.
func fullClaim(org, tool, key string, created time.Time) *toolplane.Claim {
	return &toolplane.Claim{
		OrganizationID: org,
		Tool:           tool,
		Key:            key,
		RequestHash:    "sha256:" + key,
		Status:         toolplane.ClaimProcessing,
		Result:         []byte{0x00, 0x01, 0xfe, 0xff, '{', '}'},
		Owner:          "worker-7",
		LeaseUntil:     created.Add(30*time.Second + 123*time.Nanosecond),
		Dispatched:     true,
		Attempts:       2,
		Node:           "node-a/1741964966",
		RunID:          "run-1",
		StepPath:       "agent/step-3",
		Arguments:      []byte(`{"order_id":"ord_1","amount":1250}`),
		Invocation:     []byte{'{', 0x00, 0xff, '}'},
		Reason:         "lease lost after dispatch",
		ReconciledBy:   "user-ada",
		Note:           "refund confirmed upstream",
		Version:        1,
		CreatedAt:      created,
		UpdatedAt:      created.Add(time.Millisecond + 999*time.Nanosecond),
	}
}

func insertClaim(t *testing.T, s toolplane.Store, c *toolplane.Claim) {
	t.Helper()
	ok, err := s.InsertClaim(t.Context(), c)
	if err != nil || !ok {
		t.Fatalf("InsertClaim(%s/%s) = %v, %v; want true, nil", c.Tool, c.Key, ok, err)
	}
}

func getClaim(t *testing.T, s toolplane.Store, org, tool, key string) *toolplane.Claim {
	t.Helper()
	c, err := s.GetClaim(t.Context(), org, tool, key)
	if err != nil {
		t.Fatalf("GetClaim(%s/%s) = %v", tool, key, err)
	}
	return c
}

// wantClaim fails t unless the stored claim is want.
func wantClaim(t *testing.T, s toolplane.Store, want *toolplane.Claim) {
	t.Helper()
	got := getClaim(t, s, want.OrganizationID, want.Tool, want.Key)
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetClaim(%s/%s): %s", want.Tool, want.Key, d)
	}
}

// compareClaims is the list order: CreatedAt as stored, then tool, then key.
func compareClaims(a, b toolplane.Claim) int {
	if c := stored(a.CreatedAt).Compare(stored(b.CreatedAt)); c != 0 {
		return c
	}
	if c := strings.Compare(a.Tool, b.Tool); c != 0 {
		return c
	}
	return strings.Compare(a.Key, b.Key)
}

func claimID(c toolplane.Claim) string { return c.Tool + "\x00" + c.Key }

func testClaimInsertOnce(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullClaim(org, "payments.refund_order", "k1", base)
	insertClaim(t, s, first)

	second := fullClaim(org, "payments.refund_order", "k1", at(time.Hour))
	second.RequestHash = "sha256:other"
	second.Owner = "worker-9"
	ok, err := s.InsertClaim(t.Context(), second)
	if ok || err != nil {
		t.Fatalf("second InsertClaim = %v, %v; want false, nil", ok, err)
	}
	wantClaim(t, s, first)

	// Another key, and the same key under another tool, are other claims.
	insertClaim(t, s, fullClaim(org, "payments.refund_order", "k2", base))
	insertClaim(t, s, fullClaim(org, "payments.charge", "k1", base))
	wantClaim(t, s, first)
}

func testClaimGetRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	tests := []struct {
		name  string
		claim *toolplane.Claim
	}{
		{"every field set", fullClaim(org, "crm.update_contact", "full", base)},
		{"optional fields zero", &toolplane.Claim{
			OrganizationID: org, Tool: "crm.update_contact", Key: "zero",
			Status: toolplane.ClaimProcessing, CreatedAt: base, UpdatedAt: base,
		}},
		{"empty byte slices", func() *toolplane.Claim {
			c := fullClaim(org, "crm.update_contact", "empty-bytes", base)
			c.Result, c.Arguments, c.Invocation = []byte{}, []byte{}, []byte{}
			return c
		}()},
		{"uncertain", func() *toolplane.Claim {
			c := fullClaim(org, "crm.update_contact", "uncertain", base)
			c.Status, c.Version, c.Attempts = toolplane.ClaimUncertain, 42, 1<<20
			return c
		}()},
		{"names with separators and unicode", fullClaim(org, "mail.send.v2", "5:run/1,4:ключ🔑,3:%_',1:\"", base)},
		// canonical.Key documents that a key's parts may hold any byte.
		{"key with any byte", fullClaim(org, "mail.send.v2", "3:\x00\xff\xfe,1:\x00", base)},
		{"large result", func() *toolplane.Claim {
			c := fullClaim(org, "crm.update_contact", "large", base)
			c.Result = []byte(strings.Repeat("0123456789abcdef", 1<<14))
			return c
		}()},
		{"utc input", fullClaim(org, "crm.update_contact", "utc", base.UTC())},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertClaim(t, s, tt.claim)
			wantClaim(t, s, tt.claim)
		})
	}
}

func testClaimGetMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertClaim(t, s, fullClaim(org, "crm.update_contact", "present", base))
	tests := []struct{ name, org, tool, key string }{
		{"no such key", org, "crm.update_contact", "absent"},
		{"no such tool", org, "crm.delete_contact", "present"},
		{"empty store key", org, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := s.GetClaim(t.Context(), tt.org, tt.tool, tt.key)
			if !errors.Is(err, toolplane.ErrNotFound) {
				t.Fatalf("GetClaim = %+v, %v; want ErrNotFound", c, err)
			}
		})
	}
}

func testClaimUpdateCompareAndSwap(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	insertClaim(t, s, orig)

	// A current version writes every mutable field, clearing some.
	cur := getClaim(t, s, org, orig.Tool, orig.Key)
	cur.Status = toolplane.ClaimCompleted
	cur.Result = []byte(`{"ok":true}`)
	cur.Owner = ""
	cur.LeaseUntil = time.Time{}
	cur.Dispatched = false
	cur.Attempts = 3
	cur.RequestHash = "sha256:rehashed"
	cur.RunID, cur.StepPath = "run-2", "agent"
	cur.Arguments = nil
	cur.Invocation = []byte(`{"run_id":"run-2"}`)
	cur.Reason, cur.ReconciledBy, cur.Note = "", "", "done"
	cur.UpdatedAt = at(time.Minute)
	ok, err := s.UpdateClaim(t.Context(), cur)
	if !ok || err != nil {
		t.Fatalf("UpdateClaim(current version) = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != orig.Version+1 {
		t.Fatalf("after UpdateClaim, c.Version = %d, want %d", cur.Version, orig.Version+1)
	}
	wantClaim(t, s, cur)

	// Stale and future versions write nothing and leave the argument alone.
	for _, v := range []int64{orig.Version, cur.Version + 1, 0, -1} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			other := *cur
			other.Version = v
			other.Status = toolplane.ClaimUncertain
			other.Owner = "intruder"
			ok, err := s.UpdateClaim(t.Context(), &other)
			if ok || err != nil {
				t.Fatalf("UpdateClaim(version %d, stored %d) = %v, %v; want false, nil", v, cur.Version, ok, err)
			}
			if other.Version != v {
				t.Errorf("failed UpdateClaim changed c.Version to %d, want %d", other.Version, v)
			}
			wantClaim(t, s, cur)
		})
	}

	// The new current version writes again.
	cur.Note = "second update"
	ok, err = s.UpdateClaim(t.Context(), cur)
	if !ok || err != nil {
		t.Fatalf("second UpdateClaim = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != orig.Version+2 {
		t.Fatalf("after second UpdateClaim, c.Version = %d, want %d", cur.Version, orig.Version+2)
	}
	wantClaim(t, s, cur)
}

// testClaimDispatch: a store's dispatch mark (toolplane.ClaimDispatcher)
// writes the mark, the attempts and the update time on the current
// version only, and leaves every other field as stored.
func testClaimDispatch(t *testing.T, s toolplane.Store) {
	d, ok := s.(toolplane.ClaimDispatcher)
	if !ok {
		t.Skip("the store writes the dispatch mark with UpdateClaim")
	}
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	orig.Status, orig.Dispatched, orig.Attempts = toolplane.ClaimProcessing, false, 1
	insertClaim(t, s, orig)
	stored := getClaim(t, s, org, orig.Tool, orig.Key)

	for _, v := range []int64{stored.Version - 1, stored.Version + 1} {
		stale := *stored
		stale.Version, stale.Dispatched, stale.Attempts, stale.UpdatedAt = v, true, 2, at(time.Minute)
		if ok, err := d.DispatchClaim(t.Context(), &stale); ok || err != nil {
			t.Fatalf("DispatchClaim(version %d, stored %d) = %v, %v; want false, nil", v, stored.Version, ok, err)
		}
		if stale.Version != v {
			t.Errorf("failed DispatchClaim changed c.Version to %d, want %d", stale.Version, v)
		}
		wantClaim(t, s, stored)
	}

	// The fields the mark does not write differ in c, and stay as stored.
	cur := *stored
	cur.Dispatched, cur.Attempts, cur.UpdatedAt = true, 2, at(time.Minute)
	cur.Note, cur.Arguments = "not written", nil
	if ok, err := d.DispatchClaim(t.Context(), &cur); !ok || err != nil {
		t.Fatalf("DispatchClaim(current version) = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != stored.Version+1 {
		t.Fatalf("after DispatchClaim, c.Version = %d, want %d", cur.Version, stored.Version+1)
	}
	want := *stored
	want.Dispatched, want.Attempts, want.UpdatedAt, want.Version = true, 2, at(time.Minute), cur.Version
	wantClaim(t, s, &want)
}

// testClaimCompleteAudited: a store's completion (toolplane.ClaimCompleter)
// writes the status, result, owner, arguments, invocation and update time
// with the call's event on the current version only, stores neither on a
// stale one or when the event cannot be stored, leaves every other field
// as stored, and never reaches another organization's claim.
func testClaimCompleteAudited(t *testing.T, s toolplane.Store) {
	cc, ok := s.(toolplane.ClaimCompleter)
	if !ok {
		t.Skip("the store writes the completion with UpdateClaimAudited")
	}
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	orig.Status, orig.Dispatched, orig.Attempts = toolplane.ClaimProcessing, true, 1
	insertClaim(t, s, orig)
	stored := getClaim(t, s, org, orig.Tool, orig.Key)

	complete := func(c *toolplane.Claim) {
		c.Status, c.Result, c.Owner = toolplane.ClaimCompleted, []byte{0xff, 0x00, '{'}, ""
		c.Arguments, c.Invocation, c.UpdatedAt = nil, nil, at(time.Minute)
	}
	for _, v := range []int64{stored.Version - 1, stored.Version + 1} {
		stale := *stored
		complete(&stale)
		stale.Version = v
		if ok, err := cc.CompleteClaimAudited(t.Context(), &stale, fullEvent(org, "ev-stale", at(time.Minute))); ok || err != nil {
			t.Fatalf("CompleteClaimAudited(version %d, stored %d) = %v, %v; want false, nil", v, stored.Version, ok, err)
		}
		if stale.Version != v {
			t.Errorf("failed CompleteClaimAudited changed c.Version to %d, want %d", stale.Version, v)
		}
		wantClaim(t, s, stored)
	}
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("a stale completion stored its event: %+v", got)
	}

	// An event that cannot be stored (a duplicate id) writes nothing.
	appendAudit(t, s, fullEvent(org, "ev-dup", at(time.Second)))
	cur := *stored
	complete(&cur)
	if ok, err := cc.CompleteClaimAudited(t.Context(), &cur, fullEvent(org, "ev-dup", at(time.Minute))); ok || !errors.Is(err, toolplane.ErrExists) || cur.Version != stored.Version {
		t.Fatalf("CompleteClaimAudited(duplicate event) = %v, %v (version %d); want false, ErrExists, version unchanged", ok, err, cur.Version)
	}
	wantClaim(t, s, stored)

	// Another organization's claim is out of reach, and so is its event.
	other := cur
	other.OrganizationID = newOrg()
	if ok, err := cc.CompleteClaimAudited(t.Context(), &other, fullEvent(other.OrganizationID, "ev-x", at(time.Hour))); ok || err != nil {
		t.Fatalf("CompleteClaimAudited(another organization) = %v, %v; want false, nil", ok, err)
	}
	if got := listAudit(t, s, other.OrganizationID, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("another organization's completion stored its event: %+v", got)
	}

	// The fields a completion does not write differ in c, and stay as
	// stored.
	cur.Note, cur.RunID, cur.Attempts, cur.Node = "not written", "run-other", 7, "node-other"
	if ok, err := cc.CompleteClaimAudited(t.Context(), &cur, fullEvent(org, "ev-1", at(time.Minute))); !ok || err != nil {
		t.Fatalf("CompleteClaimAudited(current version) = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != stored.Version+1 {
		t.Fatalf("after CompleteClaimAudited, c.Version = %d, want %d", cur.Version, stored.Version+1)
	}
	want := *stored
	complete(&want)
	want.Version = cur.Version
	wantClaim(t, s, &want)
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 2 || got[0].ID != "ev-1" {
		t.Fatalf("events = %+v", got)
	}
}

func testClaimUpdateKeepsIdentity(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	insertClaim(t, s, orig)

	upd := *orig
	upd.CreatedAt = at(24 * time.Hour)
	upd.Note = "moved?"
	if ok, err := s.UpdateClaim(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("UpdateClaim = %v, %v; want true, nil", ok, err)
	}
	want := upd
	want.CreatedAt = orig.CreatedAt
	wantClaim(t, s, &want)
}

// testClaimUpdateKeepingStatusOrLease: an update that leaves the status or
// the lease as stored (the dispatch mark leaves both) is held to the same
// contract as any other. A backend may write such an update by another
// path, so each combination is checked: every field is written, a stale
// version writes nothing, and the status and lease that do change are
// stored, whatever the row held before.
func testClaimUpdateKeepingStatusOrLease(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	orig.Dispatched, orig.Attempts = false, 0
	insertClaim(t, s, orig)
	cur := getClaim(t, s, org, orig.Tool, orig.Key)

	steps := []struct {
		name   string
		change func(c *toolplane.Claim)
	}{
		{"status and lease kept", func(c *toolplane.Claim) {
			c.Dispatched, c.Attempts = true, 1
			c.RequestHash = "sha256:other"
			c.Result = []byte{0xff, 0x00}
			c.Owner = "worker-8"
			c.RunID, c.StepPath = "run-2", "agent/step-4"
			c.Arguments = nil
			c.Invocation = []byte(`{"run_id":"run-2"}`)
			c.Reason, c.ReconciledBy, c.Note = "", "user-bob", "kept"
		}},
		{"lease moved", func(c *toolplane.Claim) { c.LeaseUntil = c.LeaseUntil.Add(time.Minute) }},
		{"lease ended early", func(c *toolplane.Claim) { c.LeaseUntil = c.LeaseUntil.Add(-time.Hour) }},
		{"lease cleared", func(c *toolplane.Claim) { c.LeaseUntil = time.Time{} }},
		{"lease cleared and kept", func(c *toolplane.Claim) { c.Note = "no lease" }},
		{"lease set again", func(c *toolplane.Claim) { c.LeaseUntil = at(time.Hour) }},
		{"status changed, lease kept", func(c *toolplane.Claim) { c.Status = toolplane.ClaimUncertain }},
		{"status changed back, lease kept", func(c *toolplane.Claim) { c.Status = toolplane.ClaimProcessing }},
		{"status and lease changed", func(c *toolplane.Claim) {
			c.Status, c.LeaseUntil, c.Result = toolplane.ClaimCompleted, time.Time{}, []byte(`{"ok":true}`)
		}},
		{"completed, kept", func(c *toolplane.Claim) { c.Note = "settled" }},
	}
	for i, st := range steps {
		// Stale and future versions of the same change write nothing.
		for _, v := range []int64{cur.Version - 1, cur.Version + 1} {
			other := *cur
			st.change(&other)
			other.Version = v
			other.UpdatedAt = at(time.Duration(i) * time.Second)
			if ok, err := s.UpdateClaim(t.Context(), &other); ok || err != nil {
				t.Fatalf("%s: UpdateClaim(version %d, stored %d) = %v, %v; want false, nil", st.name, v, cur.Version, ok, err)
			}
			if other.Version != v {
				t.Fatalf("%s: failed UpdateClaim changed c.Version to %d, want %d", st.name, other.Version, v)
			}
			wantClaim(t, s, cur)
		}
		next := *cur
		st.change(&next)
		next.UpdatedAt = at(time.Duration(i+1) * time.Minute)
		ok, err := s.UpdateClaim(t.Context(), &next)
		if !ok || err != nil {
			t.Fatalf("%s: UpdateClaim = %v, %v; want true, nil", st.name, ok, err)
		}
		if next.Version != cur.Version+1 {
			t.Fatalf("%s: after UpdateClaim, c.Version = %d, want %d", st.name, next.Version, cur.Version+1)
		}
		wantClaim(t, s, &next)
		cur = &next
	}
}

func testClaimUpdateMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullClaim(org, "payments.refund_order", "absent", base)
	ok, err := s.UpdateClaim(t.Context(), c)
	if !refused(ok, err) {
		t.Fatalf("UpdateClaim(missing) = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if _, err := s.GetClaim(t.Context(), org, c.Tool, c.Key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("UpdateClaim(missing) created a row: GetClaim err = %v", err)
	}
}

func testClaimDeleteCompareAndSwap(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullClaim(org, "payments.refund_order", "k", base)
	c.Version = 5
	insertClaim(t, s, c)
	keep := fullClaim(org, "payments.refund_order", "neighbour", base)
	insertClaim(t, s, keep)

	for _, v := range []int64{4, 6, 0} {
		ok, err := s.DeleteClaim(t.Context(), org, c.Tool, c.Key, v)
		if ok || err != nil {
			t.Fatalf("DeleteClaim(version %d, stored 5) = %v, %v; want false, nil", v, ok, err)
		}
		wantClaim(t, s, c)
	}

	ok, err := s.DeleteClaim(t.Context(), org, c.Tool, c.Key, 5)
	if !ok || err != nil {
		t.Fatalf("DeleteClaim(current version) = %v, %v; want true, nil", ok, err)
	}
	if _, err := s.GetClaim(t.Context(), org, c.Tool, c.Key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetClaim after DeleteClaim: err = %v, want ErrNotFound", err)
	}
	wantClaim(t, s, keep)

	ok, err = s.DeleteClaim(t.Context(), org, c.Tool, c.Key, 5)
	if !refused(ok, err) {
		t.Fatalf("second DeleteClaim = %v, %v; want false and nil or ErrNotFound", ok, err)
	}

	// A released key can be claimed again.
	again := fullClaim(org, c.Tool, c.Key, at(time.Hour))
	insertClaim(t, s, again)
	wantClaim(t, s, again)
}

// seedClaims inserts n claims in status, out of order, with CreatedAt ties
// (some only at microsecond precision) that tool and key must break.
func seedClaims(t *testing.T, s toolplane.Store, org string, status toolplane.ClaimStatus, n int, from time.Time) []toolplane.Claim {
	t.Helper()
	all := make([]toolplane.Claim, n)
	for i := range n {
		// Groups of three share a microsecond: the first two exactly, the
		// third only once the store drops the nanoseconds.
		created := from.Add(time.Duration(i/3) * time.Second)
		if i%3 == 2 {
			created = stored(created).Add(100 * time.Nanosecond)
		}
		// Within a group, tool order and key order disagree, so only the
		// tool-then-key tie-break answers the expected order.
		tool := []string{"b.tool", "a.tool", "b.tool"}[i%3]
		c := fullClaim(org, tool, fmt.Sprintf("%s-k%03d", status, n-i), created)
		if i%3 == 0 {
			// A derived key, tied with a caller's key of the same tool: a
			// store keeping it in a form of its own still orders it by
			// its text.
			h := claimHash(fmt.Sprint(status, i))
			c.Key, c.RequestHash = derivedClaimKey(string(status), h), h
		}
		c.Status = status
		all[i] = *c
	}
	for _, i := range shuffled(n) {
		insertClaim(t, s, &all[i])
	}
	slices.SortFunc(all, compareClaims)
	return all
}

// listClaims pages through every claim in status, limit rows at a time, and
// calls between (if not nil) after each page but the last.
func listClaims(t *testing.T, s toolplane.Store, org string, status toolplane.ClaimStatus, limit int, between func()) []toolplane.Claim {
	t.Helper()
	return pageAll(t, "ListClaims", limit, between, func(after string) ([]toolplane.Claim, string, error) {
		return s.ListClaims(t.Context(), org, status, after, limit)
	})
}

func testClaimListByStatus(t *testing.T, s toolplane.Store) {
	org := newOrg()
	processing := seedClaims(t, s, org, toolplane.ClaimProcessing, 12, base)
	uncertain := seedClaims(t, s, org, toolplane.ClaimUncertain, 5, at(-time.Hour))
	seedClaims(t, s, org, toolplane.ClaimCompleted, 4, at(-2*time.Hour))

	tests := []struct {
		name      string
		status    toolplane.ClaimStatus
		limit     int
		want      []toolplane.Claim
		wantPages int
	}{
		{"one page", toolplane.ClaimProcessing, maxLimit, processing, 1},
		{"page exactly full", toolplane.ClaimProcessing, 12, processing, 1},
		{"one row past a page", toolplane.ClaimProcessing, 11, processing, 2},
		{"many pages", toolplane.ClaimProcessing, 5, processing, 3},
		{"one at a time", toolplane.ClaimUncertain, 1, uncertain, 5},
		{"no rows", toolplane.ClaimStatus("nonexistent"), 10, nil, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pages := 0
			got := listClaims(t, s, org, tt.status, tt.limit, func() { pages++ })
			pages++
			if pages != tt.wantPages {
				t.Errorf("pages = %d, want %d (the next cursor is empty exactly when no row follows)", pages, tt.wantPages)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("listed %d claims, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if d := diff(got[i], tt.want[i]); d != "" {
					t.Errorf("row %d (%s): %s", i, tt.want[i].Key, d)
				}
			}
		})
	}
}

func testClaimListPagingWithInserts(t *testing.T, s toolplane.Store) {
	org := newOrg()
	seeded := seedClaims(t, s, org, toolplane.ClaimProcessing, 50, base)
	seedClaims(t, s, org, toolplane.ClaimCompleted, 10, base)

	// Between pages, insert one claim after every seeded one (it must be
	// listed) and one before the cursor (it must not disturb the paging).
	var later []toolplane.Claim
	n := 0
	between := func() {
		n++
		c := fullClaim(org, "a.tool", fmt.Sprintf("later-%03d", n), at(time.Hour+time.Duration(n)*time.Second))
		insertClaim(t, s, c)
		later = append(later, *c)
		insertClaim(t, s, fullClaim(org, "a.tool", fmt.Sprintf("early-%03d", n), at(-time.Hour)))
	}
	got := listClaims(t, s, org, toolplane.ClaimProcessing, 7, between)

	seen := make(map[string]int)
	for i, c := range got {
		seen[claimID(c)]++
		if c.Status != toolplane.ClaimProcessing {
			t.Errorf("row %d (%s) has status %q", i, c.Key, c.Status)
		}
		if i > 0 && compareClaims(got[i-1], c) >= 0 {
			t.Errorf("row %d (%s) does not follow row %d (%s)", i, c.Key, i-1, got[i-1].Key)
		}
	}
	for id, k := range seen {
		if k > 1 {
			t.Errorf("claim %q listed %d times", id, k)
		}
	}
	for _, c := range append(seeded, later...) {
		if seen[claimID(c)] != 1 {
			t.Errorf("claim %s/%s skipped", c.Tool, c.Key)
		}
	}
}

func testClaimConcurrentInsert(t *testing.T, s toolplane.Store) {
	org := newOrg()
	w := race(t, "InsertClaim", func(i int) *toolplane.Claim {
		c := fullClaim(org, "payments.refund_order", "contended", base)
		c.Owner = fmt.Sprintf("worker-%d", i)
		return c
	}, func(c *toolplane.Claim) (bool, error) { return s.InsertClaim(t.Context(), c) })
	wantClaim(t, s, w)
}

func testClaimConcurrentUpdate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "contended", base)
	insertClaim(t, s, orig)

	w := race(t, "UpdateClaim", func(i int) *toolplane.Claim {
		c := *orig
		c.Owner = fmt.Sprintf("worker-%d", i)
		c.Attempts = i
		return &c
	}, func(c *toolplane.Claim) (bool, error) { return s.UpdateClaim(t.Context(), c) })
	if w.Version != orig.Version+1 {
		t.Errorf("winner's Version = %d, want %d", w.Version, orig.Version+1)
	}
	wantClaim(t, s, w)
}

// testClaimUpdateAudited: the claim's answer and its audit event are stored
// together or not at all.
func testClaimUpdateAudited(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	insertClaim(t, s, orig)
	cur := getClaim(t, s, org, orig.Tool, orig.Key)

	// A stale version stores neither the update nor the event.
	stale := *cur
	stale.Version--
	stale.Status = toolplane.ClaimCompleted
	if ok, err := s.UpdateClaimAudited(t.Context(), &stale, fullEvent(org, "ev-stale", at(time.Minute))); ok || err != nil {
		t.Fatalf("UpdateClaimAudited(stale) = %v, %v; want false, nil", ok, err)
	}
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("a stale update stored its event: %+v", got)
	}
	wantClaim(t, s, cur)

	// An event that cannot be stored (a duplicate id) rolls the update back.
	appendAudit(t, s, fullEvent(org, "ev-dup", at(time.Second)))
	next := *cur
	next.Status = toolplane.ClaimCompleted
	next.Result = []byte(`{"ok":true}`)
	next.UpdatedAt = at(time.Minute)
	ok, err := s.UpdateClaimAudited(t.Context(), &next, fullEvent(org, "ev-dup", at(time.Minute)))
	if ok || !errors.Is(err, toolplane.ErrExists) || next.Version != cur.Version {
		t.Fatalf("UpdateClaimAudited(duplicate event) = %v, %v (version %d); want false, ErrExists, version unchanged", ok, err, next.Version)
	}
	wantClaim(t, s, cur)

	// The current version stores both.
	ev := fullEvent(org, "ev-1", at(time.Minute))
	ok, err = s.UpdateClaimAudited(t.Context(), &next, ev)
	if !ok || err != nil || next.Version != cur.Version+1 {
		t.Fatalf("UpdateClaimAudited = %v, %v (version %d)", ok, err, next.Version)
	}
	wantClaim(t, s, &next)
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 2 || got[0].ID != "ev-1" {
		t.Fatalf("events = %+v", got)
	}

	// Another organization's claim is out of reach, and so is its event.
	other := next
	other.OrganizationID = newOrg()
	if ok, err := s.UpdateClaimAudited(t.Context(), &other, fullEvent(other.OrganizationID, "ev-x", at(time.Hour))); ok {
		t.Fatalf("updated another organization's claim (%v)", err)
	}
	if got := listAudit(t, s, other.OrganizationID, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("an event was stored for an update that did not apply: %+v", got)
	}
}

// testClaimDeleteAudited: a claim released by someone other than its
// caller and the audit event saying so are stored together or not at all.
func testClaimDeleteAudited(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullClaim(org, "payments.refund_order", "k", base)
	insertClaim(t, s, orig)
	cur := getClaim(t, s, org, orig.Tool, orig.Key)

	// A stale version deletes nothing and stores no event.
	if ok, err := s.DeleteClaimAudited(t.Context(), org, cur.Tool, cur.Key, cur.Version-1, fullEvent(org, "ev-stale", at(time.Minute))); ok || err != nil {
		t.Fatalf("DeleteClaimAudited(stale) = %v, %v; want false, nil", ok, err)
	}
	if got := listAudit(t, s, org, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("a stale delete stored its event: %+v", got)
	}
	wantClaim(t, s, cur)

	// An event that cannot be stored (a duplicate id) keeps the claim.
	appendAudit(t, s, fullEvent(org, "ev-dup", at(time.Second)))
	if ok, err := s.DeleteClaimAudited(t.Context(), org, cur.Tool, cur.Key, cur.Version, fullEvent(org, "ev-dup", at(time.Minute))); ok || !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("DeleteClaimAudited(duplicate event) = %v, %v; want false, ErrExists", ok, err)
	}
	wantClaim(t, s, cur)

	// Another organization's claim is out of reach, and so is its event.
	other := newOrg()
	if ok, _ := s.DeleteClaimAudited(t.Context(), other, cur.Tool, cur.Key, cur.Version, fullEvent(other, "ev-x", at(time.Hour))); ok {
		t.Fatal("deleted another organization's claim")
	}
	if got := listAudit(t, s, other, toolplane.AuditFilter{}, 10); len(got) != 0 {
		t.Fatalf("an event was stored for a delete that did not apply: %+v", got)
	}
	wantClaim(t, s, cur)

	// The current version does both.
	ev := fullEvent(org, "ev-1", at(time.Minute))
	if ok, err := s.DeleteClaimAudited(t.Context(), org, cur.Tool, cur.Key, cur.Version, ev); !ok || err != nil {
		t.Fatalf("DeleteClaimAudited = %v, %v", ok, err)
	}
	if _, err := s.GetClaim(t.Context(), org, cur.Tool, cur.Key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetClaim after DeleteClaimAudited = %v; want ErrNotFound", err)
	}
	got := listAudit(t, s, org, toolplane.AuditFilter{}, 10)
	if len(got) != 2 || got[0].ID != "ev-1" {
		t.Fatalf("events = %+v", got)
	}
	if d := diff(got[0], *ev); d != "" {
		t.Fatalf("stored event differs: %s", d)
	}
}

// claimHash answers a request hash as the invoker writes it (canonical.Hash):
// 64 lowercase hex digits.
func claimHash(seed string) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])
}

// derivedClaimKey answers a key of the form the invoker derives when the
// caller gives none (invoke.Key): canonical parts "run", the principal,
// the run, the step and last the arguments' hash h, which is the claim's
// request hash. A store may keep such a key, and its request hash, in a
// form of its own, and must read back the text.
func derivedClaimKey(run, h string) string {
	return "3:run,7:agent-1," + strconv.Itoa(len(run)) + ":" + run + ",5:agent,64:" + h
}

// testClaimDerivedKeys: derived keys, and keys and hashes that are nearly
// of their form, are each a claim of their own, read back byte for byte,
// found by every statement that names a claim by its key, and refused a
// second insert; two keys are one claim exactly when their texts are
// equal.
func testClaimDerivedKeys(t *testing.T, s toolplane.Store) {
	org := newOrg()
	const tool = "payments.refund_order"
	h1, h2 := claimHash("one"), claimHash("two")
	key := derivedClaimKey("run-1", h1)
	sum, _ := hex.DecodeString(h1)
	claims := map[string]*toolplane.Claim{}
	for _, tt := range []struct{ name, key, hash string }{
		{"derived", key, h1},
		{"derived, another hash than its digits", derivedClaimKey("run-2", h1), h2},
		{"derived, a hash of another form", derivedClaimKey("run-3", h1), "sha256:" + h1},
		{"derived, uppercase digits", strings.ToUpper(key[:len(key)-64]) + strings.ToUpper(h1), strings.ToUpper(h1)},
		{"derived, other digits", derivedClaimKey("run-1", h2), h2},
		{"derived, short digits", key[:len(key)-2], h1},
		{"derived, a NUL byte in a part", derivedClaimKey("run\x00-1", h1), h1},
		{"derived, not UTF-8 in a part", derivedClaimKey("run\xff-1", h1), h1},
		// The bytes a store may keep the derived key as, given as a key's
		// text: another claim.
		{"the derived key's packed bytes as text", key[:len(key)-64] + string(sum), h1},
		{"the digits alone", h1, h1},
		{"a caller's key ending with the digits", "6:caller,7:agent-1,67:k" + h1, h1},
		{"a caller's key", "6:caller,7:agent-1,3:k-1", h1},
	} {
		c := fullClaim(org, tool, tt.key, base)
		c.RequestHash = tt.hash
		insertClaim(t, s, c)
		claims[tt.name] = c
	}
	for name, c := range claims {
		t.Run(name, func(t *testing.T) {
			wantClaim(t, s, c)
			again := fullClaim(org, tool, c.Key, at(time.Hour))
			again.RequestHash = h2
			if ok, err := s.InsertClaim(t.Context(), again); ok || err != nil {
				t.Fatalf("a second InsertClaim = %v, %v; want false, nil", ok, err)
			}
			wantClaim(t, s, c)
		})
	}

	// Every write naming the derived key by its text finds it.
	cur := getClaim(t, s, org, tool, key)
	if d, ok := s.(toolplane.ClaimDispatcher); ok {
		cur.Dispatched, cur.Attempts, cur.UpdatedAt = true, 3, at(time.Second)
		if ok, err := d.DispatchClaim(t.Context(), cur); !ok || err != nil {
			t.Fatalf("DispatchClaim = %v, %v", ok, err)
		}
		wantClaim(t, s, cur)
	}
	cur.Status, cur.Reason, cur.UpdatedAt = toolplane.ClaimUncertain, "lease lost", at(2*time.Second)
	if ok, err := s.UpdateClaim(t.Context(), cur); !ok || err != nil {
		t.Fatalf("UpdateClaim = %v, %v", ok, err)
	}
	wantClaim(t, s, cur)
	if got, _, err := s.ListClaims(t.Context(), org, toolplane.ClaimUncertain, "", 10); err != nil || len(got) != 1 || diff(got[0], *cur) != "" {
		t.Fatalf("ListClaims(uncertain) = %+v, %v; want the derived key's claim", got, err)
	}
	cur.Status, cur.Result, cur.UpdatedAt = toolplane.ClaimCompleted, []byte(`{"ok":true}`), at(3*time.Second)
	if cc, ok := s.(toolplane.ClaimCompleter); ok {
		if ok, err := cc.CompleteClaimAudited(t.Context(), cur, fullEvent(org, "ev-1", at(3*time.Second))); !ok || err != nil {
			t.Fatalf("CompleteClaimAudited = %v, %v", ok, err)
		}
	} else if ok, err := s.UpdateClaimAudited(t.Context(), cur, fullEvent(org, "ev-1", at(3*time.Second))); !ok || err != nil {
		t.Fatalf("UpdateClaimAudited = %v, %v", ok, err)
	}
	wantClaim(t, s, cur)
	if ok, err := s.DeleteClaim(t.Context(), org, tool, key, cur.Version); !ok || err != nil {
		t.Fatalf("DeleteClaim = %v, %v", ok, err)
	}
	if _, err := s.GetClaim(t.Context(), org, tool, key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetClaim after DeleteClaim = %v; want ErrNotFound", err)
	}
	// The others are left as they were.
	delete(claims, "derived")
	for _, c := range claims {
		wantClaim(t, s, c)
	}
	d := claims["derived, other digits"]
	if ok, err := s.DeleteClaimAudited(t.Context(), org, tool, d.Key, d.Version, fullEvent(org, "ev-2", at(4*time.Second))); !ok || err != nil {
		t.Fatalf("DeleteClaimAudited = %v, %v", ok, err)
	}
	if _, err := s.GetClaim(t.Context(), org, tool, d.Key); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetClaim after DeleteClaimAudited = %v; want ErrNotFound", err)
	}
}
