package storetest

import (
	"cmp"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

var connectionCases = []suiteCase{
	{"InsertRecorded", testConnectionInsertRecorded},
	{"InsertDuplicate", testConnectionInsertDuplicate},
	{"NameUniqueAmongLive", testConnectionNameUniqueAmongLive},
	{"GetRoundTrip", testConnectionGetRoundTrip},
	{"GetMissing", testConnectionGetMissing},
	{"UpdateCompareAndSwap", testConnectionUpdateCompareAndSwap},
	{"UpdateRecorded", testConnectionUpdateRecorded},
	{"UpdateKeepsImmutable", testConnectionUpdateKeepsImmutable},
	{"UpdateKeepsRevocation", testConnectionUpdateKeepsRevocation},
	{"UpdateMissing", testConnectionUpdateMissing},
	{"ConcurrentUpdate", testConnectionConcurrentUpdate},
	{"List", testConnectionList},
	{"ListFilter", testConnectionListFilter},
	{"ListAll", testConnectionListAll},
	{"OAuthStateTake", testOAuthStateTake},
	{"OAuthStateDuplicate", testOAuthStateDuplicate},
	{"OAuthStateExpired", testOAuthStateExpired},
	{"OAuthStateSweep", testOAuthStateSweep},
	{"OAuthStateTakeMissing", testOAuthStateTakeMissing},
	{"OAuthStateConcurrentTake", testOAuthStateConcurrentTake},
}

// everyByte is a secret holding each byte value once: sealed material is
// binary, and a store keeps it exactly.
var everyByte = func() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return b
}()

// fullConnection answers a connection with every field set to a value a
// store could lose: binary secret bytes, sub-microsecond times in a foreign
// zone, nested lists, text JSON must escape.
func fullConnection(org, id string, created time.Time) *toolplane.Connection {
	return &toolplane.Connection{
		ID:             id,
		OrganizationID: org,
		Name:           "crm " + id + ` "production" <eu>`,
		Provider:       "salesforce",
		Kind:           toolplane.ConnectionAuthorizationCode,
		UserID:         "user-ada",
		State:          toolplane.ConnectionActive,
		Reason:         "consent renewed\nby ada",
		Config: toolplane.ConnectionConfig{
			Auth:                toolplane.AuthHeader,
			Header:              "X-API-Key",
			Driver:              "postgres",
			AllowPrivilegedRole: true,
			Issuer:              "https://login.example.com/",
			AuthorizeURL:        "https://login.example.com/authorize?prompt=consent&x=ü",
			TokenURL:            "https://login.example.com/token",
			RevokeURL:           "https://login.example.com/revoke",
			ClientID:            "client-1",
			RequestScope:        []string{"api", "refresh_token", "offline_access"},
			Resource:            "https://mcp.example.com/",
			Egress: toolplane.EgressRules{
				Hosts:      []string{"login.example.com", "*.my.salesforce.com"},
				AllowCIDRs: []string{"10.0.0.0/8", "fd00::/8"},
			},
		},
		Scope: toolplane.ConnectionScope{
			Tools:                 []string{"crm.*", "sales.read_lead"},
			Agents:                []string{"agent-billing"},
			MaxAmountCentsPerCall: 50_000,
			AmountArgument:        "amount",
		},
		Scopes:         []string{"api", "refresh_token"},
		Secret:         everyByte,
		TokenExpiresAt: created.Add(time.Hour + 7*time.Nanosecond),
		RefreshOwner:   "node-1",
		RefreshUntil:   created.Add(time.Minute + 999*time.Nanosecond),
		Owner:          "user-grace",
		CreatedAt:      created,
		UpdatedAt:      created.Add(time.Second + 3*time.Nanosecond),
		Version:        1,
	}
}

// connectionChange answers the change record of a connection's write.
func connectionChange(org, id, kind string, created time.Time) *toolplane.Change {
	return &toolplane.Change{ID: id, OrganizationID: org, Kind: kind, Subject: "con-1", Actor: "user-ada",
		Detail: []byte(`{"provider":"salesforce"}`), CreatedAt: created}
}

// changeSeq numbers the change records the suite's writes need, so no two
// collide by accident.
var changeSeq atomic.Int64

// newChange answers a change record of org with an ID no other write uses.
func newChange(org string) *toolplane.Change {
	return connectionChange(org, fmt.Sprintf("chg-%06d", changeSeq.Add(1)), "connection.write", base)
}

func insertConnection(t *testing.T, s toolplane.Store, c *toolplane.Connection) {
	t.Helper()
	if err := s.InsertConnection(t.Context(), c, newChange(c.OrganizationID)); err != nil {
		t.Fatalf("InsertConnection(%s) = %v", c.ID, err)
	}
}

// wantConnection fails t unless the stored connection is want.
func wantConnection(t *testing.T, s toolplane.Store, want *toolplane.Connection) {
	t.Helper()
	got, err := s.GetConnection(t.Context(), want.OrganizationID, want.ID)
	if err != nil {
		t.Fatalf("GetConnection(%s) = %v", want.ID, err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("GetConnection(%s): %s", want.ID, d)
	}
}

// wantNoConnection fails t unless org has no connection id.
func wantNoConnection(t *testing.T, s toolplane.Store, org, id string) {
	t.Helper()
	if c, err := s.GetConnection(t.Context(), org, id); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("GetConnection(%q) = %+v, %v; want ErrNotFound", id, c, err)
	}
}

// wantChangeIDs fails t unless org's change log holds exactly ids.
func wantChangeIDs(t *testing.T, s toolplane.Store, org string, ids ...string) {
	t.Helper()
	var got []string
	for _, c := range listChanges(t, s, org, "", "", maxLimit) {
		got = append(got, c.ID)
	}
	slices.Sort(got)
	ids = slices.Sorted(slices.Values(ids))
	if !slices.Equal(got, ids) {
		t.Fatalf("change log of %s = %q, want %q", org, got, ids)
	}
}

// compareConnections is the list order: CreatedAt as stored, then ID.
func compareConnections(a, b toolplane.Connection) int {
	return cmp.Or(stored(a.CreatedAt).Compare(stored(b.CreatedAt)), strings.Compare(a.ID, b.ID))
}

func connectionID(c toolplane.Connection) string { return c.OrganizationID + "/" + c.ID }

// listConnections pages through the organization's connections matching
// f, calling between (if not nil) after each page but the last.
func listConnections(t *testing.T, s toolplane.Store, org string, f toolplane.ConnectionFilter, limit int, between func()) []toolplane.Connection {
	t.Helper()
	return pageAll(t, "ListConnections", limit, between, func(after string) ([]toolplane.Connection, string, error) {
		return s.ListConnections(t.Context(), org, f, after, limit)
	})
}

// testConnectionInsertRecorded: a connection and its change record are
// stored together or not at all.
func testConnectionInsertRecorded(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullConnection(org, "con-1", base)
	ch := connectionChange(org, "chg-1", "connection.create", base)
	if err := s.InsertConnection(t.Context(), c, ch); err != nil {
		t.Fatalf("InsertConnection = %v", err)
	}
	wantConnection(t, s, c)
	rows := listChanges(t, s, org, "", "", maxLimit)
	wantRows(t, "ListChanges", rows, []toolplane.Change{*ch}, changeID)

	// A change ID the organization already has: neither is stored.
	next := fullConnection(org, "con-2", at(time.Second))
	if err := s.InsertConnection(t.Context(), next, connectionChange(org, "chg-1", "connection.create", at(time.Second))); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("InsertConnection(duplicate change ID) = %v, want ErrExists", err)
	}
	wantNoConnection(t, s, org, next.ID)
	wantChangeIDs(t, s, org, "chg-1")
	// The name is not held by the connection that was not stored.
	next.ID = "con-3"
	if err := s.InsertConnection(t.Context(), next, connectionChange(org, "chg-3", "connection.create", at(time.Second))); err != nil {
		t.Fatalf("InsertConnection after the refused one = %v", err)
	}
	wantConnection(t, s, next)
	wantChangeIDs(t, s, org, "chg-1", "chg-3")
}

func testConnectionInsertDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullConnection(org, "con-1", base)
	insertConnection(t, s, first)

	dup := fullConnection(org, first.ID, at(time.Hour))
	dup.Name, dup.Provider, dup.Secret = "another name", "github", []byte("other")
	if err := s.InsertConnection(t.Context(), dup, connectionChange(org, "chg-dup", "connection.create", base)); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second InsertConnection(%s) = %v, want ErrExists", first.ID, err)
	}
	wantConnection(t, s, first)
	for _, c := range listChanges(t, s, org, "", "", maxLimit) {
		if c.ID == "chg-dup" {
			t.Errorf("the refused insert's change was stored")
		}
	}
}

// testConnectionNameUniqueAmongLive: a name is held by one connection of
// the organization that is not revoked; a revoked one frees it, and
// another organization has names of its own.
func testConnectionNameUniqueAmongLive(t *testing.T, s toolplane.Store) {
	ctx := t.Context()
	org := newOrg()
	first := fullConnection(org, "con-1", base)
	first.Name = "crm"
	insertConnection(t, s, first)

	for _, state := range []toolplane.ConnectionState{toolplane.ConnectionActive, toolplane.ConnectionNeedsReauth} {
		c := fullConnection(org, "con-2-"+string(state), at(time.Second))
		c.Name, c.State = first.Name, state
		if err := s.InsertConnection(ctx, c, newChange(org)); !errors.Is(err, toolplane.ErrExists) {
			t.Fatalf("InsertConnection(name held, %s) = %v, want ErrExists", state, err)
		}
		wantNoConnection(t, s, org, c.ID)
	}

	// Another organization's name is its own.
	other := fullConnection(newOrg(), first.ID, base)
	other.Name = first.Name
	insertConnection(t, s, other)

	// A rename onto a held name writes nothing.
	second := fullConnection(org, "con-2", at(time.Second))
	second.Name = "erp"
	insertConnection(t, s, second)
	rename := *second
	rename.Name = first.Name
	rename.Reason = "renamed"
	if ok, err := s.UpdateConnection(ctx, &rename, newChange(org)); ok || !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("UpdateConnection(onto a held name) = %v, %v; want false, ErrExists", ok, err)
	}
	if rename.Version != second.Version {
		t.Errorf("refused rename changed c.Version to %d", rename.Version)
	}
	wantConnection(t, s, second)

	// Revoking the holder frees the name, for a new connection or a rename;
	// revoked connections may share it.
	revoked := *first
	revoked.State, revoked.RevokedAt = toolplane.ConnectionRevoked, at(time.Hour)
	if ok, err := s.UpdateConnection(ctx, &revoked, newChange(org)); !ok || err != nil {
		t.Fatalf("UpdateConnection(revoke) = %v, %v", ok, err)
	}
	third := fullConnection(org, "con-3", at(2*time.Second))
	third.Name = first.Name
	insertConnection(t, s, third)
	wantConnection(t, s, third)
	third.State, third.RevokedAt = toolplane.ConnectionRevoked, at(2*time.Hour)
	if ok, err := s.UpdateConnection(ctx, third, nil); !ok || err != nil {
		t.Fatalf("UpdateConnection(revoke the second holder) = %v, %v", ok, err)
	}
	renamed := *second
	renamed.Name = first.Name
	if ok, err := s.UpdateConnection(ctx, &renamed, nil); !ok || err != nil {
		t.Fatalf("UpdateConnection(rename onto a freed name) = %v, %v", ok, err)
	}
	wantConnection(t, s, &revoked)
	wantConnection(t, s, third)
	wantConnection(t, s, &renamed)
}

func testConnectionGetRoundTrip(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	tests := []struct {
		name       string
		connection *toolplane.Connection
	}{
		{"every field set", fullConnection(org, "con-full", base)},
		{"another organization's", fullConnection(other, "con-full", base)},
		{"static, shared", func() *toolplane.Connection {
			c := fullConnection(org, "con-static", base)
			c.Kind, c.UserID = toolplane.ConnectionStatic, ""
			c.Config = toolplane.ConnectionConfig{Auth: toolplane.AuthBearer, Egress: toolplane.EgressRules{Hosts: []string{"api.example.com"}}}
			c.TokenExpiresAt, c.RefreshOwner, c.RefreshUntil, c.Scopes = time.Time{}, "", time.Time{}, nil
			return c
		}()},
		{"optional fields zero", &toolplane.Connection{
			ID: "con-zero", OrganizationID: org, Name: "zero", Provider: "p", Kind: toolplane.ConnectionStatic,
			State: toolplane.ConnectionActive, CreatedAt: base, UpdatedAt: base,
		}},
		{"empty lists", func() *toolplane.Connection {
			c := fullConnection(org, "con-empty", base)
			c.Name = "empty"
			c.Scopes, c.Secret = []string{}, []byte{}
			c.Config.RequestScope, c.Config.Egress = []string{}, toolplane.EgressRules{Hosts: []string{}, AllowCIDRs: []string{}}
			c.Scope.Tools, c.Scope.Agents = []string{}, []string{}
			return c
		}()},
		{"revoked, later version", func() *toolplane.Connection {
			c := fullConnection(org, "con-revoked", base)
			c.State, c.Reason = toolplane.ConnectionRevoked, "offboarded"
			c.RevokedAt = at(48*time.Hour + 999*time.Nanosecond)
			c.Version = 9
			return c
		}()},
		{"needs reauthorization", func() *toolplane.Connection {
			c := fullConnection(org, "con-reauth", base)
			c.Name = "reauth"
			c.State, c.Reason = toolplane.ConnectionNeedsReauth, "invalid_grant"
			return c
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertConnection(t, s, tt.connection)
			wantConnection(t, s, tt.connection)
		})
	}
}

// testConnectionGetMissing: an ID from a request path, whatever it holds,
// answers ErrNotFound when no connection of the organization has it.
func testConnectionGetMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullConnection(org, "con-1", base)
	insertConnection(t, s, c)
	for _, id := range []string{"con-absent", "", "CON-1", "con-1 ", "con-", "con-1\x00", "con-\xff", "\xc3\x28"} {
		wantNoConnection(t, s, org, id)
	}
	for _, o := range []string{newOrg(), "", org + "\x00", org + "\xff"} {
		wantNoConnection(t, s, o, c.ID)
	}
}

func testConnectionUpdateCompareAndSwap(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullConnection(org, "con-1", base)
	insertConnection(t, s, orig)

	cur := *orig
	cur.Name = "renamed"
	cur.State, cur.Reason = toolplane.ConnectionNeedsReauth, "invalid_grant"
	cur.Config.TokenURL = "https://login.example.com/oauth2/token"
	cur.Config.Egress.AllowCIDRs = nil
	cur.Scope = toolplane.ConnectionScope{Agents: []string{"agent-support"}}
	cur.Scopes = []string{"api"}
	cur.Secret = []byte{0xff, 0x00, 'n', 'e', 'w'}
	cur.TokenExpiresAt = time.Time{}
	cur.RefreshOwner, cur.RefreshUntil = "node-2", at(2*time.Minute+5*time.Nanosecond)
	cur.UpdatedAt = at(time.Hour + 3*time.Nanosecond)
	ok, err := s.UpdateConnection(t.Context(), &cur, nil)
	if !ok || err != nil {
		t.Fatalf("UpdateConnection(current version) = %v, %v; want true, nil", ok, err)
	}
	if cur.Version != orig.Version+1 {
		t.Fatalf("after UpdateConnection, c.Version = %d, want %d", cur.Version, orig.Version+1)
	}
	want := cur
	wantConnection(t, s, &want)

	for _, v := range []int64{orig.Version, cur.Version + 1, 0, math.MaxInt64} {
		t.Run(fmt.Sprintf("version %d", v), func(t *testing.T) {
			stale := want
			stale.Version = v
			stale.Name, stale.Secret = "stale", []byte("stale secret")
			ch := newChange(org)
			ok, err := s.UpdateConnection(t.Context(), &stale, ch)
			if ok || err != nil {
				t.Fatalf("UpdateConnection(version %d, stored %d) = %v, %v; want false, nil", v, want.Version, ok, err)
			}
			if stale.Version != v {
				t.Errorf("failed UpdateConnection changed c.Version to %d, want %d", stale.Version, v)
			}
			wantConnection(t, s, &want)
			for _, c := range listChanges(t, s, org, "", "", maxLimit) {
				if c.ID == ch.ID {
					t.Errorf("a stale update recorded its change %s", ch.ID)
				}
			}
		})
	}
}

// testConnectionUpdateRecorded: an update and its change record are stored
// together or not at all.
func testConnectionUpdateRecorded(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullConnection(org, "con-1", base)
	if err := s.InsertConnection(t.Context(), orig, connectionChange(org, "chg-1", "connection.create", base)); err != nil {
		t.Fatal(err)
	}

	upd := *orig
	upd.Reason = "rotated"
	upd.Secret = []byte("rotated secret")
	if ok, err := s.UpdateConnection(t.Context(), &upd, connectionChange(org, "chg-1", "connection.rotate", at(time.Hour))); ok || !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("UpdateConnection(duplicate change ID) = %v, %v; want false, ErrExists", ok, err)
	}
	if upd.Version != orig.Version {
		t.Errorf("refused UpdateConnection changed c.Version to %d", upd.Version)
	}
	wantConnection(t, s, orig)
	wantChangeIDs(t, s, org, "chg-1")

	ch := connectionChange(org, "chg-2", "connection.rotate", at(time.Hour))
	if ok, err := s.UpdateConnection(t.Context(), &upd, ch); !ok || err != nil {
		t.Fatalf("UpdateConnection(recorded) = %v, %v; want true, nil", ok, err)
	}
	wantConnection(t, s, &upd)
	wantChangeIDs(t, s, org, "chg-1", "chg-2")
}

// testConnectionUpdateKeepsImmutable: whose connection it is, to what, of
// which kind, and its provenance are never written by an update.
func testConnectionUpdateKeepsImmutable(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullConnection(org, "con-1", base)
	insertConnection(t, s, orig)

	upd := *orig
	upd.Provider = "github"
	upd.Kind = toolplane.ConnectionStatic
	upd.UserID = "user-mallory"
	upd.Owner = "user-mallory"
	upd.CreatedAt = at(24 * time.Hour)
	upd.Reason = "written"
	if ok, err := s.UpdateConnection(t.Context(), &upd, nil); !ok || err != nil {
		t.Fatalf("UpdateConnection = %v, %v; want true, nil", ok, err)
	}
	want := *orig
	want.Reason = "written"
	want.Version = orig.Version + 1
	wantConnection(t, s, &want)
}

// testConnectionUpdateKeepsRevocation: revocation is final.
func testConnectionUpdateKeepsRevocation(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullConnection(org, "con-1", base)
	orig.State, orig.RevokedAt = toolplane.ConnectionRevoked, at(48*time.Hour+5*time.Nanosecond)
	insertConnection(t, s, orig)

	for _, tt := range []struct {
		state   toolplane.ConnectionState
		revoked time.Time
	}{
		{toolplane.ConnectionActive, time.Time{}},
		{toolplane.ConnectionNeedsReauth, at(72 * time.Hour)},
		{toolplane.ConnectionRevoked, at(-time.Hour)},
		{toolplane.ConnectionActive, at(time.Hour)},
	} {
		t.Run(fmt.Sprintf("%s %s", tt.state, tt.revoked.Format(time.RFC3339)), func(t *testing.T) {
			cur, err := s.GetConnection(t.Context(), org, orig.ID)
			if err != nil {
				t.Fatal(err)
			}
			upd := *cur
			upd.State, upd.RevokedAt = tt.state, tt.revoked
			upd.Reason = "after revocation " + string(tt.state)
			upd.Secret = nil
			if ok, err := s.UpdateConnection(t.Context(), &upd, nil); !ok || err != nil {
				t.Fatalf("UpdateConnection = %v, %v; want true, nil", ok, err)
			}
			want := upd
			want.State, want.RevokedAt = toolplane.ConnectionRevoked, orig.RevokedAt
			wantConnection(t, s, &want)
		})
	}
}

func testConnectionUpdateMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	c := fullConnection(org, "con-absent", base)
	ch := newChange(org)
	ok, err := s.UpdateConnection(t.Context(), c, ch)
	if !refused(ok, err) {
		t.Fatalf("UpdateConnection(missing) = %v, %v; want false and nil or ErrNotFound", ok, err)
	}
	if c.Version != 1 {
		t.Errorf("failed UpdateConnection changed c.Version to %d", c.Version)
	}
	wantNoConnection(t, s, org, c.ID)
	wantChangeIDs(t, s, org)
}

// testConnectionConcurrentUpdate: of many writers updating from one
// version (two nodes refreshing one token), exactly one wins.
func testConnectionConcurrentUpdate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	orig := fullConnection(org, "con-1", base)
	insertConnection(t, s, orig)

	// Half the writers record a change with their update, half do not.
	type update struct {
		c  toolplane.Connection
		ch *toolplane.Change
	}
	won := race(t, "UpdateConnection", func(i int) *update {
		u := &update{c: *orig}
		u.c.RefreshOwner = fmt.Sprintf("node-%d", i)
		u.c.Secret = fmt.Appendf(nil, "secret-%d", i)
		if i%2 == 0 {
			u.ch = newChange(org)
		}
		return u
	}, func(u *update) (bool, error) { return s.UpdateConnection(t.Context(), &u.c, u.ch) })
	w := &won.c
	if w.Version != orig.Version+1 {
		t.Errorf("winner's Version = %d, want %d", w.Version, orig.Version+1)
	}
	wantConnection(t, s, w)
}

func testConnectionList(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	var want []toolplane.Connection
	const n = 25
	for _, i := range shuffled(n) {
		c := fullConnection(org, fmt.Sprintf("con-%03d", n-i), at(time.Duration(i/2)*time.Second+time.Duration(i)*time.Nanosecond))
		if i%3 == 0 {
			c.State, c.RevokedAt = toolplane.ConnectionRevoked, at(time.Hour)
		}
		insertConnection(t, s, c)
		want = append(want, *c)
	}
	for i := range 5 {
		insertConnection(t, s, fullConnection(other, fmt.Sprintf("con-%d", i), at(time.Duration(i)*time.Second)))
	}
	slices.SortFunc(want, compareConnections)

	// Between pages, a newer connection (a few, so paging by one row at a
	// time still ends): paging must reach it.
	extra := 0
	between := func() {
		if extra == 12 {
			return
		}
		extra++
		c := fullConnection(org, fmt.Sprintf("late-%03d", extra), at(time.Hour+time.Duration(extra)*time.Second))
		insertConnection(t, s, c)
		want = append(want, *c)
	}
	for _, limit := range []int{1, 4, maxLimit} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			got := listConnections(t, s, org, toolplane.ConnectionFilter{}, limit, between)
			wantRows(t, "ListConnections", got, want, connectionID)
		})
	}

	if rows, next, err := s.ListConnections(t.Context(), newOrg(), toolplane.ConnectionFilter{}, "", 10); err != nil || len(rows) != 0 || next != "" {
		t.Errorf("ListConnections(organization without connections) = %d rows, %q, %v; want none", len(rows), next, err)
	}
}

func testConnectionListFilter(t *testing.T, s toolplane.Store) {
	org := newOrg()
	var all []toolplane.Connection
	providers := []string{"salesforce", "github", "postgres"}
	users := []string{"", "user-ada", "user-grace"}
	states := []toolplane.ConnectionState{toolplane.ConnectionActive, toolplane.ConnectionNeedsReauth, toolplane.ConnectionRevoked}
	for i := range 27 {
		c := fullConnection(org, fmt.Sprintf("con-%02d", i), at(time.Duration(i%5)*time.Second))
		c.Provider, c.UserID, c.State = providers[i%3], users[(i/3)%3], states[(i/9)%3]
		insertConnection(t, s, c)
		all = append(all, *c)
	}
	slices.SortFunc(all, compareConnections)
	filters := []toolplane.ConnectionFilter{
		{},
		{Provider: "github"},
		{UserID: "user-ada"},
		{UserID: "user-grace", State: toolplane.ConnectionRevoked},
		{State: toolplane.ConnectionNeedsReauth},
		{Provider: "postgres", UserID: "user-grace", State: toolplane.ConnectionActive},
		{Provider: "absent"},
		{Provider: "github\x00"},
		{UserID: "user-\xff"},
	}
	for _, f := range filters {
		t.Run(fmt.Sprintf("%+q", f), func(t *testing.T) {
			var want []toolplane.Connection
			for _, c := range all {
				if (f.Provider == "" || c.Provider == f.Provider) && (f.UserID == "" || c.UserID == f.UserID) && (f.State == "" || c.State == f.State) {
					want = append(want, c)
				}
			}
			for _, limit := range []int{2, maxLimit} {
				wantRows(t, "ListConnections", listConnections(t, s, org, f, limit, nil), want, connectionID)
			}
		})
	}
}

// testConnectionListAll: the operator's list reaches every organization's
// connections, by ID then organization, and pages through them whole.
func testConnectionListAll(t *testing.T, s toolplane.Store) {
	orgs := []string{newOrg(), newOrg(), newOrg()}
	// A prefix of this subtest's own: another subtest's rows may share the
	// store, and are left out of the comparison, not of the list.
	prefix := "con-" + strings.TrimPrefix(orgs[0], "org-") + "-"
	mine := map[string]bool{}
	var want []toolplane.Connection
	for i, org := range orgs {
		mine[org] = true
		for j := range 4 {
			// The same IDs in every organization, created in another order.
			c := fullConnection(org, fmt.Sprintf("%s%d", prefix, (j*3+i)%4), at(time.Duration(-i)*time.Second))
			c.Name = c.ID
			if j == 0 {
				c.State, c.RevokedAt = toolplane.ConnectionRevoked, at(time.Hour)
			}
			insertConnection(t, s, c)
			want = append(want, *c)
		}
	}
	slices.SortFunc(want, func(a, b toolplane.Connection) int {
		return cmp.Or(strings.Compare(a.ID, b.ID), strings.Compare(a.OrganizationID, b.OrganizationID))
	})
	for _, limit := range []int{1, 5, maxLimit} {
		t.Run(fmt.Sprintf("limit %d", limit), func(t *testing.T) {
			all := pageAll(t, "ListAllConnections", limit, nil, func(after string) ([]toolplane.Connection, string, error) {
				return s.ListAllConnections(t.Context(), after, limit)
			})
			var got []toolplane.Connection
			for i, c := range all {
				if i > 0 {
					prev := all[i-1]
					if cmp.Or(strings.Compare(prev.ID, c.ID), strings.Compare(prev.OrganizationID, c.OrganizationID)) >= 0 {
						t.Fatalf("ListAllConnections answered %s after %s", connectionID(c), connectionID(prev))
					}
				}
				if mine[c.OrganizationID] {
					got = append(got, c)
				}
			}
			wantRows(t, "ListAllConnections", got, want, connectionID)
		})
	}
}

// oauthStateID answers a state ID no other subtest uses: state IDs are
// unique across organizations.
func oauthStateID(org, name string) string { return "st_" + org + "_" + name }

func fullOAuthState(org, id string, created time.Time) *toolplane.OAuthState {
	return &toolplane.OAuthState{
		ID:             id,
		OrganizationID: org,
		ConnectionID:   "con-1",
		UserID:         "user-ada",
		Verifier:       everyByte,
		RedirectURI:    "https://toolplane.example.com/oauth/callback?x=ü&y=1",
		CreatedAt:      created,
		ExpiresAt:      created.Add(10*time.Minute + 7*time.Nanosecond),
	}
}

func insertOAuthState(t *testing.T, s toolplane.Store, st *toolplane.OAuthState) {
	t.Helper()
	if err := s.InsertOAuthState(t.Context(), st); err != nil {
		t.Fatalf("InsertOAuthState = %v", err)
	}
}

// wantTaken fails t unless taking id at now answers want.
func wantTaken(t *testing.T, s toolplane.Store, id string, now time.Time, want *toolplane.OAuthState) {
	t.Helper()
	got, err := s.TakeOAuthState(t.Context(), id, now)
	if err != nil {
		t.Fatalf("TakeOAuthState = %v", err)
	}
	if d := diff(*got, *want); d != "" {
		t.Errorf("TakeOAuthState: %s", d)
	}
}

// wantNotTaken fails t unless taking id at now answers ErrNotFound.
func wantNotTaken(t *testing.T, s toolplane.Store, id string, now time.Time) {
	t.Helper()
	if got, err := s.TakeOAuthState(t.Context(), id, now); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("TakeOAuthState(%q) = %+v, %v; want ErrNotFound", id, got, err)
	}
}

// testOAuthStateTake: a state is answered whole, once.
func testOAuthStateTake(t *testing.T, s toolplane.Store) {
	org := newOrg()
	tests := []struct {
		name  string
		state *toolplane.OAuthState
	}{
		{"every field set", fullOAuthState(org, oauthStateID(org, "full"), base)},
		{"optional fields zero", &toolplane.OAuthState{ID: oauthStateID(org, "zero"), OrganizationID: org, CreatedAt: base, ExpiresAt: at(time.Minute)}},
		{"empty verifier", func() *toolplane.OAuthState {
			st := fullOAuthState(org, oauthStateID(org, "empty"), base)
			st.Verifier = []byte{}
			return st
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			insertOAuthState(t, s, tt.state)
			wantTaken(t, s, tt.state.ID, base, tt.state)
			wantNotTaken(t, s, tt.state.ID, base)
		})
	}
}

// testOAuthStateDuplicate: a state ID is unique across organizations, and
// a refused insert leaves the stored state as it was.
func testOAuthStateDuplicate(t *testing.T, s toolplane.Store) {
	org := newOrg()
	first := fullOAuthState(org, oauthStateID(org, "1"), base)
	insertOAuthState(t, s, first)
	for _, dupOrg := range []string{org, newOrg()} {
		dup := fullOAuthState(dupOrg, first.ID, at(time.Hour))
		dup.UserID, dup.RedirectURI = "user-mallory", "https://evil.example.com/"
		if err := s.InsertOAuthState(t.Context(), dup); !errors.Is(err, toolplane.ErrExists) {
			t.Fatalf("InsertOAuthState(same ID, org %s) = %v, want ErrExists", dupOrg, err)
		}
	}
	wantTaken(t, s, first.ID, base, first)
}

// testOAuthStateExpired: a state taken at or after its expiry answers
// ErrNotFound and is gone; one taken before it is answered.
func testOAuthStateExpired(t *testing.T, s toolplane.Store) {
	org := newOrg()
	tests := []struct {
		name    string
		now     func(st *toolplane.OAuthState) time.Time
		expired bool
	}{
		{"a microsecond before", func(st *toolplane.OAuthState) time.Time { return stored(st.ExpiresAt).Add(-time.Microsecond) }, false},
		{"at its expiry", func(st *toolplane.OAuthState) time.Time { return stored(st.ExpiresAt) }, true},
		{"an hour after", func(st *toolplane.OAuthState) time.Time { return st.ExpiresAt.Add(time.Hour) }, true},
		{"another zone", func(st *toolplane.OAuthState) time.Time {
			return st.ExpiresAt.Add(time.Second).In(time.FixedZone("UTC-7", -7*60*60))
		}, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := fullOAuthState(org, oauthStateID(org, fmt.Sprint(i)), base)
			insertOAuthState(t, s, st)
			now := tt.now(st)
			if !tt.expired {
				wantTaken(t, s, st.ID, now, st)
				return
			}
			wantNotTaken(t, s, st.ID, now)
			// It was deleted: not even a time before its expiry finds it.
			wantNotTaken(t, s, st.ID, base)
			if err := s.InsertOAuthState(t.Context(), st); err != nil {
				t.Errorf("InsertOAuthState(the expired state's ID again) = %v, want it free", err)
			}
		})
	}
}

// testOAuthStateSweep: states nobody took are removed once expired, at
// most limit at a time, and those still waiting stay. The suite's other
// states were made long after these expire, so the sweep, which crosses
// organizations, leaves them alone.
func testOAuthStateSweep(t *testing.T, s toolplane.Store) {
	org, other := newOrg(), newOrg()
	long := time.Date(2001, 3, 1, 12, 0, 0, 0, time.UTC)
	var gone []*toolplane.OAuthState
	for i, o := range []string{org, other, org} {
		st := fullOAuthState(o, oauthStateID(o, fmt.Sprint("old", i)), long.Add(time.Duration(i)*time.Minute))
		insertOAuthState(t, s, st)
		gone = append(gone, st)
	}
	waiting := fullOAuthState(org, oauthStateID(org, "waiting"), long.Add(time.Hour))
	insertOAuthState(t, s, waiting)
	sweep := stored(gone[2].ExpiresAt) // the last one expires exactly then

	if _, err := s.DeleteExpiredOAuthStates(t.Context(), sweep, 0); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("DeleteExpiredOAuthStates(limit 0) = %v, want ErrInvalid", err)
	}
	if n, err := s.DeleteExpiredOAuthStates(t.Context(), sweep, 2); err != nil || n != 2 {
		t.Fatalf("DeleteExpiredOAuthStates(limit 2) = %d, %v; want 2", n, err)
	}
	if n, err := s.DeleteExpiredOAuthStates(t.Context(), sweep, 10); err != nil || n != 1 {
		t.Fatalf("DeleteExpiredOAuthStates(the rest) = %d, %v; want 1", n, err)
	}
	for _, st := range gone {
		wantNotTaken(t, s, st.ID, long)
	}
	wantTaken(t, s, waiting.ID, long, waiting)
}

// testOAuthStateTakeMissing: the state parameter comes from the provider's
// redirect and may hold any byte; a state that is not there answers
// ErrNotFound, never another error, and leaves the others.
func testOAuthStateTakeMissing(t *testing.T, s toolplane.Store) {
	org := newOrg()
	st := fullOAuthState(org, oauthStateID(org, "1"), base)
	insertOAuthState(t, s, st)
	for _, id := range []string{oauthStateID(org, "absent"), "", strings.ToUpper(st.ID), st.ID + " ", st.ID[:len(st.ID)-1], st.ID + "\x00", "st_\xff", org} {
		wantNotTaken(t, s, id, base)
	}
	wantTaken(t, s, st.ID, base, st)
}

// testOAuthStateConcurrentTake: of many callbacks racing with one state,
// exactly one takes it.
func testOAuthStateConcurrentTake(t *testing.T, s toolplane.Store) {
	org := newOrg()
	for round := range 4 {
		st := fullOAuthState(org, oauthStateID(org, fmt.Sprint(round)), base)
		insertOAuthState(t, s, st)
		var wins atomic.Int64
		start := make(chan struct{})
		var wg sync.WaitGroup
		for i := range writers {
			wg.Go(func() {
				<-start
				got, err := s.TakeOAuthState(t.Context(), st.ID, base)
				switch {
				case err == nil:
					wins.Add(1)
					if d := diff(*got, *st); d != "" {
						t.Errorf("taker %d: %s", i, d)
					}
				case !errors.Is(err, toolplane.ErrNotFound):
					t.Errorf("TakeOAuthState(taker %d) = %v, want nil or ErrNotFound", i, err)
				}
			})
		}
		close(start)
		wg.Wait()
		if n := wins.Load(); n != 1 {
			t.Fatalf("round %d: %d of %d concurrent TakeOAuthState calls won, want exactly 1", round, n, writers)
		}
	}
}
