package storetest

import (
	"crypto/rand"
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

// The catalogue is scoped to organizations like every other table: each
// subtest publishes under an organization of its own, and also mints tool
// names and owners of its own, so that ListEveryToolVersion, which reads
// every organization, finds its rows among other subtests'. For the same
// reason the revision checks hold a revision to growing, never to a value:
// another subtest's writes move it as well.
//
// The contract beyond the interface comments:
//
//   - A version is kept as inserted: Definition byte for byte (whitespace
//     and key order included), times to the microsecond in UTC, a nil and
//     an empty ReviewReasons alike.
//   - Insert keeps the Revision it is given; a successful UpdateToolVersion
//     stores Revision+1 and sets the argument's Revision to it, an
//     unsuccessful one changes neither.
//   - UpdateToolVersion writes State, ReviewReasons, ReviewedBy, ReviewedAt,
//     ReviewNote, SunsetAt, Replacement, DeprecationNote, RetireBlocked and
//     UpdatedAt, and
//     nothing else. A stale revision answers false with a nil error; a
//     version that is not there answers ErrNotFound.
//   - ListToolVersions orders by name (bytewise), then PublishedAt as
//     stored, then insertion order; versions published in one microsecond
//     list in the order they were inserted, whatever their version strings.
//     ListEveryToolVersion orders by organization (bytewise) first.
//   - Every insert and every successful update grows CatalogRevision, also
//     when they run concurrently (no two of them see one revision).
var catalogCases = []suiteCase{
	{"InsertDuplicate", testCatalogInsertDuplicate},
	{"GetRoundTrip", testCatalogGetRoundTrip},
	{"GetMissing", testCatalogGetMissing},
	{"UpdateCompareAndSet", testCatalogUpdateCompareAndSet},
	{"UpdateWritesOnlyLifecycle", testCatalogUpdateWritesOnlyLifecycle},
	{"UpdateMissing", testCatalogUpdateMissing},
	{"List", testCatalogList},
	{"ListInsertionOrder", testCatalogListInsertionOrder},
	{"ListUnfiltered", testCatalogListUnfiltered},
	{"ListEvery", testCatalogListEvery},
	{"ListInvalidArguments", testCatalogListInvalidArguments},
	{"Revision", testCatalogRevision},
	{"ConcurrentInsert", testCatalogConcurrentInsert},
	{"ConcurrentUpdate", testCatalogConcurrentUpdate},
	{"ConcurrentRevision", testCatalogConcurrentRevision},
}

// newToolPrefix answers a tool-name prefix no other subtest uses; names
// built on it sort by their suffix.
func newToolPrefix() string { return "t" + strings.ToLower(rand.Text()) }

// newOwner answers an owning team no other subtest uses.
func newOwner() string { return "team-" + rand.Text() }

// fullVersion answers a version with every field set to a value a store
// could lose: a definition whose bytes a JSON column would rewrite,
// sub-microsecond times in a foreign zone, reasons a list format must quote.
func fullVersion(org, name, version, owner string, published time.Time) *toolplane.ToolVersion {
	return &toolplane.ToolVersion{
		OrganizationID:  org,
		Name:            name,
		Version:         version,
		State:           toolplane.StateDeprecated,
		Definition:      []byte(`{"name": "` + name + `",  "version":"` + version + `", "a": [ ], "z": "\u00e9"}`),
		SchemaHash:      "sha256:" + name + "@" + version,
		Owner:           owner,
		ReviewReasons:   []string{"destructive", "tag:finance", "first tool of its team", `"quoted", {braces}`},
		PublishedBy:     "user-ada",
		PublishedAt:     published,
		ReviewedBy:      "user-grace",
		ReviewedAt:      published.Add(time.Hour + 7*time.Nanosecond),
		ReviewNote:      "approved for the finance agents",
		SunsetAt:        published.Add(90*24*time.Hour + 999*time.Nanosecond),
		Replacement:     "billing.get_invoice@^3.0.0",
		DeprecationNote: "replaced by billing.get_invoice; 'quoted', {braces}",
		RetireBlocked:   "agent-billing still calls it",
		Revision:        1,
		UpdatedAt:       published.Add(2*time.Hour + 1*time.Nanosecond),
	}
}

func insertVersion(t *testing.T, s toolplane.Store, v *toolplane.ToolVersion) {
	t.Helper()
	if err := s.InsertToolVersion(t.Context(), v); err != nil {
		t.Fatalf("InsertToolVersion(%s@%s) = %v", v.Name, v.Version, err)
	}
}

// wantVersion fails t unless the stored version is want.
func wantVersion(t *testing.T, s toolplane.Store, want *toolplane.ToolVersion) {
	t.Helper()
	got, err := s.GetToolVersion(t.Context(), want.OrganizationID, want.Name, want.Version)
	if err != nil {
		t.Fatalf("GetToolVersion(%s@%s) = %v", want.Name, want.Version, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetToolVersion(%s@%s): %s", want.Name, want.Version, d)
	}
}

// wantNoVersion fails t unless the organization has no version with that
// name and version.
func wantNoVersion(t *testing.T, s toolplane.Store, org, name, version string) {
	t.Helper()
	if v, err := s.GetToolVersion(t.Context(), org, name, version); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetToolVersion(%q, %q, %q) = %+v, %v; want ErrNotFound", org, name, version, v, err)
	}
}

// listVersions pages through the organization's versions f matches,
// calling between (if not nil) after each page but the last.
func listVersions(t *testing.T, s toolplane.Store, org string, f toolplane.VersionFilter, limit int, between func()) []toolplane.ToolVersion {
	t.Helper()
	return pageAll(t, "ListToolVersions", limit, between, func(after string) ([]toolplane.ToolVersion, string, error) {
		return s.ListToolVersions(t.Context(), org, f, after, limit)
	})
}

// listEveryVersion pages through every organization's versions f matches.
func listEveryVersion(t *testing.T, s toolplane.Store, f toolplane.VersionFilter, limit int, between func()) []toolplane.ToolVersion {
	t.Helper()
	return pageAll(t, "ListEveryToolVersion", limit, between, func(after string) ([]toolplane.ToolVersion, string, error) {
		return s.ListEveryToolVersion(t.Context(), f, after, limit)
	})
}

// wantRows fails t unless got and want hold the same rows in the same
// order, under the suite's contract.
func wantRows[T any](t *testing.T, what string, got, want []T, id func(T) string) {
	t.Helper()
	if len(got) != len(want) {
		var g, w []string
		for _, r := range got {
			g = append(g, id(r))
		}
		for _, r := range want {
			w = append(w, id(r))
		}
		t.Fatalf("%s listed %d rows, want %d:\ngot  %q\nwant %q", what, len(got), len(want), g, w)
	}
	for i := range got {
		if d := diff(got[i], want[i]); d != "" {
			t.Errorf("%s row %d (%s): %s", what, i, id(want[i]), d)
		}
	}
}

func versionID(v toolplane.ToolVersion) string {
	return v.OrganizationID + "/" + v.Name + "@" + v.Version
}

func testCatalogInsertDuplicate(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	first := fullVersion(org, p+".refund", "2.1.0", owner, base)
	insertVersion(t, s, first)

	// A second publish of the same version loses, whatever it holds.
	dup := fullVersion(org, first.Name, first.Version, newOwner(), at(time.Hour))
	dup.State, dup.Definition, dup.PublishedBy = toolplane.StateActive, []byte(`{}`), "user-mallory"
	if err := s.InsertToolVersion(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertToolVersion(%s@%s) = %v, want ErrExists", first.Name, first.Version, err)
	}
	wantVersion(t, s, first)

	// Another version of the name, and the version under another name, are
	// other versions.
	next := fullVersion(org, first.Name, "2.1.1", owner, at(time.Minute))
	other := fullVersion(org, p+".charge", first.Version, owner, base)
	insertVersion(t, s, next)
	insertVersion(t, s, other)
	wantVersion(t, s, first)
	wantVersion(t, s, next)
	wantVersion(t, s, other)
}

func testCatalogGetRoundTrip(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	tests := []struct {
		name    string
		version *toolplane.ToolVersion
	}{
		{"every field set", fullVersion(org, p+".full", "1.0.0", owner, base)},
		{"optional fields zero", &toolplane.ToolVersion{
			Name: p + ".zero", Version: "0.0.1", State: toolplane.StatePendingApproval, PublishedAt: base,
		}},
		{"empty slices", func() *toolplane.ToolVersion {
			v := fullVersion(org, p+".empty", "1.0.0", owner, base)
			v.ReviewReasons, v.Definition = []string{}, []byte{}
			return v
		}()},
		{"reasons a list format must quote", func() *toolplane.ToolVersion {
			v := fullVersion(org, p+".quoted", "1.0.0", owner, base)
			v.ReviewReasons = []string{"", "NULL", "null", " padded ", `back\slash`, "a,b", "[1]", "ünïcødé", "dup", "dup", "line\nbreak"}
			return v
		}()},
		{"prerelease version, later revision", func() *toolplane.ToolVersion {
			v := fullVersion(org, p+".full", "2.0.0-rc.1+build.7", owner, at(time.Hour))
			v.Revision = 9
			return v
		}()},
	}
	for _, st := range []toolplane.VersionState{toolplane.StatePendingApproval, toolplane.StateInReview,
		toolplane.StateActive, toolplane.StateDeprecated, toolplane.StateRetired} {
		v := fullVersion(org, p+".states", "1.0.0-"+string(st), owner, base)
		v.State = st
		tests = append(tests, struct {
			name    string
			version *toolplane.ToolVersion
		}{"state " + string(st), v})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertVersion(t, s, tt.version)
			wantVersion(t, s, tt.version)
		})
	}
}

func testCatalogGetMissing(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	v := fullVersion(org, p+".refund", "1.0.0", owner, base)
	insertVersion(t, s, v)
	// A lookup from an untrusted request: whatever it holds, a version that
	// is not there is ErrNotFound, never another error.
	for _, k := range [][2]string{
		{v.Name, "1.0.1"},
		{v.Name, ""},
		{v.Name, "1.0.0 "},
		{v.Name + "x", v.Version},
		{strings.ToUpper(v.Name), v.Version},
		{"", ""},
		{"", v.Version},
		{v.Name, v.Version + "\x00"},
		{"\xff", v.Version},
		{v.Name, "1.0.\xc3"},
	} {
		wantNoVersion(t, s, org, k[0], k[1])
	}
}

func testCatalogUpdateCompareAndSet(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	orig := fullVersion(org, p+".refund", "2.1.0", owner, base)
	orig.State, orig.ReviewedBy, orig.ReviewedAt, orig.ReviewNote = toolplane.StatePendingApproval, "", time.Time{}, ""
	insertVersion(t, s, orig)

	cur := *orig
	cur.State = toolplane.StateActive
	cur.ReviewReasons = []string{"destructive"}
	cur.ReviewedBy, cur.ReviewedAt, cur.ReviewNote = "user-grace", at(time.Minute+3*time.Nanosecond), "looks right"
	cur.UpdatedAt = at(time.Minute + 5*time.Nanosecond)
	ok, err := s.UpdateToolVersion(t.Context(), &cur)
	if !ok || err != nil {
		t.Fatalf("UpdateToolVersion(current revision) = %v, %v; want true, nil", ok, err)
	}
	if cur.Revision != orig.Revision+1 {
		t.Fatalf("after UpdateToolVersion, v.Revision = %d, want %d", cur.Revision, orig.Revision+1)
	}
	want := cur
	wantVersion(t, s, &want)

	for _, rev := range []int64{orig.Revision, cur.Revision + 1, 0, -1, math.MaxInt64} {
		t.Run(fmt.Sprintf("revision %d", rev), func(t *testing.T) {
			other := want
			other.Revision = rev
			other.State = toolplane.StateRetired
			other.RetireBlocked = "stale"
			ok, err := s.UpdateToolVersion(t.Context(), &other)
			if ok || err != nil {
				t.Fatalf("UpdateToolVersion(revision %d, stored %d) = %v, %v; want false, nil", rev, want.Revision, ok, err)
			}
			if other.Revision != rev {
				t.Errorf("failed UpdateToolVersion changed v.Revision to %d, want %d", other.Revision, rev)
			}
			wantVersion(t, s, &want)
		})
	}
}

// testCatalogUpdateWritesOnlyLifecycle: what was published never changes,
// and every lifecycle field is written, a zero value included.
func testCatalogUpdateWritesOnlyLifecycle(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	orig := fullVersion(org, p+".refund", "2.1.0", owner, base)
	insertVersion(t, s, orig)

	upd := *orig
	upd.Definition = []byte(`{"name":"rewritten"}`)
	upd.SchemaHash = "sha256:rewritten"
	upd.Owner = newOwner()
	upd.PublishedBy = "user-mallory"
	upd.PublishedAt = at(24 * time.Hour)
	upd.State = toolplane.StateRetired
	upd.ReviewReasons = nil
	upd.ReviewedBy, upd.ReviewedAt, upd.ReviewNote = "", time.Time{}, ""
	upd.SunsetAt, upd.Replacement, upd.RetireBlocked, upd.DeprecationNote = time.Time{}, "", "", ""
	upd.UpdatedAt = at(48*time.Hour + 11*time.Nanosecond)
	if ok, err := s.UpdateToolVersion(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("UpdateToolVersion = %v, %v; want true, nil", ok, err)
	}
	want := *orig
	want.State = upd.State
	want.ReviewReasons = nil
	want.ReviewedBy, want.ReviewedAt, want.ReviewNote = "", time.Time{}, ""
	want.SunsetAt, want.Replacement, want.RetireBlocked, want.DeprecationNote = time.Time{}, "", "", ""
	want.UpdatedAt = upd.UpdatedAt
	want.Revision = orig.Revision + 1
	wantVersion(t, s, &want)

	// And back from zero values to set ones.
	upd = want
	upd.State = toolplane.StateDeprecated
	upd.ReviewReasons = []string{"tag:finance"}
	upd.ReviewedBy, upd.ReviewedAt, upd.ReviewNote = "user-grace", at(3*time.Hour), "sunset agreed"
	upd.SunsetAt, upd.Replacement, upd.RetireBlocked = at(30*24*time.Hour), "3.0.0", "agent-billing"
	upd.DeprecationNote = "moved to 3.0.0"
	upd.UpdatedAt = at(72 * time.Hour)
	if ok, err := s.UpdateToolVersion(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("second UpdateToolVersion = %v, %v; want true, nil", ok, err)
	}
	wantVersion(t, s, &upd)
}

func testCatalogUpdateMissing(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	present := fullVersion(org, p+".refund", "1.0.0", owner, base)
	insertVersion(t, s, present)
	for _, k := range [][2]string{{present.Name, "1.0.1"}, {p + ".absent", present.Version}, {"\xff", "1.0.0"}} {
		v := fullVersion(org, k[0], k[1], owner, base)
		ok, err := s.UpdateToolVersion(t.Context(), v)
		if ok || !errors.Is(err, toolplane.ErrNotFound) {
			t.Errorf("UpdateToolVersion(%q@%q, missing) = %v, %v; want false, ErrNotFound", k[0], k[1], ok, err)
		}
		if v.Revision != 1 {
			t.Errorf("failed UpdateToolVersion changed v.Revision to %d", v.Revision)
		}
	}
	wantVersion(t, s, present)
}

// seedVersions inserts n versions of a few names owned by owner, out of
// order and with publication ties (some only at microsecond precision),
// and answers them in list order.
func seedVersions(t *testing.T, s toolplane.Store, org, p, owner string, n int) []toolplane.ToolVersion {
	t.Helper()
	states := []toolplane.VersionState{toolplane.StateActive, toolplane.StateDeprecated, toolplane.StateRetired,
		toolplane.StateInReview, toolplane.StatePendingApproval}
	all := make([]toolplane.ToolVersion, n)
	for i := range n {
		published := at(time.Duration(i/4) * time.Second)
		if i%4 == 1 {
			published = stored(published).Add(300 * time.Nanosecond)
		}
		v := fullVersion(org, fmt.Sprintf("%s.%c", p, 'c'-i%3), fmt.Sprintf("1.%d.0", i), owner, published)
		v.State = states[i%len(states)]
		all[i] = *v
	}
	inserted := make([]int, 0, n)
	for _, i := range shuffled(n) {
		insertVersion(t, s, &all[i])
		inserted = append(inserted, i)
	}
	// Ties of name and stored publication time list in insertion order.
	rank := make([]int, n)
	for pos, i := range inserted {
		rank[i] = pos
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	slices.SortFunc(idx, func(a, b int) int {
		if c := strings.Compare(all[a].Name, all[b].Name); c != 0 {
			return c
		}
		if c := stored(all[a].PublishedAt).Compare(stored(all[b].PublishedAt)); c != 0 {
			return c
		}
		return rank[a] - rank[b]
	})
	out := make([]toolplane.ToolVersion, n)
	for i, j := range idx {
		out[i] = all[j]
	}
	return out
}

func testCatalogList(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	want := seedVersions(t, s, org, p, owner, 30)
	// Another team's versions, under names among this team's and not.
	otherOwner := newOwner()
	insertVersion(t, s, fullVersion(org, p+".b", "9.0.0", otherOwner, base))
	insertVersion(t, s, fullVersion(org, p+".0", "1.0.0", otherOwner, base))

	// Between pages, publish a version that lists last (a few, so paging
	// by one row at a time still ends): paging must reach it.
	extra := 0
	between := func() {
		if extra == 12 {
			return
		}
		extra++
		v := fullVersion(org, p+".z", fmt.Sprintf("0.0.%d", extra), owner, at(time.Duration(extra)*time.Second))
		insertVersion(t, s, v)
		want = append(want, *v)
	}
	for _, limit := range []int{1, 4, maxLimit} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got := listVersions(t, s, org, toolplane.VersionFilter{Owner: owner}, limit, between)
			wantRows(t, "ListToolVersions", got, want, versionID)
		})
	}

	filters := []struct {
		name   string
		filter toolplane.VersionFilter
		match  func(v toolplane.ToolVersion) bool
	}{
		{"owner and name", toolplane.VersionFilter{Owner: owner, Name: p + ".b"}, func(v toolplane.ToolVersion) bool { return v.Name == p+".b" }},
		{"owner and state", toolplane.VersionFilter{Owner: owner, States: []toolplane.VersionState{toolplane.StateActive}},
			func(v toolplane.ToolVersion) bool { return v.State == toolplane.StateActive }},
		{"owner and states", toolplane.VersionFilter{Owner: owner, States: []toolplane.VersionState{toolplane.StateDeprecated, toolplane.StateActive}},
			func(v toolplane.ToolVersion) bool {
				return v.State == toolplane.StateDeprecated || v.State == toolplane.StateActive
			}},
		{"every field", toolplane.VersionFilter{Owner: owner, Name: p + ".a", States: []toolplane.VersionState{toolplane.StateRetired, toolplane.StateInReview}},
			func(v toolplane.ToolVersion) bool {
				return v.Name == p+".a" && (v.State == toolplane.StateRetired || v.State == toolplane.StateInReview)
			}},
		{"no state matches", toolplane.VersionFilter{Owner: owner, States: []toolplane.VersionState{"no-such-state"}},
			func(toolplane.ToolVersion) bool { return false }},
		{"no name matches", toolplane.VersionFilter{Owner: owner, Name: p + ".absent"}, func(toolplane.ToolVersion) bool { return false }},
	}
	for _, f := range filters {
		t.Run(f.name, func(t *testing.T) {
			var fw []toolplane.ToolVersion
			for _, v := range want {
				if f.match(v) {
					fw = append(fw, v)
				}
			}
			wantRows(t, "ListToolVersions", listVersions(t, s, org, f.filter, 3, nil), fw, versionID)
		})
	}

	// A name alone lists every owner's versions of it.
	t.Run("name", func(t *testing.T) {
		var fw []toolplane.ToolVersion
		for _, v := range want {
			if v.Name == p+".b" {
				fw = append(fw, v)
			}
		}
		fw = append(fw, *fullVersion(org, p+".b", "9.0.0", otherOwner, base))
		slices.SortStableFunc(fw, func(a, b toolplane.ToolVersion) int { return stored(a.PublishedAt).Compare(stored(b.PublishedAt)) })
		got := listVersions(t, s, org, toolplane.VersionFilter{Name: p + ".b"}, 2, nil)
		if len(got) != len(fw) {
			t.Fatalf("ListToolVersions(name) listed %d rows, want %d", len(got), len(fw))
		}
		// The other team's version ties with this team's first, and was
		// inserted after it.
		wantRows(t, "ListToolVersions(name)", got, fw, versionID)
	})
}

// testCatalogListInsertionOrder: versions published in one microsecond list
// in the order they were inserted, not by their version strings.
func testCatalogListInsertionOrder(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	name := p + ".refund"
	var want []toolplane.ToolVersion
	for i, version := range []string{"3.0.0", "1.0.0", "10.0.0", "2.0.0", "0.9.0"} {
		v := fullVersion(org, name, version, owner, base.Add(time.Duration(i*100)*time.Nanosecond))
		insertVersion(t, s, v)
		want = append(want, *v)
	}
	// Inserted last, published first.
	early := fullVersion(org, name, "9.9.9", owner, at(-time.Second))
	insertVersion(t, s, early)
	want = append([]toolplane.ToolVersion{*early}, want...)
	for _, limit := range []int{1, 2, maxLimit} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			wantRows(t, "ListToolVersions", listVersions(t, s, org, toolplane.VersionFilter{Name: name}, limit, nil), want, versionID)
		})
	}
}

// testCatalogListUnfiltered: an empty filter lists the organization's
// whole catalogue, in order.
func testCatalogListUnfiltered(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	want := seedVersions(t, s, org, p, owner, 9)
	for _, limit := range []int{1, 4, maxLimit} {
		wantRows(t, "ListToolVersions(unfiltered)", listVersions(t, s, org, toolplane.VersionFilter{}, limit, nil), want, versionID)
	}
}

// testCatalogListEvery: ListEveryToolVersion lists every organization's
// versions, other subtests' too, by organization and then as an
// organization's listing; this subtest's two organizations' versions are in
// it, whole and in order, and a filter applies across organizations.
func testCatalogListEvery(t *testing.T, s toolplane.Store) {
	orgs := []string{newOrg(), newOrg()}
	slices.Sort(orgs)
	p, owner := newToolPrefix(), newOwner()
	// Both organizations publish the same names and versions: two
	// catalogues, not one.
	var want []toolplane.ToolVersion
	for _, org := range orgs {
		want = append(want, seedVersions(t, s, org, p, owner, 7)...)
	}
	mine := func(got []toolplane.ToolVersion) []toolplane.ToolVersion {
		var out []toolplane.ToolVersion
		for i, v := range got {
			if i > 0 {
				prev := got[i-1]
				if c := cmpVersionOrder(prev, v); c > 0 {
					t.Errorf("row %d (%s) does not follow row %d (%s)", i, versionID(v), i-1, versionID(prev))
				}
			}
			if v.Owner == owner {
				out = append(out, v)
			}
		}
		return out
	}
	for _, limit := range []int{3, maxLimit} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			wantRows(t, "ListEveryToolVersion", mine(listEveryVersion(t, s, toolplane.VersionFilter{Owner: owner}, limit, nil)), want, versionID)
		})
	}
	t.Run("states", func(t *testing.T) {
		f := toolplane.VersionFilter{Owner: owner, States: []toolplane.VersionState{toolplane.StateActive, toolplane.StateDeprecated}}
		var fw []toolplane.ToolVersion
		for _, v := range want {
			if slices.Contains(f.States, v.State) {
				fw = append(fw, v)
			}
		}
		wantRows(t, "ListEveryToolVersion(states)", mine(listEveryVersion(t, s, f, 2, nil)), fw, versionID)
	})
	t.Run("unfiltered", func(t *testing.T) {
		wantRows(t, "ListEveryToolVersion(unfiltered)", mine(listEveryVersion(t, s, toolplane.VersionFilter{}, maxLimit, nil)), want, versionID)
	})
	t.Run("invalid arguments", func(t *testing.T) {
		for _, limit := range []int{-1, 0, maxLimit + 1} {
			if _, _, err := s.ListEveryToolVersion(t.Context(), toolplane.VersionFilter{Owner: owner}, "", limit); !errors.Is(err, toolplane.ErrInvalid) {
				t.Errorf("ListEveryToolVersion(limit %d) err = %v, want toolplane.ErrInvalid", limit, err)
			}
		}
		for _, c := range []string{"!!not a cursor!!", base64.RawURLEncoding.EncodeToString([]byte("nonsense")), " "} {
			if _, _, err := s.ListEveryToolVersion(t.Context(), toolplane.VersionFilter{Owner: owner}, c, 10); !errors.Is(err, toolplane.ErrBadCursor) {
				t.Errorf("ListEveryToolVersion(after %q) err = %v, want toolplane.ErrBadCursor", c, err)
			}
		}
	})
}

// cmpVersionOrder compares two rows of ListEveryToolVersion by what the
// contract orders them by and a check can see: organization, name, stored
// publication time.
func cmpVersionOrder(a, b toolplane.ToolVersion) int {
	if c := strings.Compare(a.OrganizationID, b.OrganizationID); c != 0 {
		return c
	}
	if c := strings.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return stored(a.PublishedAt).Compare(stored(b.PublishedAt))
}

func testCatalogListInvalidArguments(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	// A row to answer, so a store that only validates when it has rows to
	// answer fails too.
	insertVersion(t, s, fullVersion(org, p+".refund", "1.0.0", owner, base))
	f := toolplane.VersionFilter{Owner: owner}
	for _, limit := range []int{math.MinInt, -1, 0, maxLimit + 1, math.MaxInt} {
		if _, _, err := s.ListToolVersions(t.Context(), org, f, "", limit); !errors.Is(err, toolplane.ErrInvalid) {
			t.Errorf("ListToolVersions(limit %d) err = %v, want toolplane.ErrInvalid", limit, err)
		}
	}
	for _, limit := range []int{1, maxLimit} {
		if _, _, err := s.ListToolVersions(t.Context(), org, f, "", limit); err != nil {
			t.Errorf("ListToolVersions(limit %d) = %v", limit, err)
		}
	}
	for _, c := range []string{
		"!!not a cursor!!",
		base64.RawURLEncoding.EncodeToString([]byte("nonsense")),
		base64.StdEncoding.EncodeToString([]byte("{}")),
		" ",
	} {
		if _, _, err := s.ListToolVersions(t.Context(), org, f, c, 10); !errors.Is(err, toolplane.ErrBadCursor) {
			t.Errorf("ListToolVersions(after %q) err = %v, want toolplane.ErrBadCursor", c, err)
		}
	}
}

// catalogRevision answers the store's catalogue revision.
func catalogRevision(t *testing.T, s toolplane.Store) int64 {
	t.Helper()
	rev, err := s.CatalogRevision(t.Context())
	if err != nil {
		t.Fatalf("CatalogRevision = %v", err)
	}
	return rev
}

func testCatalogRevision(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	r0 := catalogRevision(t, s)
	v := fullVersion(org, p+".refund", "1.0.0", owner, base)
	insertVersion(t, s, v)
	r1 := catalogRevision(t, s)
	if r1 <= r0 {
		t.Errorf("CatalogRevision after an insert = %d, was %d; want it grown", r1, r0)
	}
	v.State = toolplane.StateActive
	if ok, err := s.UpdateToolVersion(t.Context(), v); !ok || err != nil {
		t.Fatalf("UpdateToolVersion = %v, %v", ok, err)
	}
	r2 := catalogRevision(t, s)
	if r2 <= r1 {
		t.Errorf("CatalogRevision after an update = %d, was %d; want it grown", r2, r1)
	}
	// Refused writes leave the catalogue as it was; the revision may stay.
	if err := s.InsertToolVersion(t.Context(), fullVersion(org, v.Name, v.Version, owner, base)); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("duplicate InsertToolVersion = %v, want ErrExists", err)
	}
	if r := catalogRevision(t, s); r < r2 {
		t.Errorf("CatalogRevision went back from %d to %d", r2, r)
	}
}

// testCatalogConcurrentInsert: of many publishes of one version at once,
// exactly one is stored.
func testCatalogConcurrentInsert(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	w := race(t, "InsertToolVersion", func(i int) *toolplane.ToolVersion {
		v := fullVersion(org, p+".refund", "2.1.0", owner, base)
		v.PublishedBy = fmt.Sprintf("user-%d", i)
		v.Definition = fmt.Appendf(nil, `{"writer":%d}`, i)
		return v
	}, func(v *toolplane.ToolVersion) (bool, error) { return inserted(s.InsertToolVersion(t.Context(), v)) })
	wantVersion(t, s, w)
}

func testCatalogConcurrentUpdate(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	orig := fullVersion(org, p+".refund", "2.1.0", owner, base)
	insertVersion(t, s, orig)

	w := race(t, "UpdateToolVersion", func(i int) *toolplane.ToolVersion {
		v := *orig
		v.ReviewedBy = fmt.Sprintf("user-%d", i)
		v.ReviewReasons = []string{fmt.Sprintf("reason-%d", i)}
		return &v
	}, func(v *toolplane.ToolVersion) (bool, error) { return s.UpdateToolVersion(t.Context(), v) })
	if w.Revision != orig.Revision+1 {
		t.Errorf("winner's Revision = %d, want %d", w.Revision, orig.Revision+1)
	}
	wantVersion(t, s, w)
}

// testCatalogConcurrentRevision: concurrent writes each move the revision,
// so a node that read it between any two of them notices the second. A
// counter read and written back outside the writing statement loses some.
func testCatalogConcurrentRevision(t *testing.T, s toolplane.Store) {
	org, p, owner := newOrg(), newToolPrefix(), newOwner()
	versions := make([]*toolplane.ToolVersion, writers)
	for i := range versions {
		versions[i] = fullVersion(org, fmt.Sprintf("%s.tool-%02d", p, i), "1.0.0", owner, base)
	}
	run := func(what string, write func(v *toolplane.ToolVersion) error) {
		t.Helper()
		before := catalogRevision(t, s)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i, v := range versions {
			wg.Go(func() {
				<-start
				if err := write(v); err != nil {
					t.Errorf("%s(writer %d) = %v", what, i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if after := catalogRevision(t, s); after-before < writers {
			t.Errorf("after %d concurrent %s calls, CatalogRevision grew from %d to %d; want at least %d more",
				writers, what, before, after, writers)
		}
	}
	run("InsertToolVersion", func(v *toolplane.ToolVersion) error { return s.InsertToolVersion(t.Context(), v) })
	run("UpdateToolVersion", func(v *toolplane.ToolVersion) error {
		v.State = toolplane.StateActive
		if ok, err := s.UpdateToolVersion(t.Context(), v); !ok || err != nil {
			return fmt.Errorf("%v, %w", ok, err)
		}
		return nil
	})
}
