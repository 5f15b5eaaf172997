package authserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/postgres"
	"github.com/toolplane/toolplane/postgres/pgtest"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// cluster is two nodes (servers) over one database, each watching its
// store's change feed.
type cluster struct {
	a, b *Server
	// stA, stB are the nodes' stores: one SQLite store, or two
	// PostgreSQL stores (pools) on one schema.
	stA, stB Store
	// cutB cuts node b's listening connection (PostgreSQL), nil on SQLite.
	cutB func(t *testing.T)
	// exec runs a statement on the database as an operator would (nil on
	// SQLite).
	exec func(t *testing.T, sql string, args ...any)
}

// clusters answers a cluster maker per backend: SQLite always, PostgreSQL
// when the test database is set.
func clusters(t *testing.T) map[string]func(t *testing.T) *cluster {
	out := map[string]func(t *testing.T) *cluster{
		"sqlite": func(t *testing.T) *cluster {
			st := sqlitetest.New(t)
			return newCluster(t, st, st)
		},
	}
	dsn, ok := pgtest.LookupDSN()
	if !ok {
		return out
	}
	out["postgres"] = func(t *testing.T) *cluster {
		dsn := pgtest.SchemaDSN(t, dsn)
		b := make([]byte, 6)
		rand.Read(b)
		app := "oauthfeed_" + hex.EncodeToString(b)
		var pools [2]*pgxpool.Pool
		for i := range pools {
			cfg, err := pgxpool.ParseConfig(dsn)
			if err != nil {
				t.Fatal(err)
			}
			if i == 1 {
				// Named so that this test cuts node b's listener and no
				// other test's.
				cfg.ConnConfig.RuntimeParams["application_name"] = app
			}
			if pools[i], err = pgxpool.NewWithConfig(context.Background(), cfg); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(pools[i].Close)
		}
		stA, stB := postgres.New(pools[0]), postgres.New(pools[1])
		if err := stA.Migrate(context.Background()); err != nil {
			t.Fatal(err)
		}
		c := newCluster(t, stA, stB)
		c.cutB = func(t *testing.T) {
			t.Helper()
			var cut int
			if err := pools[0].QueryRow(t.Context(), `SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity
				WHERE application_name = $1 AND query LIKE 'LISTEN %'`, app).Scan(&cut); err != nil || cut != 1 {
				t.Fatalf("cut %d listeners: %v", cut, err)
			}
		}
		c.exec = func(t *testing.T, sql string, args ...any) {
			t.Helper()
			if _, err := pools[0].Exec(t.Context(), sql, args...); err != nil {
				t.Fatal(err)
			}
		}
		return c
	}
	return out
}

func newCluster(t *testing.T, stA, stB Store) *cluster {
	k := make([]byte, secret.KeySize)
	rand.Read(k)
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	c := &cluster{stA: stA, stB: stB}
	for _, n := range []struct {
		s  **Server
		st Store
	}{{&c.a, stA}, {&c.b, stB}} {
		if *n.s, err = New(Config{Store: n.st, Keys: keys, Issuer: "https://tp.example", People: noPeople{}}); err != nil {
			t.Fatal(err)
		}
		s := *n.s
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- s.Watch(ctx) }()
		t.Cleanup(func() {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Errorf("Watch = %v, want context.Canceled", err)
			}
			if _, _, ok := s.verify.consents.get("acme", "x"); ok || s.verify.consents.len() != 0 {
				t.Error("consents kept after the watch ended")
			}
		})
		awaitTrusted(t, s)
	}
	return c
}

// trusted reports whether s's verifier trusts what it keeps now.
func trusted(s *Server) bool {
	c := s.verify.consents
	c.mu.RLock()
	defer c.mu.RUnlock()
	return !c.until.IsZero() && time.Now().Before(c.until)
}

func awaitTrusted(t *testing.T, s *Server) {
	t.Helper()
	await(t, "trusted", func() bool { return trusted(s) })
}

func await(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(15 * time.Second); !ok(); time.Sleep(2 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
	}
}

// kept reports whether s's verifier keeps org's grant id and trusts it.
func kept(s *Server, org, id string) bool {
	_, _, ok := s.verify.consents.get(org, id)
	return ok
}

var acmeAdmin = &toolplane.Credential{OrganizationID: "acme", Kind: toolplane.CredentialPerson, Subject: "root", Roles: []string{toolplane.RolePlatformAdmin}}

// TestRevokedOnEveryNodesNextCall: once a revocation made on node a
// answers (an admin's, or a client revoked), node b refuses the token on
// its next call, though it kept the consent in force a moment before; the
// same grant ID in another organization stays in force, and is never
// answered from the first's.
func TestRevokedOnEveryNodesNextCall(t *testing.T) {
	t.Parallel()
	for name, newCluster := range clusters(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			ctx := WithResource(t.Context(), c.a.Resource(""))
			g := grantIn(t, c.stA, "acme")
			twin := *g
			twin.OrganizationID, twin.Subject = "globex", "bob"
			if err := c.stA.InsertOAuthGrant(t.Context(), &twin); err != nil {
				t.Fatal(err)
			}
			second := grantIn(t, c.stA, "acme")
			tokens := map[string]string{}
			for _, x := range []*toolplane.OAuthGrant{g, &twin, second} {
				tok, err := c.a.AccessToken(ctx, x.OrganizationID, x.ID)
				if err != nil {
					t.Fatal(err)
				}
				tokens[x.OrganizationID+"/"+x.ID] = tok
				for range 2 {
					cred, err := c.b.Verifier().Verify(ctx, tok)
					if err != nil || cred.OrganizationID != x.OrganizationID || cred.ActsFor != x.Subject {
						t.Fatalf("%s/%s on node b: %v %+v", x.OrganizationID, x.ID, err, cred)
					}
				}
				if !kept(c.b, x.OrganizationID, x.ID) {
					t.Fatalf("node b keeps no %s/%s after verifying it", x.OrganizationID, x.ID)
				}
			}

			began := time.Now()
			if err := c.a.RevokeConsent(t.Context(), acmeAdmin, g.ID); err != nil {
				t.Fatal(err)
			}
			// The rule that makes it hold whatever the network does: the
			// revocation answers once the feed's settle time passed.
			if settle := c.stA.(toolplane.ChangeFeed).ChangeSettle(); time.Since(began) < settle {
				t.Fatalf("the revocation answered after %v, before the settle time %v", time.Since(began), settle)
			}
			if _, err := c.b.Verifier().Verify(ctx, tokens["acme/"+g.ID]); !errors.Is(err, toolplane.ErrUnauthenticated) {
				t.Fatalf("node b's next call after the revocation answered: %v", err)
			}
			if kept(c.b, "acme", g.ID) {
				t.Error("node b keeps a refused consent")
			}
			if cred, err := c.b.Verifier().Verify(ctx, tokens["globex/"+g.ID]); err != nil || cred.ActsFor != "bob" {
				t.Fatalf("the same grant ID in another organization: %v %+v", err, cred)
			}

			if err := c.stA.InsertOAuthClient(t.Context(), &toolplane.OAuthClient{ID: second.ClientID, Name: "x", RedirectURIs: []string{"https://x.example/cb"},
				Source: toolplane.OAuthClientRegistered, CreatedAt: time.Now()}, 0); err != nil {
				t.Fatal(err)
			}
			if _, err := c.a.RevokeClient(t.Context(), acmeAdmin, second.ClientID); err != nil {
				t.Fatal(err)
			}
			if _, err := c.b.Verifier().Verify(ctx, tokens["acme/"+second.ID]); !errors.Is(err, toolplane.ErrUnauthenticated) {
				t.Fatalf("node b's next call after the client was revoked answered: %v", err)
			}
			if _, err := c.b.Verifier().Verify(ctx, tokens["globex/"+g.ID]); err != nil {
				t.Fatalf("another organization's consent to the client: %v", err)
			}
		})
	}
}

// TestPersonKeyRevokedEverywhere: a consent given with the person's own
// key is refused on every node once the key's revocation settled
// (ChangeSettle after it committed; at once on SQLite), though node b
// kept it in force.
func TestPersonKeyRevokedEverywhere(t *testing.T) {
	t.Parallel()
	for name, newCluster := range clusters(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			c := newCluster(t)
			ctx := WithResource(t.Context(), c.a.Resource(""))
			key := &toolplane.Credential{ID: toolplane.NewID("key_"), OrganizationID: "acme", Kind: toolplane.CredentialPerson, Subject: "alice",
				Roles: []string{toolplane.RoleApprover}, CreatedAt: time.Now()}
			if err := c.stA.(toolplane.CredentialStore).InsertCredential(t.Context(), key); err != nil {
				t.Fatal(err)
			}
			now := time.Now()
			g := &toolplane.OAuthGrant{OrganizationID: "acme", ID: toolplane.NewID("oag_"), ClientID: "tpc_x", Subject: "alice", AgentID: DefaultAgent,
				Resource: "https://tp.example/mcp", CreatedAt: now, ExpiresAt: now.Add(time.Hour), PersonKey: key.ID}
			if err := c.stA.InsertOAuthGrant(t.Context(), g); err != nil {
				t.Fatal(err)
			}
			tok, err := c.a.AccessToken(ctx, "acme", g.ID)
			if err != nil {
				t.Fatal(err)
			}
			if cred, err := c.b.Verifier().Verify(ctx, tok); err != nil || fmt.Sprint(cred.User.Roles) != "[approver]" {
				t.Fatalf("before: %v %+v", err, cred)
			}
			if !kept(c.b, "acme", g.ID) {
				t.Fatal("node b keeps no consent after verifying it")
			}
			// TouchCredential, on every call with a key, changes nothing a
			// consent reads: what is kept stays.
			if err := c.stA.(toolplane.CredentialStore).TouchCredential(t.Context(), "acme", key.ID, time.Now()); err != nil {
				t.Fatal(err)
			}
			time.Sleep(300 * time.Millisecond) // a change would be told by now
			if !kept(c.b, "acme", g.ID) {
				t.Fatal("node b forgot the consent when the key was only used")
			}
			// An admin revokes the key through node a's key service: once
			// it answers, node b refuses the consent at its next call.
			admin := &toolplane.Credential{ID: "key_admin", OrganizationID: "acme", Kind: toolplane.CredentialPerson, Subject: "root",
				Roles: []string{toolplane.RolePlatformAdmin}}
			if _, err := apikey.NewKeys(apikey.KeysConfig{Store: c.stA.(toolplane.CredentialStore)}).Revoke(t.Context(), key.ID, admin); err != nil {
				t.Fatalf("revoke the key: %v", err)
			}
			if _, err := c.b.Verifier().Verify(ctx, tok); !errors.Is(err, toolplane.ErrUnauthenticated) {
				t.Fatalf("node b's next call once the key's revocation answered: %v", err)
			}
			if _, err := apikey.InForce(t.Context(), c.stB, key.ID, time.Now()); !errors.Is(err, apikey.ErrInvalid) {
				t.Fatalf("the key itself: %v", err)
			}
		})
	}
}

// TestListenerLost: when node b's listening connection is cut, b forgets
// every consent it kept and trusts nothing until it listens and is caught
// up again; a revocation an operator makes by hand meanwhile is refused.
func TestListenerLost(t *testing.T) {
	t.Parallel()
	newCluster, ok := clusters(t)["postgres"]
	if !ok {
		pgtest.DSN(t) // skips
	}
	c := newCluster(t)
	ctx := WithResource(t.Context(), c.a.Resource(""))
	g := grantIn(t, c.stA, "acme")
	tok, err := c.a.AccessToken(ctx, "acme", g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.b.Verifier().Verify(ctx, tok); err != nil {
		t.Fatal(err)
	}
	if !kept(c.b, "acme", g.ID) {
		t.Fatal("node b keeps no consent after verifying it")
	}
	c.cutB(t)
	// Only a call keeps a consent, and none is made: once b heard of the
	// loss, it keeps nothing.
	await(t, "forgotten on the loss", func() bool { return c.b.verify.consents.len() == 0 })
	c.exec(t, `UPDATE oauth_grants SET revoked_at = $1, revoked_reason = 'by hand' WHERE organization_id = 'acme' AND id = $2`,
		time.Now().UnixMicro(), g.ID)
	awaitTrusted(t, c.b)
	time.Sleep(c.stA.(toolplane.ChangeFeed).ChangeSettle())
	if _, err := c.b.Verifier().Verify(ctx, tok); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("node b after the listener came back: %v", err)
	}
}

// TestConsentsBounded: what a node keeps is bounded, a read begun before a
// change is not kept after it, nothing is trusted before the feed says it
// is current or after it is lost, and one organization's change forgets
// nothing of another's.
func TestConsentsBounded(t *testing.T) {
	t.Parallel()
	c := newConsents(3)
	g := func(org, id, key string) *standing {
		return &standing{g: &toolplane.OAuthGrant{OrganizationID: org, ID: id, PersonKey: key}}
	}
	_, gen, ok := c.get("acme", "g1")
	if ok {
		t.Fatal("trusted before the feed said it is current")
	}
	c.keep(gen, "acme", "g1", g("acme", "g1", ""))
	if ok := kept2(c, "acme", "g1"); ok {
		t.Fatal("answered before the feed said it is current")
	}
	c.Current(time.Now().Add(time.Hour))
	if !kept2(c, "acme", "g1") {
		t.Fatal("not answered once current")
	}
	for i := range 10 {
		org := []string{"acme", "globex"}[i%2]
		_, gen, _ := c.get(org, "x")
		c.keep(gen, org, fmt.Sprintf("g%d", i+2), g(org, fmt.Sprintf("g%d", i+2), "key_1"))
		if n := c.len(); n > 3 {
			t.Fatalf("%d consents kept, bound 3", n)
		}
	}
	if n := c.len(); n != 3 {
		t.Fatalf("%d consents kept, want 3", n)
	}

	// A read begun before a change is not kept after it.
	_, gen, _ = c.get("acme", "late")
	c.Changed("initech", "z")
	c.keep(gen, "acme", "late", g("acme", "late", ""))
	if kept2(c, "acme", "late") {
		t.Fatal("kept a read begun before a change")
	}

	// A key's change forgets the consents given with it, in its
	// organization only.
	c = newConsents(10)
	c.Current(time.Now().Add(time.Hour))
	for _, k := range []struct{ org, id, key string }{{"acme", "g1", "key_1"}, {"acme", "g2", ""}, {"globex", "g1", "key_1"}} {
		_, gen, _ := c.get(k.org, k.id)
		c.keep(gen, k.org, k.id, g(k.org, k.id, k.key))
	}
	c.Changed("acme", "key_1")
	if kept2(c, "acme", "g1") || !kept2(c, "acme", "g2") || !kept2(c, "globex", "g1") {
		t.Fatal("a key's change forgot the wrong consents")
	}
	c.Changed("acme", "")
	if kept2(c, "acme", "g2") || !kept2(c, "globex", "g1") || c.len() != 1 {
		t.Fatal("an organization's change forgot the wrong consents")
	}
	c.Lost()
	c.Current(time.Now().Add(time.Hour))
	if c.len() != 0 || kept2(c, "globex", "g1") {
		t.Fatal("kept across a loss")
	}
	c.Current(time.Now().Add(-time.Second))
	_, gen, _ = c.get("acme", "g9")
	c.keep(gen, "acme", "g9", g("acme", "g9", ""))
	if kept2(c, "acme", "g9") {
		t.Fatal("answered past the trust")
	}
}

func kept2(c *consents, org, id string) bool {
	st, _, ok := c.get(org, id)
	return ok && st.g.OrganizationID == org && st.g.ID == id
}

// TestRefusalsNotKept: a consent refused (revoked, or never given) is not
// kept, so it is read again at the next call.
func TestRefusalsNotKept(t *testing.T) {
	t.Parallel()
	c := clusters(t)["sqlite"](t)
	ctx := WithResource(t.Context(), c.a.Resource(""))
	g := grantIn(t, c.stA, "acme")
	tok, err := c.a.AccessToken(ctx, "acme", g.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.stA.RevokeOAuthGrant(t.Context(), "acme", g.ID, "test", time.Now(), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.b.Verifier().Verify(ctx, tok); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("a revoked consent: %v", err)
	}
	if c.b.verify.consents.len() != 0 {
		t.Fatal("a refusal was kept")
	}
}
