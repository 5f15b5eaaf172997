package storetest

import (
	"crypto/rand"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// OAuthStore is what RunOAuth needs of a backend.
type OAuthStore interface {
	toolplane.Store
	toolplane.OAuthStore
	toolplane.OAuthConsentStore
}

// The authorization server's store contract, beyond toolplane.OAuthStore's
// comments:
//
//   - A code is taken once: of concurrent takes exactly one succeeds, the
//     others answer the code with ErrReused.
//   - A refresh token rotates once: of concurrent rotations exactly one
//     stores its successor; the others answer ErrReused and store nothing.
//   - Grants and client settings are the organization's: no read, list or
//     revocation reaches another's.
//   - A grant and its first code are stored together or not at all.
//   - A capped client insert never lets concurrent inserts pass the cap.
//   - A client's setting, a grant's revocation, a consent (a grant and its
//     code) and a client's revocation are stored with their audit event
//     in one transaction, or not at all; the event continues its
//     organization's chain (see controlAuditCases).
//   - A consent is stored only while its client is registered and not
//     revoked in its organization; one stored beside the client's
//     revocation is revoked by it, one beside the sweep keeps its client.
var oauthCases = []struct {
	name string
	run  func(t *testing.T, s OAuthStore)
}{
	{"Clients", testOAuthClients},
	{"ClientSettings", testOAuthClientSettings},
	{"Grants", testOAuthGrants},
	{"GrantIsolation", testOAuthGrantIsolation},
	{"CodeTakenOnce", testOAuthCodeTakenOnce},
	{"RefreshRotatesOnce", testOAuthRefreshRotatesOnce},
	{"SigningKeys", testOAuthSigningKeys},
	{"Expired", testOAuthExpired},
	{"GrantWithCode", testOAuthGrantWithCode},
	{"ClientCap", testOAuthClientCap},
	{"UnusedClients", testOAuthUnusedClients},
	{"AuditedClientSetting", oauthAudited(oauthSettingWrite)},
	{"AuditedGrantRevoke", oauthAudited(oauthRevokeWrite)},
	{"AuditedConsent", oauthAudited(oauthConsentWrite)},
	{"AuditedClientRevoke", testOAuthClientRevokeAudited},
	{"ConsentChecksClient", testOAuthConsentChecksClient},
	{"ConsentRacesRevocation", testOAuthConsentRacesRevocation},
	{"ConsentRacesSweep", testOAuthConsentRacesSweep},
}

// RunOAuth runs the authorization server's store checks as subtests of t,
// named OAuth/Check, each on a store newStore answers.
func RunOAuth(t *testing.T, newStore func(t *testing.T) OAuthStore) {
	t.Helper()
	t.Run("OAuth", func(t *testing.T) {
		t.Parallel()
		for _, c := range oauthCases {
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newStore(t))
			})
		}
	})
}

func testOAuthClients(t *testing.T, s OAuthStore) {
	ctx := t.Context()
	c := &toolplane.OAuthClient{ID: "tpc_" + rand.Text(), Name: "Client ✓", RedirectURIs: []string{"http://127.0.0.1:3334/cb", "https://a.example/cb"},
		Source: toolplane.OAuthClientRegistered, CreatedAt: at(0)}
	if err := s.InsertOAuthClient(ctx, c, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.InsertOAuthClient(ctx, c, 0); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("second insert: %v, want ErrExists", err)
	}
	got, err := s.GetOAuthClient(ctx, c.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *c
	want.CreatedAt = stored(want.CreatedAt)
	if d := diff(*got, want); d != "" {
		t.Fatalf("client: %s", d)
	}
	if _, err := s.GetOAuthClient(ctx, "tpc_none"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("unknown client: %v", err)
	}
	newer := &toolplane.OAuthClient{ID: "https://client.example/" + rand.Text(), Name: "Doc", RedirectURIs: []string{"https://client.example/cb"},
		Source: toolplane.OAuthClientDocument, CreatedAt: at(time.Minute)}
	if err := s.InsertOAuthClient(ctx, newer, 0); err != nil {
		t.Fatal(err)
	}
	list, err := s.OAuthClients(ctx, 100)
	if err != nil || len(list) < 2 || list[0].ID != newer.ID {
		t.Fatalf("clients: %v %+v, want the newest first", err, list)
	}
}

func testOAuthClientSettings(t *testing.T, s OAuthStore) {
	ctx, org, other := t.Context(), newOrg(), newOrg()
	set := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: "tpc_a", AgentID: "agent-a", UpdatedBy: "admin", UpdatedAt: at(0)}
	if err := s.PutOAuthClientSetting(ctx, set, nil); err != nil {
		t.Fatal(err)
	}
	set.RevokedAt, set.UpdatedAt = at(time.Hour), at(time.Hour)
	if err := s.PutOAuthClientSetting(ctx, set, nil); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetOAuthClientSetting(ctx, org, "tpc_a")
	if err != nil {
		t.Fatal(err)
	}
	want := *set
	want.RevokedAt, want.UpdatedAt = stored(want.RevokedAt), stored(want.UpdatedAt)
	if d := diff(*got, want); d != "" {
		t.Fatalf("setting: %s", d)
	}
	// A change made from a copy read before the revocation (an agent
	// set at once beside it) keeps the revocation.
	stale := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: "tpc_a", AgentID: "agent-b", UpdatedBy: "admin", UpdatedAt: at(2 * time.Hour)}
	if err := s.PutOAuthClientSetting(ctx, stale, nil); err != nil {
		t.Fatal(err)
	}
	if got, err := s.GetOAuthClientSetting(ctx, org, "tpc_a"); err != nil || !got.RevokedAt.Equal(stored(set.RevokedAt)) || got.AgentID != "agent-b" {
		t.Fatalf("setting after a stale change: %v %+v; want the agent changed and the revocation kept", err, got)
	}
	if _, err := s.GetOAuthClientSetting(ctx, other, "tpc_a"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("another organization's setting: %v, want ErrNotFound", err)
	}
	if l, err := s.OAuthClientSettings(ctx, other); err != nil || len(l) != 0 {
		t.Fatalf("another organization's settings: %v %+v", err, l)
	}
	if l, err := s.OAuthClientSettings(ctx, org); err != nil || len(l) != 1 {
		t.Fatalf("settings: %v %+v", err, l)
	}
}

func newOAuthGrant(org, subject string, d time.Duration) *toolplane.OAuthGrant {
	return &toolplane.OAuthGrant{OrganizationID: org, ID: "oag_" + rand.Text(), ClientID: "tpc_a", Subject: subject,
		Roles: []string{"approver"}, AgentID: "agent-a", Tools: []string{"payments.refund"}, Resource: "https://tp.example/mcp",
		CreatedAt: at(d), ExpiresAt: at(d + 24*time.Hour), SignedInAt: at(d - time.Hour)}
}

func testOAuthGrants(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	g := newOAuthGrant(org, "alice", 0)
	g2 := newOAuthGrant(org, "alice", time.Minute)
	g2.Tools = nil
	g3 := newOAuthGrant(org, "bob", 2*time.Minute)
	for _, x := range []*toolplane.OAuthGrant{g, g2, g3} {
		if err := s.InsertOAuthGrant(ctx, x); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.GetOAuthGrant(ctx, org, g.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := *g
	want.CreatedAt, want.ExpiresAt, want.SignedInAt = stored(want.CreatedAt), stored(want.ExpiresAt), stored(want.SignedInAt)
	if d := diff(*got, want); d != "" {
		t.Fatalf("grant: %s", d)
	}
	if l, err := s.OAuthGrants(ctx, org, "alice"); err != nil || len(l) != 2 || l[0].ID != g2.ID || l[0].Tools != nil {
		t.Fatalf("alice's grants: %v %+v", err, l)
	}
	if l, err := s.OAuthGrants(ctx, org, ""); err != nil || len(l) != 3 {
		t.Fatalf("every grant: %v %+v", err, l)
	}
	if ok, err := s.RevokeOAuthGrant(ctx, org, g.ID, toolplane.OAuthRevokedByPerson, at(time.Hour), nil); !ok || err != nil {
		t.Fatalf("revoke: %v %v", ok, err)
	}
	if ok, err := s.RevokeOAuthGrant(ctx, org, g.ID, toolplane.OAuthRevokedByAdmin, at(2*time.Hour), nil); ok || err != nil {
		t.Fatalf("second revoke: %v %v, want false", ok, err)
	}
	got, _ = s.GetOAuthGrant(ctx, org, g.ID)
	if got.RevokedReason != toolplane.OAuthRevokedByPerson || !got.RevokedAt.Equal(stored(at(time.Hour))) || got.Live(at(time.Minute)) {
		t.Fatalf("revoked grant: %+v", got)
	}
	off := &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: "tpc_a", RevokedAt: at(time.Hour), UpdatedBy: "admin", UpdatedAt: at(time.Hour)}
	if n, err := s.RevokeOAuthClient(ctx, off, toolplane.OAuthRevokedClientOff, nil); n != 2 || err != nil {
		t.Fatalf("revoke the client's: %d %v, want the two standing", n, err)
	}
}

func testOAuthGrantIsolation(t *testing.T, s OAuthStore) {
	ctx, org, other := t.Context(), newOrg(), newOrg()
	g := newOAuthGrant(org, "alice", 0)
	if err := s.InsertOAuthGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOAuthGrant(ctx, other, g.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("another organization's grant: %v", err)
	}
	if l, err := s.OAuthGrants(ctx, other, ""); err != nil || len(l) != 0 {
		t.Fatalf("another organization's grants: %v %+v", err, l)
	}
	if ok, err := s.RevokeOAuthGrant(ctx, other, g.ID, toolplane.OAuthRevokedByAdmin, at(time.Hour), nil); ok || err != nil {
		t.Fatalf("revoked from another organization: %v %v", ok, err)
	}
	off := &toolplane.OAuthClientSetting{OrganizationID: other, ClientID: g.ClientID, RevokedAt: at(time.Hour), UpdatedBy: "admin", UpdatedAt: at(time.Hour)}
	if n, err := s.RevokeOAuthClient(ctx, off, toolplane.OAuthRevokedClientOff, nil); n != 0 || err != nil {
		t.Fatalf("revoked from another organization: %d %v", n, err)
	}
	if got, err := s.GetOAuthGrant(ctx, org, g.ID); err != nil || !got.RevokedAt.IsZero() {
		t.Fatalf("grant after another organization's revocations: %v %+v", err, got)
	}
}

func testOAuthCodeTakenOnce(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	c := &toolplane.OAuthCode{Hash: rand.Text(), OrganizationID: org, GrantID: "oag_1", ClientID: "tpc_a",
		RedirectURI: "http://127.0.0.1/cb", Challenge: "chal", ExpiresAt: at(time.Minute)}
	if err := s.InsertOAuthCode(ctx, c); err != nil {
		t.Fatal(err)
	}
	var ok, reused atomic.Int32
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			got, err := s.TakeOAuthCode(ctx, c.Hash, at(time.Second))
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, toolplane.ErrReused) && got != nil && got.GrantID == c.GrantID:
				reused.Add(1)
			default:
				t.Errorf("take: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || reused.Load() != 7 {
		t.Fatalf("%d takes succeeded and %d were told reused, want 1 and 7", ok.Load(), reused.Load())
	}
	if _, err := s.TakeOAuthCode(ctx, "unknown", at(0)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("unknown code: %v", err)
	}
}

func testOAuthRefreshRotatesOnce(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	first := &toolplane.OAuthRefreshToken{Hash: rand.Text(), OrganizationID: org, GrantID: "oag_1", CreatedAt: at(0), ExpiresAt: at(time.Hour)}
	if err := s.InsertOAuthRefreshToken(ctx, first); err != nil {
		t.Fatal(err)
	}
	var ok, reused atomic.Int32
	var wg sync.WaitGroup
	nexts := make([]*toolplane.OAuthRefreshToken, 8)
	for i := range nexts {
		nexts[i] = &toolplane.OAuthRefreshToken{Hash: rand.Text(), OrganizationID: org, GrantID: "oag_1", CreatedAt: at(time.Second), ExpiresAt: at(time.Hour)}
		wg.Go(func() {
			got, err := s.RotateOAuthRefreshToken(ctx, first.Hash, nexts[i], at(time.Second))
			switch {
			case err == nil && got.GrantID == "oag_1":
				ok.Add(1)
			case errors.Is(err, toolplane.ErrReused) && got != nil && got.GrantID == "oag_1":
				reused.Add(1)
			default:
				t.Errorf("rotate: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != 1 || reused.Load() != 7 {
		t.Fatalf("%d rotations succeeded and %d were told reused, want 1 and 7", ok.Load(), reused.Load())
	}
	stored := 0
	for _, n := range nexts {
		if _, err := s.GetOAuthRefreshToken(ctx, n.Hash); err == nil {
			stored++
		}
	}
	if stored != 1 {
		t.Fatalf("%d successors stored, want 1", stored)
	}
	if _, err := s.RotateOAuthRefreshToken(ctx, "unknown", nexts[0], at(0)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("unknown token: %v", err)
	}
}

func testOAuthSigningKeys(t *testing.T, s OAuthStore) {
	ctx := t.Context()
	a := &toolplane.OAuthSigningKey{ID: "k-" + rand.Text(), Sealed: []byte{1, 2}, Public: []byte(`{}`), CreatedAt: at(0)}
	b := &toolplane.OAuthSigningKey{ID: "k-" + rand.Text(), Sealed: []byte{3}, Public: []byte(`{}`), CreatedAt: at(time.Hour)}
	for _, k := range []*toolplane.OAuthSigningKey{a, b} {
		if err := s.InsertOAuthSigningKey(ctx, k); err != nil {
			t.Fatal(err)
		}
	}
	if ok, err := s.RetireOAuthSigningKey(ctx, a.ID, at(2*time.Hour)); !ok || err != nil {
		t.Fatalf("retire: %v %v", ok, err)
	}
	keys, err := s.OAuthSigningKeys(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range keys {
		if k.ID == a.ID {
			t.Fatalf("a retired key is listed: %+v", k)
		}
	}
	found := false
	for _, k := range keys {
		found = found || k.ID == b.ID && string(k.Sealed) == string(b.Sealed)
	}
	if !found {
		t.Fatalf("keys %+v lack %s", keys, b.ID)
	}
}

func testOAuthExpired(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	old := &toolplane.OAuthCode{Hash: rand.Text(), OrganizationID: org, GrantID: "g", ClientID: "c", ExpiresAt: at(-time.Hour)}
	live := &toolplane.OAuthCode{Hash: rand.Text(), OrganizationID: org, GrantID: "g", ClientID: "c", ExpiresAt: at(time.Hour)}
	for _, c := range []*toolplane.OAuthCode{old, live} {
		if err := s.InsertOAuthCode(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.DeleteOAuthExpired(ctx, at(0), 1000); err != nil {
		t.Fatal(err)
	}
	if _, err := s.TakeOAuthCode(ctx, old.Hash, at(0)); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("expired code still there: %v", err)
	}
	if _, err := s.TakeOAuthCode(ctx, live.Hash, at(0)); err != nil {
		t.Fatalf("live code removed: %v", err)
	}
}

func testOAuthGrantWithCode(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	code := func(g *toolplane.OAuthGrant, hash string) *toolplane.OAuthCode {
		return &toolplane.OAuthCode{Hash: hash, OrganizationID: org, GrantID: g.ID, ClientID: g.ClientID,
			RedirectURI: "http://127.0.0.1/cb", Challenge: "chal", ExpiresAt: at(time.Minute)}
	}
	g := newOAuthGrant(org, "alice", 0)
	c := code(g, rand.Text())
	if err := s.InsertOAuthGrantWithCode(ctx, g, c, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetOAuthGrant(ctx, org, g.ID); err != nil {
		t.Fatalf("the grant: %v", err)
	}
	if got, err := s.TakeOAuthCode(ctx, c.Hash, at(time.Second)); err != nil || got.GrantID != g.ID {
		t.Fatalf("its code: %v %+v", err, got)
	}

	tests := []struct {
		name string
		// clash answers the grant and code to insert after g and c: one
		// of them collides with what is stored.
		clash func() (*toolplane.OAuthGrant, *toolplane.OAuthCode)
		// grantStored: the grant the failed insert carried is found after.
		grantStored bool
	}{
		{"the code's hash is taken", func() (*toolplane.OAuthGrant, *toolplane.OAuthCode) {
			g2 := newOAuthGrant(org, "alice", time.Minute)
			return g2, code(g2, c.Hash)
		}, false},
		{"the grant's ID is taken", func() (*toolplane.OAuthGrant, *toolplane.OAuthCode) {
			g2 := newOAuthGrant(org, "bob", time.Minute)
			g2.ID = g.ID
			return g2, code(g2, rand.Text())
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g2, c2 := tt.clash()
			if err := s.InsertOAuthGrantWithCode(ctx, g2, c2, nil); !errors.Is(err, toolplane.ErrExists) {
				t.Fatalf("insert: %v, want ErrExists", err)
			}
			got, err := s.GetOAuthGrant(ctx, org, g2.ID)
			switch {
			case !tt.grantStored && !errors.Is(err, toolplane.ErrNotFound):
				t.Fatalf("the grant of a failed code insert: %v %+v, want none stored", err, got)
			case tt.grantStored && (err != nil || got.Subject != g.Subject):
				t.Fatalf("the grant stored before: %v %+v, want it unchanged", err, got)
			}
			if c2.Hash != c.Hash {
				if _, err := s.TakeOAuthCode(ctx, c2.Hash, at(time.Second)); !errors.Is(err, toolplane.ErrNotFound) {
					t.Fatalf("the code of a failed grant insert: %v, want none stored", err)
				}
			}
		})
	}
	if l, err := s.OAuthGrants(ctx, org, ""); err != nil || len(l) != 1 {
		t.Fatalf("grants after the failed inserts: %v %+v, want the first alone", err, l)
	}
}

func testOAuthClientCap(t *testing.T, s OAuthStore) {
	ctx := t.Context()
	const max = 5
	client := func() *toolplane.OAuthClient {
		return &toolplane.OAuthClient{ID: "tpc_" + rand.Text(), RedirectURIs: []string{"http://127.0.0.1/cb"},
			Source: toolplane.OAuthClientRegistered, CreatedAt: at(0)}
	}
	first := client()
	if err := s.InsertOAuthClient(ctx, first, max); err != nil {
		t.Fatal(err)
	}
	// Concurrent inserts: exactly enough to fill the cap get in.
	var ok, full atomic.Int32
	var wg sync.WaitGroup
	for range 12 {
		wg.Go(func() {
			err := s.InsertOAuthClient(ctx, client(), max)
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, toolplane.ErrOAuthClientsFull) && errors.Is(err, toolplane.ErrConflict):
				full.Add(1)
			default:
				t.Errorf("insert: %v", err)
			}
		})
	}
	wg.Wait()
	if ok.Load() != max-1 || full.Load() != 12-(max-1) {
		t.Fatalf("%d inserts stored and %d refused, want %d and %d", ok.Load(), full.Load(), max-1, 12-(max-1))
	}
	if l, err := s.OAuthClients(ctx, 100); err != nil || len(l) != max {
		t.Fatalf("clients: %v %d, want %d", err, len(l), max)
	}
	// A client stored already is ErrExists at the cap too (a metadata
	// document's client is inserted at each first read of it).
	if err := s.InsertOAuthClient(ctx, first, max); !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("a known client at the cap: %v, want ErrExists", err)
	}
	if err := s.InsertOAuthClient(ctx, client(), 0); err != nil {
		t.Fatalf("uncapped: %v", err)
	}
	if err := s.InsertOAuthClient(ctx, client(), max+2); err != nil {
		t.Fatalf("under a higher cap: %v", err)
	}
}

func testOAuthUnusedClients(t *testing.T, s OAuthStore) {
	ctx, org := t.Context(), newOrg()
	client := func(source string, created time.Duration) *toolplane.OAuthClient {
		id := "tpc_" + rand.Text()
		if source == toolplane.OAuthClientDocument {
			id = "https://client.example/" + rand.Text()
		}
		c := &toolplane.OAuthClient{ID: id, RedirectURIs: []string{"http://127.0.0.1/cb"}, Source: source, CreatedAt: at(created)}
		if err := s.InsertOAuthClient(ctx, c, 0); err != nil {
			t.Fatal(err)
		}
		return c
	}
	unused := client(toolplane.OAuthClientRegistered, -48*time.Hour)
	consented := client(toolplane.OAuthClientRegistered, -48*time.Hour)
	g := newOAuthGrant(org, "alice", 0)
	g.ClientID = consented.ID
	if err := s.InsertOAuthGrant(ctx, g); err != nil {
		t.Fatal(err)
	}
	set := client(toolplane.OAuthClientRegistered, -48*time.Hour)
	if err := s.PutOAuthClientSetting(ctx, &toolplane.OAuthClientSetting{OrganizationID: org, ClientID: set.ID, RevokedAt: at(0), UpdatedBy: "admin", UpdatedAt: at(0)}, nil); err != nil {
		t.Fatal(err)
	}
	document := client(toolplane.OAuthClientDocument, -48*time.Hour)
	recent := client(toolplane.OAuthClientRegistered, 0)

	n, err := s.DeleteUnusedOAuthClients(ctx, at(-24*time.Hour), 1000)
	if err != nil || n != 1 {
		t.Fatalf("deleted %d (%v), want the one unused registration", n, err)
	}
	if _, err := s.GetOAuthClient(ctx, unused.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("the unused client: %v, want removed", err)
	}
	for _, c := range []*toolplane.OAuthClient{consented, set, document, recent} {
		if _, err := s.GetOAuthClient(ctx, c.ID); err != nil {
			t.Errorf("client %s (%s, created %v): %v, want kept", c.ID, c.Source, c.CreatedAt, err)
		}
	}
}
