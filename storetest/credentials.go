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

var credentialCases = []suiteCase{
	{"InsertDuplicate", testCredentialInsertDuplicate},
	{"GetRoundTrip", testCredentialGetRoundTrip},
	{"GetMissing", testCredentialGetMissing},
	{"UpdateCompareAndSwap", testCredentialUpdateCompareAndSwap},
	{"UpdateWritesOnlyItsFields", testCredentialUpdateWritesOnlyItsFields},
	{"UpdateKeepsRevocation", testCredentialUpdateKeepsRevocation},
	{"UpdateMissing", testCredentialUpdateMissing},
	{"Touch", testCredentialTouch},
	{"TouchMissing", testCredentialTouchMissing},
	{"UpdateAfterTouch", testCredentialUpdateAfterTouch},
	{"List", testCredentialList},
	{"ListLimit", testCredentialListLimit},
	{"ListCursor", testCredentialListCursor},
	{"NamesKeptOrRefused", testCredentialNamesKeptOrRefused},
	{"Listing", testCredentialListing},
	{"Isolation", testCredentialIsolation},
	{"ConcurrentInsert", testCredentialConcurrentInsert},
	{"ConcurrentUpdate", testCredentialConcurrentUpdate},
	{"ConcurrentTouch", testCredentialConcurrentTouch},
}

// credentialID answers a credential ID no other subtest uses: credential
// IDs are unique across organizations, so a subtest's organization alone
// does not keep its IDs apart from another's. IDs of one org sort by name.
func credentialID(org, name string) string { return "tpk_" + org + "_" + name }

// fullCredential answers a credential with every field set to a value a
// store could lose: binary hash bytes, sub-microsecond times in a foreign
// zone, names a text array must quote. It has both roles and tools, which
// no minted credential does, because the store keeps whatever it is given.
func fullCredential(org, id string, created time.Time) *toolplane.Credential {
	return &toolplane.Credential{
		ID:             id,
		OrganizationID: org,
		Kind:           toolplane.CredentialAgent,
		Subject:        "agent-billing",
		Roles:          []string{"tool_owner", "approver"},
		Tools:          []string{"payments.refund_order", "crm.*", "search.{web,news}"},
		Hash:           []byte{'$', 0x00, 0x01, 0xfe, 0xff, '$'},
		Label:          "billing agent, production",
		CreatedAt:      created,
		ExpiresAt:      created.Add(90*24*time.Hour + 7*time.Nanosecond),
		RevokedAt:      created.Add(48*time.Hour + 999*time.Nanosecond),
		LastUsedAt:     created.Add(time.Hour + 1*time.Nanosecond),
		CreatedBy:      "user-ada",
		Version:        1,
		Attributes:     map[string]any{"team": "billing", "region": "eu-west ünïcødé", "quoted": `"a\b"`},
		Listing:        toolplane.ListingHybrid,
		ListingTop:     7,
	}
}

func insertCredential(t *testing.T, s toolplane.Store, c *toolplane.Credential) {
	t.Helper()
	if err := s.InsertCredential(t.Context(), c); err != nil {
		t.Fatalf("InsertCredential(%s) = %v", c.ID, err)
	}
}

// wantCredential fails t unless the stored credential is want.
func wantCredential(t *testing.T, s toolplane.Store, want *toolplane.Credential) {
	t.Helper()
	got, err := s.GetCredential(t.Context(), want.ID)
	if err != nil {
		t.Fatalf("GetCredential(%s) = %v", want.ID, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetCredential(%s): %s", want.ID, d)
	}
}

// wantNoCredential fails t unless no credential has id.
func wantNoCredential(t *testing.T, s toolplane.Store, id string) {
	t.Helper()
	if c, err := s.GetCredential(t.Context(), id); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetCredential(%q) = %+v, %v; want ErrNotFound", id, c, err)
	}
}

// compareCredentials is the list order: CreatedAt as stored, then ID.
func compareCredentials(a, b toolplane.Credential) int {
	if c := stored(a.CreatedAt).Compare(stored(b.CreatedAt)); c != 0 {
		return c
	}
	return strings.Compare(a.ID, b.ID)
}

func testCredentialInsertDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullCredential(org, credentialID(org, "1"), base)
	insertCredential(t, s, first)

	// The same ID again, in the same organization or in another: the ID
	// alone is the identity.
	for _, dupOrg := range []string{org, newOrg()} {
		dup := fullCredential(dupOrg, first.ID, at(time.Hour))
		dup.Kind, dup.Subject, dup.Hash = toolplane.CredentialPerson, "mallory", []byte("other")
		if err := s.InsertCredential(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
			t.Fatalf("second InsertCredential(%s) in org %s = %v, want ErrExists", first.ID, dupOrg, err)
		}
		wantCredential(t, s, first)
		if dupOrg != org {
			if rows, next, err := s.ListCredentials(t.Context(), dupOrg, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
				t.Errorf("ListCredentials of the refused organization = %d rows, %q, %v; want none", len(rows), next, err)
			}
		}
	}
}

func testCredentialGetRoundTrip(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	tests := []struct {
		name       string
		credential *toolplane.Credential
	}{
		{"every field set", fullCredential(org, credentialID(org, "full"), base)},
		{"another organization's", fullCredential(other, credentialID(other, "full"), base)},
		{"person", func() *toolplane.Credential {
			c := fullCredential(org, credentialID(org, "person"), base)
			c.Kind, c.Subject = toolplane.CredentialPerson, "user-grace"
			c.Roles, c.Tools = []string{"platform_admin"}, nil
			c.RevokedAt = time.Time{}
			return c
		}()},
		{"optional fields zero", &toolplane.Credential{
			ID: credentialID(org, "zero"), OrganizationID: org, Kind: toolplane.CredentialAgent, CreatedAt: base,
		}},
		{"empty slices", func() *toolplane.Credential {
			c := fullCredential(org, credentialID(org, "empty"), base)
			c.Roles, c.Tools, c.Hash, c.Attributes = []string{}, []string{}, []byte{}, map[string]any{}
			return c
		}()},
		{"names a list format must quote", func() *toolplane.Credential {
			c := fullCredential(org, credentialID(org, "quoted"), base)
			c.Roles = []string{"", "NULL", "null", " padded ", `"quoted"`, `back\slash`, "a,b", "{braces}", "[1]", "<&>", "ünïcødé 🔑", "dup", "dup"}
			c.Tools = []string{"*", "tab\there", "line\nbreak", "\u2028", "\x7f"}
			return c
		}()},
		{"revoked, later version", func() *toolplane.Credential {
			c := fullCredential(org, credentialID(org, "revoked"), base)
			c.Version = 9
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertCredential(t, s, tt.credential)
			wantCredential(t, s, tt.credential)
		})
	}
}

func testCredentialGetMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullCredential(org, credentialID(org, "key"), base)
	insertCredential(t, s, c)
	// A lookup by an ID from an untrusted request: whatever it holds, a
	// credential that is not there is ErrNotFound, never another error.
	for _, id := range []string{
		credentialID(org, "absent"),
		"",
		strings.ToUpper(c.ID),
		c.ID + " ",
		c.ID[:len(c.ID)-1],
		org,
		c.ID + "\x00",
		"tpk_\xff",
	} {
		wantNoCredential(t, s, id)
	}
}

func testCredentialUpdateCompareAndSwap(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullCredential(org, credentialID(org, "key"), base)
	orig.RevokedAt = time.Time{}
	insertCredential(t, s, orig)

	cur := *orig
	cur.Roles = []string{"approver"}
	cur.Tools = nil
	cur.Label = "renamed"
	cur.ExpiresAt = time.Time{}
	cur.RevokedAt = at(time.Minute + 3*time.Nanosecond)
	cur.Listing, cur.ListingTop = toolplane.ListingMeta, 0
	ok, err := s.UpdateCredential(t.Context(), &cur)
	if !ok || err != nil {
		t.Fatalf("UpdateCredential(current version) = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != orig.Version+1 {
		t.Fatalf("after UpdateCredential, c.Version = %d, want %d", cur.Version, orig.Version+1)
	}
	want := cur
	wantCredential(t, s, &want)

	for _, v := range []int64{orig.Version, cur.Version + 1, 0, math.MaxInt64} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			other := want
			other.Version = v
			other.Label = "stale"
			other.Tools = []string{"*"}
			ok, err := s.UpdateCredential(t.Context(), &other)
			if ok || err != nil {
				t.Fatalf("UpdateCredential(version %d, stored %d) = %v, %v; want false, nil", v, want.Version, ok, err)
			}
			if other.Version != v {
				t.Errorf("failed UpdateCredential changed c.Version to %d, want %d", other.Version, v)
			}
			wantCredential(t, s, &want)
		})
	}
}

// testCredentialUpdateWritesOnlyItsFields: who a key authenticates, its
// hash, its provenance and its last use are never written by an update.
func testCredentialUpdateWritesOnlyItsFields(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullCredential(org, credentialID(org, "key"), base)
	orig.RevokedAt = time.Time{}
	insertCredential(t, s, orig)

	upd := *orig
	upd.Kind = toolplane.CredentialPerson
	upd.Subject = "user-mallory"
	upd.Hash = []byte("a hash of a secret the attacker knows")
	upd.CreatedAt = at(24 * time.Hour)
	upd.CreatedBy = "user-mallory"
	upd.LastUsedAt = time.Time{}
	upd.Label = "written"
	if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("UpdateCredential = %v, %v; want true, nil", ok, err)
	}
	want := *orig
	want.Label = "written"
	want.Version = orig.Version + 1
	wantCredential(t, s, &want)

	// A hash of nil is no exception.
	upd.Hash = nil
	if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("UpdateCredential(nil hash) = %v, %v; want true, nil", ok, err)
	}
	want.Version++
	wantCredential(t, s, &want)
}

// testCredentialUpdateKeepsRevocation: revocation is final.
func testCredentialUpdateKeepsRevocation(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullCredential(org, credentialID(org, "key"), base)
	insertCredential(t, s, orig)

	for _, revoked := range []time.Time{{}, at(72 * time.Hour), at(-time.Hour)} {
		t.Run(revoked.Format(time.RFC3339), func(t *testing.T) {
			cur, err := s.GetCredential(t.Context(), orig.ID)
			if err != nil {
				t.Fatal(err)
			}
			upd := *cur
			upd.RevokedAt = revoked
			upd.Label = "after revocation " + revoked.Format(time.RFC3339)
			if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
				t.Fatalf("UpdateCredential(revoked at %v) = %v, %v; want true, nil", revoked, ok, err)
			}
			want := upd
			want.RevokedAt = orig.RevokedAt
			wantCredential(t, s, &want)
		})
	}
}

func testCredentialUpdateMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullCredential(org, credentialID(org, "absent"), base)
	ok, err := s.UpdateCredential(t.Context(), c)
	if !refused(ok, err) {
		t.Fatalf("UpdateCredential(missing) = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if c.Version != 1 {
		t.Errorf("failed UpdateCredential changed c.Version to %d", c.Version)
	}
	wantNoCredential(t, s, c.ID)
}

func testCredentialTouch(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullCredential(org, credentialID(org, "key"), base)
	c.LastUsedAt = time.Time{}
	c.Version = 3
	insertCredential(t, s, c)
	want := *c

	steps := []struct {
		name    string
		at      time.Time
		want    time.Time
		wantErr bool
	}{
		{"first use", at(time.Hour + 7*time.Nanosecond), at(time.Hour), false},
		{"same time", at(time.Hour), at(time.Hour), false},
		{"earlier use does not move it back", at(30 * time.Minute), at(time.Hour), false},
		{"later within the same microsecond", at(time.Hour + 60*time.Nanosecond), at(time.Hour), false},
		{"later use", at(2*time.Hour + time.Microsecond), at(2*time.Hour + time.Microsecond), false},
		{"another zone", at(3 * time.Hour).In(time.FixedZone("UTC-7", -7*60*60)), at(3 * time.Hour), false},
		{"zero time", time.Time{}, at(3 * time.Hour), true},
	}
	for _, st := range steps {
		err := s.TouchCredential(t.Context(), org, c.ID, st.at)
		if (err != nil) != st.wantErr {
			t.Fatalf("%s: TouchCredential(%v) = %v, want error: %v", st.name, st.at, err, st.wantErr)
		}
		want.LastUsedAt = st.want
		wantCredential(t, s, &want) // Version and every other field unchanged
	}

	// Touches left the version alone, so an update from it still applies.
	upd := want
	upd.Label = "after touches"
	if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("UpdateCredential(version %d) after touches = %v, %v; want true, nil", want.Version, ok, err)
	}
}

func testCredentialTouchMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	id := credentialID(org, "absent")
	if err := s.TouchCredential(t.Context(), org, id, base); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("TouchCredential(missing) = %v, want ErrNotFound", err)
	}
	wantNoCredential(t, s, id)
}

// testCredentialUpdateAfterTouch: an update from a copy read before a touch
// keeps the touch.
func testCredentialUpdateAfterTouch(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullCredential(org, credentialID(org, "key"), base)
	orig.RevokedAt = time.Time{}
	insertCredential(t, s, orig)

	read, err := s.GetCredential(t.Context(), orig.ID)
	if err != nil {
		t.Fatal(err)
	}
	touched := at(5 * time.Hour)
	if err := s.TouchCredential(t.Context(), org, orig.ID, touched); err != nil {
		t.Fatal(err)
	}
	upd := *read
	upd.Tools = []string{"crm.read"}
	if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
		t.Fatalf("UpdateCredential(copy read before a touch) = %v, %v; want true, nil", ok, err)
	}
	want := upd
	want.LastUsedAt = touched
	wantCredential(t, s, &want)
}

// listCredentials pages through the organization's credentials, calling
// between (if not nil) after each page but the last.
func listCredentials(t *testing.T, s toolplane.Store, org string, limit int, between func()) []toolplane.Credential {
	t.Helper()
	return pageAll(t, "ListCredentials", limit, between, func(after string) ([]toolplane.Credential, string, error) {
		return s.ListCredentials(t.Context(), org, after, limit)
	})
}

func testCredentialList(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	var want []toolplane.Credential
	const n = 25
	for _, i := range shuffled(n) {
		c := fullCredential(org, credentialID(org, fmt.Sprintf("%03d", n-i)), at(time.Duration(i/2)*time.Second+time.Duration(i)*time.Nanosecond))
		if i%3 == 0 {
			c.RevokedAt = time.Time{} // revoked or not, every credential is listed
		}
		insertCredential(t, s, c)
		want = append(want, *c)
	}
	for i := range 5 {
		insertCredential(t, s, fullCredential(other, credentialID(other, fmt.Sprint(i)), at(time.Duration(i)*time.Second)))
	}
	slices.SortFunc(want, compareCredentials)

	// Between pages, mint a newer credential (a few, so paging by one row
	// at a time still ends): paging must reach it.
	extra := 0
	between := func() {
		if extra == 12 {
			return
		}
		extra++
		c := fullCredential(org, credentialID(org, fmt.Sprintf("late-%03d", extra)), at(time.Hour+time.Duration(extra)*time.Second))
		insertCredential(t, s, c)
		want = append(want, *c)
	}
	for _, limit := range []int{1, 4, maxLimit} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got := listCredentials(t, s, org, limit, between)
			if len(got) != len(want) {
				t.Fatalf("listed %d credentials, want %d", len(got), len(want))
			}
			for i := range got {
				if d := diff(got[i], want[i]); d != "" {
					t.Errorf("row %d (%s): %s", i, want[i].ID, d)
				}
			}
		})
	}

	empty := newOrg()
	if rows, next, err := s.ListCredentials(t.Context(), empty, "", 10); err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListCredentials(organization without credentials) = %d rows, %q, %v; want none", len(rows), next, err)
	}
}

func testCredentialListLimit(t *testing.T, s toolplane.Store) {
	org := newOrg()
	// A row to answer, so a store that only validates when it has rows to
	// answer fails too.
	insertCredential(t, s, fullCredential(org, credentialID(org, "key"), base))
	tests := []struct {
		limit   int
		wantErr bool
	}{
		{math.MinInt, true},
		{-1, true},
		{0, true},
		{1, false},
		{maxLimit, false},
		{maxLimit + 1, true},
		{math.MaxInt, true},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("limit %d", tt.limit), func(t *testing.T) {
			_, _, err := s.ListCredentials(t.Context(), org, "", tt.limit)
			if (err != nil) != tt.wantErr {
				t.Errorf("ListCredentials(limit %d) err = %v, want error: %v", tt.limit, err, tt.wantErr)
			}
		})
	}
}

func testCredentialListCursor(t *testing.T, s toolplane.Store) {
	org := newOrg()
	insertCredential(t, s, fullCredential(org, credentialID(org, "key"), base))
	cursors := []struct{ name, cursor string }{
		{"not base64", "!!not a cursor!!"},
		{"base64 of nonsense", base64.RawURLEncoding.EncodeToString([]byte("nonsense"))},
		{"base64 of an empty object", base64.StdEncoding.EncodeToString([]byte("{}"))},
		{"whitespace", " "},
	}
	for _, c := range cursors {
		t.Run(c.name, func(t *testing.T) {
			if _, _, err := s.ListCredentials(t.Context(), org, c.cursor, 10); !errors.Is(err, toolplane.ErrBadCursor) {
				t.Errorf("ListCredentials(after %q) err = %v, want toolplane.ErrBadCursor", c.cursor, err)
			}
		})
	}
}

// testCredentialNamesKeptOrRefused: a role or tool name a store cannot keep
// byte for byte is refused with an error, never silently rewritten.
func testCredentialNamesKeptOrRefused(t *testing.T, s toolplane.Store) {
	org := newOrg()
	for i, bad := range []string{"a\x00b", "\xff", "trunc\xc3", "\xed\xa0\x80"} {
		t.Run(fmt.Sprintf("%q", bad), func(t *testing.T) {
			for _, field := range []string{"roles", "tools"} {
				set := func(c *toolplane.Credential) {
					if field == "roles" {
						c.Roles = []string{"fine", bad}
					} else {
						c.Tools = []string{bad, "fine"}
					}
				}
				c := fullCredential(org, credentialID(org, fmt.Sprintf("insert-%d-%s", i, field)), base)
				set(c)
				if err := s.InsertCredential(t.Context(), c); err == nil {
					wantCredential(t, s, c)
				} else {
					wantNoCredential(t, s, c.ID)
				}

				orig := fullCredential(org, credentialID(org, fmt.Sprintf("update-%d-%s", i, field)), base)
				insertCredential(t, s, orig)
				upd := *orig
				set(&upd)
				ok, err := s.UpdateCredential(t.Context(), &upd)
				switch {
				case ok && err == nil:
					wantCredential(t, s, &upd)
				case !ok:
					wantCredential(t, s, orig)
				default:
					t.Fatalf("UpdateCredential(%s %q) = true, %v", field, bad, err)
				}
			}
		})
	}
}

// testCredentialListing: every tool listing a key may have is kept as
// given, by an insert and by an update (which writes it, alone or beside
// the rest); one the credentials table does not hold is refused, and
// nothing is stored or changed for it.
func testCredentialListing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	valid := []struct {
		listing toolplane.ToolListing
		top     int
	}{
		{"", 0},
		{toolplane.ListingFull, 0},
		{toolplane.ListingMeta, 0},
		{toolplane.ListingHybrid, 0},
		{toolplane.ListingHybrid, 1},
		{toolplane.ListingHybrid, toolplane.MaxListingTop},
	}
	for i, v := range valid {
		t.Run(fmt.Sprintf("%q top %d", v.listing, v.top), func(t *testing.T) {
			c := fullCredential(org, credentialID(org, fmt.Sprintf("valid-%d", i)), base)
			c.Listing, c.ListingTop = v.listing, v.top
			insertCredential(t, s, c)
			wantCredential(t, s, c)

			// Changed to the next one, then back: each update writes it.
			next := valid[(i+1)%len(valid)]
			upd := *c
			upd.Listing, upd.ListingTop = next.listing, next.top
			if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
				t.Fatalf("UpdateCredential(listing %q top %d) = %v, %v", next.listing, next.top, ok, err)
			}
			wantCredential(t, s, &upd)
			upd.Listing, upd.ListingTop = v.listing, v.top
			if ok, err := s.UpdateCredential(t.Context(), &upd); !ok || err != nil {
				t.Fatalf("UpdateCredential(listing %q top %d) = %v, %v", v.listing, v.top, ok, err)
			}
			wantCredential(t, s, &upd)
		})
	}
	invalid := []struct {
		listing toolplane.ToolListing
		top     int
	}{
		{"everything", 0},
		{"META", 0},
		{"meta ", 0},
		{toolplane.ListingHybrid, toolplane.MaxListingTop + 1},
		{toolplane.ListingHybrid, -1},
		{toolplane.ListingMeta, math.MaxInt32 + 1},
	}
	for i, v := range invalid {
		t.Run(fmt.Sprintf("refused %q top %d", v.listing, v.top), func(t *testing.T) {
			c := fullCredential(org, credentialID(org, fmt.Sprintf("invalid-%d", i)), base)
			c.Listing, c.ListingTop = v.listing, v.top
			if err := s.InsertCredential(t.Context(), c); err == nil {
				t.Fatalf("InsertCredential(listing %q top %d) = nil, want an error", v.listing, v.top)
			}
			wantNoCredential(t, s, c.ID)

			orig := fullCredential(org, credentialID(org, fmt.Sprintf("update-invalid-%d", i)), base)
			insertCredential(t, s, orig)
			upd := *orig
			upd.Listing, upd.ListingTop = v.listing, v.top
			if ok, err := s.UpdateCredential(t.Context(), &upd); ok || err == nil {
				t.Fatalf("UpdateCredential(listing %q top %d) = %v, %v; want false and an error", v.listing, v.top, ok, err)
			}
			if upd.Version != orig.Version {
				t.Errorf("a refused UpdateCredential moved c.Version to %d", upd.Version)
			}
			wantCredential(t, s, orig)
		})
	}
}

// testCredentialIsolation: the ID alone finds a credential, but nothing
// else one organization does reaches another's.
func testCredentialIsolation(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	orgA, orgB := newOrg(), newOrg()
	a := fullCredential(orgA, credentialID(orgA, "key"), base)
	a.RevokedAt = time.Time{}
	insertCredential(t, s, a)

	if rows, next, err := s.ListCredentials(ctx, orgB, "", maxLimit); err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListCredentials as B = %d rows, %q, %v; want none", len(rows), next, err)
	}

	asB := *a
	asB.OrganizationID = orgB
	asB.Tools = []string{"*"}
	asB.Label = "intruder"
	if ok, err := s.UpdateCredential(ctx, &asB); !refused(ok, err) {
		t.Errorf("UpdateCredential as B = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if asB.Version != a.Version {
		t.Errorf("refused UpdateCredential as B changed c.Version to %d", asB.Version)
	}
	if err := s.TouchCredential(ctx, orgB, a.ID, at(time.Hour*1000)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("TouchCredential as B = %v, want ErrNotFound", err)
	}
	if err := s.InsertCredential(ctx, &asB); !errors.Is(err, toolplane.ErrExists) {
		t.Errorf("InsertCredential of A's ID as B = %v, want ErrExists", err)
	}
	wantCredential(t, s, a)

	// B's own credential is B's, and each list shows its own.
	b := fullCredential(orgB, credentialID(orgB, "key"), at(1))
	b.Label = "B's key"
	insertCredential(t, s, b)
	wantCredential(t, s, a)
	wantCredential(t, s, b)
	for _, org := range []struct {
		name string
		id   string
		want *toolplane.Credential
	}{{"A", orgA, a}, {"B", orgB, b}} {
		rows, next, err := s.ListCredentials(ctx, org.id, "", maxLimit)
		if err != nil || len(rows) != 1 || next != "" {
			t.Fatalf("ListCredentials as %s = %d rows, %q, %v; want its one credential", org.name, len(rows), next, err)
		}
		if d := diff(rows[0], *org.want); d != "" {
			t.Errorf("ListCredentials as %s: %s", org.name, d)
		}
	}
}

// testCredentialConcurrentInsert: of many organizations minting one ID at
// once, exactly one gets it.
func testCredentialConcurrentInsert(t *testing.T, s toolplane.Store) {
	id := credentialID(newOrg(), "contended")
	w := race(t, "InsertCredential", func(i int) *toolplane.Credential {
		c := fullCredential(newOrg(), id, base)
		c.Subject = fmt.Sprintf("agent-%d", i)
		return c
	}, func(c *toolplane.Credential) (bool, error) { return inserted(s.InsertCredential(t.Context(), c)) })
	wantCredential(t, s, w)
}

func testCredentialConcurrentUpdate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullCredential(org, credentialID(org, "contended"), base)
	insertCredential(t, s, orig)

	w := race(t, "UpdateCredential", func(i int) *toolplane.Credential {
		c := *orig
		c.Label = fmt.Sprintf("writer-%d", i)
		c.Tools = []string{fmt.Sprintf("tool-%d", i)}
		return &c
	}, func(c *toolplane.Credential) (bool, error) { return s.UpdateCredential(t.Context(), c) })
	if w.Version != orig.Version+1 {
		t.Errorf("winner's Version = %d, want %d", w.Version, orig.Version+1)
	}
	wantCredential(t, s, w)
}

// testCredentialConcurrentTouch: concurrent touches in any order leave the
// latest time, and the version alone.
func testCredentialConcurrentTouch(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullCredential(org, credentialID(org, "contended"), base)
	c.LastUsedAt = time.Time{}
	insertCredential(t, s, c)

	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			<-start
			if err := s.TouchCredential(t.Context(), org, c.ID, at(time.Duration(i)*time.Second)); err != nil {
				t.Errorf("TouchCredential(writer %d) = %v", i, err)
			}
		})
	}
	close(start)
	wg.Wait()
	want := *c
	want.LastUsedAt = at(time.Duration(writers-1) * time.Second)
	wantCredential(t, s, &want)
}
