package storetest

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// The authorization tables are an organization's, like every table but the
// catalogue; each subtest writes under organizations of its own.
//
// The contract beyond the interface comments:
//
//   - Rows are kept as inserted: times to the microsecond in UTC, string
//     lists (TenantScope, Refs) byte for byte with nil and empty alike, a
//     change's Detail byte for byte.
//   - InsertGrant, InsertDeny and AppendChange refuse a second row with the
//     same ID in the organization with ErrExists. InsertGrant refuses a
//     grant that names both a pattern and a bundle, or neither, storing
//     nothing.
//   - ListGrants and ListDenies are oldest first, ties by ID bytewise;
//     ListBundles is by name bytewise; ListChanges is newest first, ties by
//     ID descending, paged like ListAudit. Expired grants are listed: the
//     caller judges expiry.
//   - RevokeGrant writes RevokedAt and RevokedBy of a standing grant only:
//     a revocation is never moved, and of concurrent revocations exactly
//     one succeeds. A zero time is an error.
//   - PutBundle replacing a bundle writes Refs and UpdatedAt and keeps
//     CreatedAt and CreatedBy.
//   - Every successful grant, deny and bundle write grows the
//     organization's AuthzRevision, also when they run concurrently.
var (
	grantCases = []suiteCase{
		{"InsertRoundTrip", testGrantInsertRoundTrip},
		{"InsertDuplicate", testGrantInsertDuplicate},
		{"PatternOrBundle", testGrantPatternOrBundle},
		{"People", testGrantPeople},
		{"List", testGrantList},
		{"Revoke", testGrantRevoke},
		{"Revision", testGrantRevision},
		{"ConcurrentRevoke", testGrantConcurrentRevoke},
		{"ConcurrentRevision", testAuthzConcurrentRevision},
	}
	denyCases = []suiteCase{
		{"InsertAndList", testDenyInsertAndList},
		{"InsertDuplicate", testDenyInsertDuplicate},
		{"Delete", testDenyDelete},
		{"Revision", testDenyRevision},
	}
	bundleCases = []suiteCase{
		{"PutRoundTrip", testBundlePutRoundTrip},
		{"GetMissing", testBundleGetMissing},
		{"Replace", testBundleReplace},
		{"List", testBundleList},
		{"Revision", testBundleRevision},
		{"ConcurrentPut", testBundleConcurrentPut},
	}
	changeCases = []suiteCase{
		{"AppendRoundTrip", testChangeAppendRoundTrip},
		{"AppendDuplicate", testChangeAppendDuplicate},
		{"ListNewestFirst", testChangeListNewestFirst},
		{"ListFilter", testChangeListFilter},
		{"ListInvalidArguments", testChangeListInvalidArguments},
	}
)

// fullGrant answers a pattern grant with every field set to a value a store
// could lose: sub-microsecond times in a foreign zone, tenants a list
// format must quote. It is standing.
func fullGrant(org, id, agent string, created time.Time) *toolplane.Grant {
	return &toolplane.Grant{
		ID:             id,
		OrganizationID: org,
		AgentID:        agent,
		Pattern:        "payments.refund_order@^2.1.0",
		TenantScope:    []string{"tenant-1", "tenant \"two\"", "a,b", "{x}"},
		ExpiresAt:      created.Add(30*24*time.Hour + 7*time.Nanosecond),
		GrantedBy:      "user-ada",
		CreatedAt:      created,
	}
}

func insertGrant(t *testing.T, s toolplane.Store, g *toolplane.Grant) {
	t.Helper()
	if err := s.InsertGrant(t.Context(), g); err != nil {
		t.Fatalf("InsertGrant(%s) = %v", g.ID, err)
	}
}

func listGrants(t *testing.T, s toolplane.Store, org, agent string, withRevoked bool) []toolplane.Grant {
	t.Helper()
	rows, err := s.ListGrants(t.Context(), org, agent, withRevoked)
	if err != nil {
		t.Fatalf("ListGrants(%q, revoked %v) = %v", agent, withRevoked, err)
	}
	return rows
}

func grantID(g toolplane.Grant) string { return g.ID }

// compareCreated is the order of grants and denies: CreatedAt as stored,
// then ID.
func compareCreated(aAt time.Time, aID string, bAt time.Time, bID string) int {
	if c := stored(aAt).Compare(stored(bAt)); c != 0 {
		return c
	}
	return strings.Compare(aID, bID)
}

// authzRevision answers the organization's authorization revision.
func authzRevision(t *testing.T, s toolplane.Store, org string) int64 {
	t.Helper()
	rev, err := s.AuthzRevision(t.Context(), org)
	if err != nil {
		t.Fatalf("AuthzRevision = %v", err)
	}
	return rev
}

// wantAuthzGrown fails t unless org's revision is above before, and answers
// it.
func wantAuthzGrown(t *testing.T, s toolplane.Store, org string, before int64, after string) int64 {
	t.Helper()
	rev := authzRevision(t, s, org)
	if rev <= before {
		t.Errorf("AuthzRevision after %s = %d, was %d; want it grown", after, rev, before)
	}
	return rev
}

func testGrantInsertRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	full := fullGrant(org, "grt-full", "agent-billing", base)
	bundle := fullGrant(org, "grt-bundle", "agent-billing", at(time.Second))
	bundle.Pattern, bundle.Bundle = "", "finance-basics"
	zero := &toolplane.Grant{ID: "grt-zero", OrganizationID: org, Pattern: "*", CreatedAt: at(2 * time.Second)}
	empty := fullGrant(org, "grt-empty", "agent-support", at(3*time.Second))
	empty.TenantScope = []string{}
	revoked := fullGrant(org, "grt-revoked", "agent-support", at(4*time.Second))
	revoked.RevokedAt, revoked.RevokedBy = at(5*time.Second+3*time.Nanosecond), "user-grace"
	all := []*toolplane.Grant{full, bundle, zero, empty, revoked}
	for _, g := range all {
		insertGrant(t, s, g)
	}
	var want []toolplane.Grant
	for _, g := range all {
		want = append(want, *g)
	}
	wantRows(t, "ListGrants(with revoked)", listGrants(t, s, org, "", true), want, grantID)
	wantRows(t, "ListGrants(standing)", listGrants(t, s, org, "", false), want[:4], grantID)
}

func testGrantInsertDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullGrant(org, "grt-1", "agent-billing", base)
	insertGrant(t, s, first)
	dup := fullGrant(org, first.ID, "agent-mallory", at(time.Hour))
	dup.Pattern = "*"
	if err := s.InsertGrant(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertGrant(%s) = %v, want ErrExists", first.ID, err)
	}
	wantRows(t, "ListGrants", listGrants(t, s, org, "", true), []toolplane.Grant{*first}, grantID)
}

func testGrantPatternOrBundle(t *testing.T, s toolplane.Store) {
	org := newOrg()
	both := fullGrant(org, "grt-both", "agent-billing", base)
	both.Bundle = "finance-basics"
	neither := fullGrant(org, "grt-neither", "agent-billing", base)
	neither.Pattern = ""
	for _, g := range []*toolplane.Grant{both, neither} {
		if err := s.InsertGrant(t.Context(), g); err == nil {
			t.Errorf("InsertGrant(pattern %q, bundle %q) = nil, want an error", g.Pattern, g.Bundle)
		}
	}
	if rows := listGrants(t, s, org, "", true); len(rows) != 0 {
		t.Errorf("after refused inserts, ListGrants = %d rows, want none", len(rows))
	}
}

// testGrantPeople: a grant to a person or to a group round-trips with its
// subject, is listed with the organization's grants (never as an
// agent's), and one naming two subjects is refused.
func testGrantPeople(t *testing.T, s toolplane.Store) {
	org := newOrg()
	person := fullGrant(org, "grt-sam", "", base)
	person.UserID = "sam@example.com"
	group := fullGrant(org, "grt-finance", "", at(time.Second))
	group.Group, group.Pattern, group.Bundle = "finance", "", "finance-basics"
	agent := fullGrant(org, "grt-agent", "agent-billing", at(2*time.Second))
	for _, g := range []*toolplane.Grant{person, group, agent} {
		insertGrant(t, s, g)
	}
	wantRows(t, "ListGrants", listGrants(t, s, org, "", false), []toolplane.Grant{*person, *group, *agent}, grantID)
	wantRows(t, "ListGrants(agent)", listGrants(t, s, org, "agent-billing", false), []toolplane.Grant{*agent}, grantID)
	if rows := listGrants(t, s, org, person.UserID, false); len(rows) != 0 {
		t.Errorf("ListGrants(%q) = %d rows; a person's grant is listed as an agent's", person.UserID, len(rows))
	}
	two := fullGrant(org, "grt-two", "agent-billing", at(3*time.Second))
	two.UserID = "sam@example.com"
	if err := s.InsertGrant(t.Context(), two); err == nil {
		t.Error("InsertGrant of a grant to an agent and a person = nil, want an error")
	}
	if err := s.RevokeGrant(t.Context(), org, person.ID, "user-grace", at(time.Hour)); err != nil {
		t.Fatalf("RevokeGrant(person) = %v", err)
	}
	wantRows(t, "ListGrants(standing)", listGrants(t, s, org, "", false), []toolplane.Grant{*group, *agent}, grantID)
}

func testGrantList(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	agents := []string{"agent-a", "agent-b", "agent-c"}
	const n = 30
	all := make([]toolplane.Grant, n)
	for i := range n {
		created := at(time.Duration(i/3) * time.Second)
		if i%3 == 1 {
			created = stored(created).Add(300 * time.Nanosecond)
		}
		all[i] = *fullGrant(org, fmt.Sprintf("grt-%03d", (i*7)%n), agents[i%len(agents)], created)
		if i%4 == 0 {
			all[i].Pattern, all[i].Bundle = "", fmt.Sprintf("bundle-%d", i)
		}
		if i%5 == 0 {
			all[i].ExpiresAt = at(-time.Hour) // expired, still listed
		}
	}
	for _, i := range shuffled(n) {
		insertGrant(t, s, &all[i])
	}
	insertGrant(t, s, fullGrant(other, "grt-000", "agent-a", base))
	// Revoke some, after the fact.
	for i := range all {
		if i%3 == 2 {
			when := at(time.Hour + time.Duration(i)*time.Second)
			if err := s.RevokeGrant(t.Context(), org, all[i].ID, "user-grace", when); err != nil {
				t.Fatalf("RevokeGrant(%s) = %v", all[i].ID, err)
			}
			all[i].RevokedAt, all[i].RevokedBy = when, "user-grace"
		}
	}
	slices.SortFunc(all, func(a, b toolplane.Grant) int { return compareCreated(a.CreatedAt, a.ID, b.CreatedAt, b.ID) })

	for _, agent := range append([]string{"", "agent-absent"}, agents...) {
		for _, withRevoked := range []bool{true, false} {
			t.Run(fmt.Sprintf("agent %q revoked %v", agent, withRevoked), func(t *testing.T) {
				var want []toolplane.Grant
				for _, g := range all {
					if (agent == "" || g.AgentID == agent) && (withRevoked || g.RevokedAt.IsZero()) {
						want = append(want, g)
					}
				}
				wantRows(t, "ListGrants", listGrants(t, s, org, agent, withRevoked), want, grantID)
			})
		}
	}
	if rows := listGrants(t, s, newOrg(), "", true); len(rows) != 0 {
		t.Errorf("ListGrants(organization without grants) = %d rows, want none", len(rows))
	}
}

func testGrantRevoke(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org := newOrg()
	g := fullGrant(org, "grt-1", "agent-billing", base)
	keep := fullGrant(org, "grt-2", "agent-billing", at(time.Second))
	insertGrant(t, s, g)
	insertGrant(t, s, keep)

	if err := s.RevokeGrant(ctx, org, g.ID, "user-grace", time.Time{}); err == nil {
		t.Errorf("RevokeGrant(zero time) = nil, want an error")
	}
	wantRows(t, "ListGrants after a refused revocation", listGrants(t, s, org, "", false), []toolplane.Grant{*g, *keep}, grantID)

	revokedAt := at(time.Hour + 5*time.Nanosecond)
	if err := s.RevokeGrant(ctx, org, g.ID, "user-grace", revokedAt); err != nil {
		t.Fatalf("RevokeGrant = %v", err)
	}
	revoked := *g
	revoked.RevokedAt, revoked.RevokedBy = revokedAt, "user-grace"
	wantRows(t, "ListGrants(standing)", listGrants(t, s, org, "", false), []toolplane.Grant{*keep}, grantID)
	wantRows(t, "ListGrants(with revoked)", listGrants(t, s, org, "", true), []toolplane.Grant{revoked, *keep}, grantID)

	// A revoked grant is not standing: revoking it again is refused, and
	// the first revocation stays.
	if err := s.RevokeGrant(ctx, org, g.ID, "user-mallory", at(2*time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("second RevokeGrant = %v, want ErrNotFound", err)
	}
	for _, id := range []string{"grt-absent", "", strings.ToUpper(keep.ID), keep.ID + "\x00", "grt-\xff"} {
		if err := s.RevokeGrant(ctx, org, id, "user-grace", at(2*time.Hour)); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("RevokeGrant(%q) = %v, want ErrNotFound", id, err)
		}
	}
	wantRows(t, "ListGrants(with revoked)", listGrants(t, s, org, "", true), []toolplane.Grant{revoked, *keep}, grantID)
}

func testGrantRevision(t *testing.T, s toolplane.Store) {
	org := newOrg()
	r := authzRevision(t, s, org)
	g := fullGrant(org, "grt-1", "agent-billing", base)
	insertGrant(t, s, g)
	r = wantAuthzGrown(t, s, org, r, "InsertGrant")
	if err := s.RevokeGrant(t.Context(), org, g.ID, "user-grace", at(time.Hour)); err != nil {
		t.Fatal(err)
	}
	wantAuthzGrown(t, s, org, r, "RevokeGrant")
}

// testGrantConcurrentRevoke: of many revocations of one grant at once,
// exactly one succeeds, and it is the one stored.
func testGrantConcurrentRevoke(t *testing.T, s toolplane.Store) {
	org := newOrg()
	g := fullGrant(org, "grt-1", "agent-billing", base)
	insertGrant(t, s, g)
	var (
		mu     sync.Mutex
		winner []string
	)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			by := fmt.Sprintf("user-%d", i)
			<-start
			err := s.RevokeGrant(t.Context(), org, g.ID, by, at(time.Duration(i)*time.Second))
			switch {
			case err == nil:
				mu.Lock()
				winner = append(winner, by)
				mu.Unlock()
			case !errors.Is(err, toolplane.ErrNotFound):
				t.Errorf("RevokeGrant(writer %d) = %v, want nil or ErrNotFound", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if len(winner) != 1 {
		t.Fatalf("%d of %d concurrent RevokeGrant calls succeeded, want exactly 1", len(winner), writers)
	}
	rows := listGrants(t, s, org, "", true)
	if len(rows) != 1 || rows[0].RevokedBy != winner[0] {
		t.Errorf("after the race, ListGrants = %+v; want the grant revoked by %s", rows, winner[0])
	}
}

// testAuthzConcurrentRevision: concurrent grant, deny and bundle writes of
// one organization each move its revision, so a node that read it between
// any two of them notices the second.
func testAuthzConcurrentRevision(t *testing.T, s toolplane.Store) {
	org := newOrg()
	before := authzRevision(t, s, org)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			var err error
			switch i % 3 {
			case 0:
				err = s.InsertGrant(t.Context(), fullGrant(org, fmt.Sprintf("grt-%d", i), "agent-billing", base))
			case 1:
				err = s.InsertDeny(t.Context(), fullDeny(org, fmt.Sprintf("dny-%d", i), base))
			default:
				err = s.PutBundle(t.Context(), fullBundle(org, fmt.Sprintf("bundle-%d", i), base))
			}
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	if after := authzRevision(t, s, org); after-before < writers {
		t.Errorf("after %d concurrent writes, AuthzRevision grew from %d to %d; want at least %d more",
			writers, before, after, writers)
	}
}

// fullDeny answers a deny with every field set.
func fullDeny(org, id string, created time.Time) *toolplane.Deny {
	return &toolplane.Deny{
		ID:             id,
		OrganizationID: org,
		AgentID:        "agent-billing",
		Pattern:        "payments.*",
		Reason:         "incident INC-42: refunds paused",
		CreatedBy:      "user-ada",
		CreatedAt:      created,
	}
}

func insertDeny(t *testing.T, s toolplane.Store, d *toolplane.Deny) {
	t.Helper()
	if err := s.InsertDeny(t.Context(), d); err != nil {
		t.Fatalf("InsertDeny(%s) = %v", d.ID, err)
	}
}

func listDenies(t *testing.T, s toolplane.Store, org string) []toolplane.Deny {
	t.Helper()
	rows, err := s.ListDenies(t.Context(), org)
	if err != nil {
		t.Fatalf("ListDenies = %v", err)
	}
	return rows
}

func denyID(d toolplane.Deny) string { return d.ID }

func testDenyInsertAndList(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	const n = 20
	all := make([]toolplane.Deny, n)
	for i := range n {
		created := at(time.Duration(i/3) * time.Second)
		if i%3 == 1 {
			created = stored(created).Add(300 * time.Nanosecond)
		}
		all[i] = *fullDeny(org, fmt.Sprintf("dny-%03d", (i*7)%n), created)
		if i%4 == 0 {
			all[i].AgentID = toolplane.EveryAgent
		}
	}
	all = append(all, toolplane.Deny{ID: "dny-zero", OrganizationID: org, CreatedAt: at(-time.Hour)})
	for _, i := range shuffled(len(all)) {
		insertDeny(t, s, &all[i])
	}
	insertDeny(t, s, fullDeny(other, "dny-000", base))
	slices.SortFunc(all, func(a, b toolplane.Deny) int { return compareCreated(a.CreatedAt, a.ID, b.CreatedAt, b.ID) })
	wantRows(t, "ListDenies", listDenies(t, s, org), all, denyID)
	if rows := listDenies(t, s, newOrg()); len(rows) != 0 {
		t.Errorf("ListDenies(organization without denies) = %d rows, want none", len(rows))
	}
}

func testDenyInsertDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullDeny(org, "dny-1", base)
	insertDeny(t, s, first)
	dup := fullDeny(org, first.ID, at(time.Hour))
	dup.AgentID, dup.Pattern = toolplane.EveryAgent, "*"
	if err := s.InsertDeny(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertDeny(%s) = %v, want ErrExists", first.ID, err)
	}
	wantRows(t, "ListDenies", listDenies(t, s, org), []toolplane.Deny{*first}, denyID)
}

func testDenyDelete(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org := newOrg()
	d1, d2 := fullDeny(org, "dny-1", base), fullDeny(org, "dny-2", at(time.Second))
	insertDeny(t, s, d1)
	insertDeny(t, s, d2)
	if err := s.DeleteDeny(ctx, org, d1.ID); err != nil {
		t.Fatalf("DeleteDeny = %v", err)
	}
	wantRows(t, "ListDenies", listDenies(t, s, org), []toolplane.Deny{*d2}, denyID)
	for _, id := range []string{d1.ID, "dny-absent", "", strings.ToUpper(d2.ID), d2.ID + "\x00", "dny-\xff"} {
		if err := s.DeleteDeny(ctx, org, id); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("DeleteDeny(%q) = %v, want ErrNotFound", id, err)
		}
	}
	wantRows(t, "ListDenies", listDenies(t, s, org), []toolplane.Deny{*d2}, denyID)
	// A lifted deny's ID may be used again.
	insertDeny(t, s, d1)
	wantRows(t, "ListDenies", listDenies(t, s, org), []toolplane.Deny{*d1, *d2}, denyID)
}

func testDenyRevision(t *testing.T, s toolplane.Store) {
	org := newOrg()
	r := authzRevision(t, s, org)
	d := fullDeny(org, "dny-1", base)
	insertDeny(t, s, d)
	r = wantAuthzGrown(t, s, org, r, "InsertDeny")
	if err := s.DeleteDeny(t.Context(), org, d.ID); err != nil {
		t.Fatal(err)
	}
	wantAuthzGrown(t, s, org, r, "DeleteDeny")
}

// fullBundle answers a bundle with every field set, refs a list format
// must quote among them.
func fullBundle(org, name string, created time.Time) *toolplane.Bundle {
	return &toolplane.Bundle{
		OrganizationID: org,
		Name:           name,
		Refs:           []string{"payments.refund_order@^2.1.0", "crm.read@~1.4", `odd "ref", {x}`},
		CreatedBy:      "user-ada",
		CreatedAt:      created,
		UpdatedAt:      created.Add(time.Minute + 9*time.Nanosecond),
	}
}

func putBundle(t *testing.T, s toolplane.Store, b *toolplane.Bundle) {
	t.Helper()
	if err := s.PutBundle(t.Context(), b); err != nil {
		t.Fatalf("PutBundle(%s) = %v", b.Name, err)
	}
}

// wantBundle fails t unless the stored bundle is want.
func wantBundle(t *testing.T, s toolplane.Store, want *toolplane.Bundle) {
	t.Helper()
	got, err := s.GetBundle(t.Context(), want.OrganizationID, want.Name)
	if err != nil {
		t.Fatalf("GetBundle(%s) = %v", want.Name, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetBundle(%s): %s", want.Name, d)
	}
}

func bundleName(b toolplane.Bundle) string { return b.Name }

func testBundlePutRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	full := fullBundle(org, "finance-basics", base)
	zero := &toolplane.Bundle{OrganizationID: org, Name: "zero"}
	empty := fullBundle(org, "empty", base)
	empty.Refs = []string{}
	for _, b := range []*toolplane.Bundle{full, zero, empty} {
		putBundle(t, s, b)
		wantBundle(t, s, b)
	}
}

func testBundleGetMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	b := fullBundle(org, "finance-basics", base)
	putBundle(t, s, b)
	for _, name := range []string{"absent", "", strings.ToUpper(b.Name), b.Name + " ", b.Name + "\x00", "\xff"} {
		if got, err := s.GetBundle(t.Context(), org, name); !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("GetBundle(%q) = %+v, %v; want ErrNotFound", name, got, err)
		}
	}
}

func testBundleReplace(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullBundle(org, "finance-basics", base)
	putBundle(t, s, orig)

	repl := fullBundle(org, orig.Name, at(24*time.Hour))
	repl.CreatedBy = "user-mallory"
	repl.Refs = []string{"payments.*"}
	repl.UpdatedAt = at(25*time.Hour + 3*time.Nanosecond)
	putBundle(t, s, repl)
	want := *repl
	want.CreatedAt, want.CreatedBy = orig.CreatedAt, orig.CreatedBy
	wantBundle(t, s, &want)

	// Replaced by nothing: an empty bundle.
	repl.Refs = nil
	repl.UpdatedAt = at(26 * time.Hour)
	putBundle(t, s, repl)
	want.Refs, want.UpdatedAt = nil, repl.UpdatedAt
	wantBundle(t, s, &want)
}

func testBundleList(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	var want []toolplane.Bundle
	names := []string{"b", "B", "a-2", "a", "ä", "a b", "_", "z"}
	for i, name := range names {
		b := fullBundle(org, name, at(time.Duration(len(names)-i)*time.Second))
		putBundle(t, s, b)
		want = append(want, *b)
	}
	putBundle(t, s, fullBundle(other, "a", base))
	slices.SortFunc(want, func(a, b toolplane.Bundle) int { return strings.Compare(a.Name, b.Name) })
	rows, err := s.ListBundles(t.Context(), org)
	if err != nil {
		t.Fatalf("ListBundles = %v", err)
	}
	wantRows(t, "ListBundles", rows, want, bundleName)
	if rows, err := s.ListBundles(t.Context(), newOrg()); err != nil || len(rows) != 0 {
		t.Errorf("ListBundles(organization without bundles) = %d rows, %v; want none", len(rows), err)
	}
}

func testBundleRevision(t *testing.T, s toolplane.Store) {
	org := newOrg()
	r := authzRevision(t, s, org)
	b := fullBundle(org, "finance-basics", base)
	putBundle(t, s, b)
	r = wantAuthzGrown(t, s, org, r, "PutBundle (create)")
	b.Refs = []string{"payments.*"}
	putBundle(t, s, b)
	wantAuthzGrown(t, s, org, r, "PutBundle (replace)")
}

// testBundleConcurrentPut: many puts of one new bundle at once all succeed
// (one creates, the others replace), leaving one bundle.
func testBundleConcurrentPut(t *testing.T, s toolplane.Store) {
	org := newOrg()
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			b := fullBundle(org, "contended", at(time.Duration(i)*time.Second))
			b.Refs, b.CreatedBy = []string{fmt.Sprintf("ref-%d", i)}, fmt.Sprintf("user-%d", i)
			<-start
			if err := s.PutBundle(t.Context(), b); err != nil {
				t.Errorf("PutBundle(writer %d) = %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	rows, err := s.ListBundles(t.Context(), org)
	if err != nil || len(rows) != 1 {
		t.Fatalf("ListBundles = %d rows, %v; want one", len(rows), err)
	}
	b := rows[0]
	if len(b.Refs) != 1 || !strings.HasPrefix(b.Refs[0], "ref-") || !strings.HasPrefix(b.CreatedBy, "user-") {
		t.Errorf("after the race, bundle = %+v; want one writer's refs and one writer's creation", b)
	}
}

// fullChange answers a change with every field set; its Detail is JSON a
// JSON column would rewrite.
func fullChange(org, id string, created time.Time) *toolplane.Change {
	return &toolplane.Change{
		ID:             id,
		OrganizationID: org,
		Kind:           "grant.add",
		Subject:        "agent-billing",
		Actor:          "user-ada",
		Detail:         []byte(`{"pattern": "payments.*",   "tenants":[ ],"z":"\u00e9", "a": 1.50}`),
		CreatedAt:      created,
	}
}

func appendChange(t *testing.T, s toolplane.Store, c *toolplane.Change) {
	t.Helper()
	if err := s.AppendChange(t.Context(), c); err != nil {
		t.Fatalf("AppendChange(%s) = %v", c.ID, err)
	}
}

// compareChanges is the change log order: newest first, ties by ID
// descending.
func compareChanges(a, b toolplane.Change) int {
	return compareCreated(b.CreatedAt, b.ID, a.CreatedAt, a.ID)
}

func changeID(c toolplane.Change) string { return c.ID }

// listChanges pages through every matching change.
func listChanges(t *testing.T, s toolplane.Store, org, kind, subject string, limit int) []toolplane.Change {
	t.Helper()
	return pageAll(t, "ListChanges", limit, nil, func(after string) ([]toolplane.Change, string, error) {
		return s.ListChanges(t.Context(), org, kind, subject, after, limit)
	})
}

func testChangeAppendRoundTrip(t *testing.T, s toolplane.Store) {
	org := newOrg()
	full := fullChange(org, "chg-full", at(time.Second))
	zero := &toolplane.Change{ID: "chg-zero", OrganizationID: org, CreatedAt: base}
	empty := fullChange(org, "chg-empty", at(-time.Second))
	empty.Detail = []byte{}
	for _, c := range []*toolplane.Change{zero, full, empty} {
		appendChange(t, s, c)
	}
	got, next, err := s.ListChanges(t.Context(), org, "", "", "", 10)
	if err != nil || next != "" {
		t.Fatalf("ListChanges = %v, next %q; want nil, no next cursor", err, next)
	}
	wantRows(t, "ListChanges", got, []toolplane.Change{*full, *zero, *empty}, changeID)
}

func testChangeAppendDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullChange(org, "chg-1", base)
	appendChange(t, s, first)
	dup := fullChange(org, first.ID, at(time.Hour))
	dup.Kind = "deny.add"
	if err := s.AppendChange(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second AppendChange(%s) = %v, want ErrExists", first.ID, err)
	}
	wantRows(t, "ListChanges", listChanges(t, s, org, "", "", 10), []toolplane.Change{*first}, changeID)
}

func testChangeListNewestFirst(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	const n = 40
	all := make([]toolplane.Change, n)
	for i := range n {
		created := at(time.Duration(i/3) * time.Second)
		if i%3 == 1 {
			created = stored(created).Add(300 * time.Nanosecond)
		}
		all[i] = *fullChange(org, fmt.Sprintf("chg-%03d", (i*37)%n), created)
	}
	for _, i := range shuffled(n) {
		appendChange(t, s, &all[i])
	}
	appendChange(t, s, fullChange(other, "chg-000", base))
	slices.SortFunc(all, compareChanges)
	for _, limit := range []int{maxLimit, n, n - 1, 6, 1} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			wantRows(t, "ListChanges", listChanges(t, s, org, "", "", limit), all, changeID)
		})
	}
}

func testChangeListFilter(t *testing.T, s toolplane.Store) {
	org := newOrg()
	var all []toolplane.Change
	i := 0
	for _, kind := range []string{"version.publish", "grant.add", "deny.add"} {
		for _, subject := range []string{"agent-a", "agent-b", "payments.refund_order@2.1.0"} {
			for range 3 {
				c := fullChange(org, fmt.Sprintf("chg-%02d", i), at(time.Duration(i%5)*time.Second))
				c.Kind, c.Subject = kind, subject
				appendChange(t, s, c)
				all = append(all, *c)
				i++
			}
		}
	}
	slices.SortFunc(all, compareChanges)
	tests := []struct{ name, kind, subject string }{
		{"empty matches all", "", ""},
		{"kind", "grant.add", ""},
		{"subject", "", "payments.refund_order@2.1.0"},
		{"kind and subject", "deny.add", "agent-a"},
		{"no kind matches", "bundle.put", ""},
		{"no combination", "version.publish", "agent-c"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var want []toolplane.Change
			for _, c := range all {
				if (tt.kind == "" || c.Kind == tt.kind) && (tt.subject == "" || c.Subject == tt.subject) {
					want = append(want, c)
				}
			}
			wantRows(t, "ListChanges", listChanges(t, s, org, tt.kind, tt.subject, 4), want, changeID)
		})
	}
}

func testChangeListInvalidArguments(t *testing.T, s toolplane.Store) {
	org := newOrg()
	// A row to answer, so a store that only validates when it has rows to
	// answer fails too.
	appendChange(t, s, fullChange(org, "chg-1", base))
	for _, limit := range []int{math.MinInt, -1, 0, maxLimit + 1, math.MaxInt} {
		if _, _, err := s.ListChanges(t.Context(), org, "", "", "", limit); err == nil {
			t.Errorf("ListChanges(limit %d) err = nil, want an error", limit)
		}
	}
	for _, limit := range []int{1, maxLimit} {
		if _, _, err := s.ListChanges(t.Context(), org, "", "", "", limit); err != nil {
			t.Errorf("ListChanges(limit %d) = %v", limit, err)
		}
	}
	for _, c := range []string{
		"!!not a cursor!!",
		base64.RawURLEncoding.EncodeToString([]byte("nonsense")),
		base64.StdEncoding.EncodeToString([]byte("{}")),
		" ",
	} {
		if _, _, err := s.ListChanges(t.Context(), org, "", "", c, 10); err == nil {
			t.Errorf("ListChanges(after %q) err = nil, want an error", c)
		}
	}
}
