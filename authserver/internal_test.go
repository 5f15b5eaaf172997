package authserver

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/policy/policytest"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/signin"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

type noPeople struct{}

func (noPeople) Session(*http.Request) (*signin.Session, error) { return nil, signin.ErrNotSignedIn }
func (noPeople) SignInURL(string) string                        { return "/signin" }
func (noPeople) CheckForm(*http.Request, *signin.Session) error { return signin.ErrForged }

// twoServers answers two servers (nodes) over one SQLite store.
func twoServers(t testing.TB) (*Server, *Server, toolplane.OAuthStore) {
	st := sqlitetest.New(t)
	k := make([]byte, secret.KeySize)
	rand.Read(k)
	keys, err := secret.ParseKeyring("k1 " + base64.StdEncoding.EncodeToString(k))
	if err != nil {
		t.Fatal(err)
	}
	var out [2]*Server
	for i := range out {
		if out[i], err = New(Config{Store: st, Keys: keys, Issuer: "https://tp.example", People: noPeople{}, Operator: "ops"}); err != nil {
			t.Fatal(err)
		}
	}
	return out[0], out[1], st
}

func grantIn(t testing.TB, st toolplane.OAuthStore, org string) *toolplane.OAuthGrant {
	now := time.Now()
	g := &toolplane.OAuthGrant{OrganizationID: org, ID: toolplane.NewID("oag_"), ClientID: "tpc_x", Subject: "alice", AgentID: DefaultAgent,
		Resource: "https://tp.example/mcp", CreatedAt: now, ExpiresAt: now.Add(time.Hour), SignedInAt: now}
	if err := st.InsertOAuthGrant(t.Context(), g); err != nil {
		t.Fatal(err)
	}
	return g
}

// TestAnotherOrganization: a token naming another organization than its
// grant's, or altered after signing, never authenticates.
func TestAnotherOrganization(t *testing.T) {
	t.Parallel()
	a, _, st := twoServers(t)
	ctx := WithResource(t.Context(), a.Resource(""))
	g := grantIn(t, st, "acme")
	now := time.Now()
	good, err := a.mint(ctx, g, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if cred, err := a.Verifier().Verify(ctx, good); err != nil || cred.OrganizationID != "acme" {
		t.Fatalf("good token: %v %+v", err, cred)
	}
	moved := *g
	moved.OrganizationID = "globex"
	other, err := a.mint(ctx, &moved, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Verifier().Verify(ctx, other); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("a token naming another organization: %v", err)
	}
	parts := strings.Split(good, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	forged := parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(strings.Replace(string(payload), `"acme"`, `"globe"`, 1))) + "." + parts[2]
	if _, err := a.Verifier().Verify(ctx, forged); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("an altered token: %v", err)
	}
	if _, err := a.Verifier().Verify(ctx, strings.TrimSuffix(good, parts[2])+"AAAA"); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("a bad signature: %v", err)
	}
	expired, _ := a.mint(ctx, g, now.Add(-time.Hour), now.Add(-time.Minute))
	if _, err := a.Verifier().Verify(ctx, expired); !errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("an expired token: %v", err)
	}
}

// TestKeyRotation: after a rotation on one node, tokens of the previous
// key keep verifying on both, and the other node verifies the new key's
// tokens at once (an unknown key id reads the keys again).
func TestKeyRotation(t *testing.T) {
	t.Parallel()
	a, b, st := twoServers(t)
	ctx := WithResource(t.Context(), a.Resource(""))
	g := grantIn(t, st, "acme")
	now := time.Now()
	old, err := a.mint(ctx, g, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Verifier().Verify(ctx, old); err != nil {
		t.Fatal(err)
	}
	time.Sleep(reloadMin)
	id, err := a.RotateSigningKey(ctx, &toolplane.Credential{OrganizationID: "ops", Kind: toolplane.CredentialPerson, Subject: "root", Roles: []string{toolplane.RolePlatformAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	fresh, err := a.mint(ctx, g, now, now.Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{old, fresh} {
		if _, err := b.Verifier().Verify(ctx, tok); err != nil {
			t.Fatalf("node b: %v", err)
		}
	}
	set, _ := b.keys.published(ctx)
	if len(set.Keys) != 2 || set.Keys[0].KeyID != id {
		t.Fatalf("published after a rotation: %+v", set.Keys)
	}
}

// TestRotationIsTheOperators: the signing key signs every organization's
// tokens, so only a platform_admin of the operator's organization rotates
// it; another organization's admin, or the operator's people without the
// role, are refused with ErrForbidden saying whose it is, and no key is
// made. A server naming no operator lets nobody rotate through it.
func TestRotationIsTheOperators(t *testing.T) {
	t.Parallel()
	a, _, st := twoServers(t)
	person := func(org string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "root", Roles: roles}
	}
	tests := []struct {
		name string
		by   *toolplane.Credential
		ok   bool
	}{
		{"an organization's platform_admin", person("acme", toolplane.RolePlatformAdmin), false},
		{"an operator's person without the role", person("ops", toolplane.RoleApprover, toolplane.RoleAuditor), false},
		{"an agent of the operator's organization", &toolplane.Credential{OrganizationID: "ops", Kind: toolplane.CredentialAgent, Subject: "bot"}, false},
		{"the operator's platform_admin", person("ops", toolplane.RolePlatformAdmin), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before, err := st.OAuthSigningKeys(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			id, err := a.RotateSigningKey(t.Context(), tt.by)
			after, _ := st.OAuthSigningKeys(t.Context())
			switch {
			case tt.ok && (err != nil || id == "" || len(after) == 0 || after[0].ID != id):
				t.Fatalf("rotate: %q %v, keys %d", id, err, len(after))
			case !tt.ok && (!errors.Is(err, toolplane.ErrForbidden) || !strings.Contains(err.Error(), "operator's organization (ops)")):
				t.Fatalf("rotate: %q %v, want ErrForbidden naming the operator's organization", id, err)
			case !tt.ok && (len(after) != len(before) || len(after) > 0 && after[0].ID != before[0].ID):
				t.Fatalf("a refused rotation changed the keys: %d before, %d after", len(before), len(after))
			}
		})
	}
	none, err := New(Config{Store: st.(Store), Keys: a.cfg.Keys, Issuer: "https://tp.example", People: noPeople{}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := none.RotateSigningKey(t.Context(), person("", toolplane.RolePlatformAdmin)); !errors.Is(err, toolplane.ErrForbidden) {
		t.Fatalf("rotation on a server naming no operator: %v, want ErrForbidden", err)
	}
}

// FuzzScope: a scope the server accepts narrows to tools named once
// each, none empty or holding a space, and the scope it answers for that
// narrowing reads back as the same narrowing.
func FuzzScope(f *testing.F) {
	for _, s := range []string{"", "tools", "tool:a tool:b tool:a", "tool:", "openid offline_access tool:x.y", "admin", "tool:a\ttools"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		tools, ok := parseScope(text)
		if !ok {
			return
		}
		seen := map[string]bool{}
		for _, name := range tools {
			if name == "" || strings.ContainsAny(name, " \t\n") || seen[name] {
				t.Fatalf("parseScope(%q) = %q", text, tools)
			}
			seen[name] = true
		}
		again, ok := parseScope(scope(tools))
		if !ok || strings.Join(again, " ") != strings.Join(tools, " ") {
			t.Fatalf("scope(%q) = %q reads back as %q", tools, scope(tools), again)
		}
	})
}

// BenchmarkVerify is one access token's verification as a door makes it
// on every call: the claims from the verified-token cache, the consent
// kept in force while the store's change feed (SQLite's, told in process)
// is watched. cold leaves the token cache out (a token's first call on a
// node: the ES256 signature checked). Beside wall time it reports the
// process's CPU time per verification (cpu-ns/op).
func BenchmarkVerify(b *testing.B) {
	for _, cold := range []bool{false, true} {
		name := "warm"
		if cold {
			name = "cold"
		}
		b.Run(name, func(b *testing.B) {
			a, _, st := twoServers(b)
			ctx := WithResource(context.Background(), a.Resource(""))
			watching, cancel := context.WithCancel(context.Background())
			done := make(chan struct{})
			go func() { defer close(done); a.Watch(watching) }()
			b.Cleanup(func() { cancel(); <-done })
			g := grantIn(b, st, "acme")
			tok, err := a.AccessToken(ctx, g.OrganizationID, g.ID)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			cpu := policytest.CPUTime()
			for b.Loop() {
				if cold {
					a.verify.cache = newTokenCache(4096)
				}
				if _, err := a.Verifier().Verify(ctx, tok); err != nil {
					b.Fatal(err)
				}
			}
			if used := policytest.CPUTime() - cpu; used > 0 {
				b.ReportMetric(float64(used.Nanoseconds())/float64(b.N), "cpu-ns/op")
			}
		})
	}
}

// TestCSPOrigin: only a plain origin becomes a CSP source; anything that
// could end the directive or add another is left out.
func TestCSPOrigin(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ in, want string }{
		{"http://localhost:4100/oauth/callback", "http://localhost:4100"},
		{"https://claude.ai/api/mcp/auth_callback", "https://claude.ai"},
		{"http://[::1]:8080/cb", "http://[::1]:8080"},
		{"com.example.app:/cb", ""},
		{"http://a;script-src%20*/cb", ""},
		{"http://a b/cb", ""},
		{"https:///cb", ""},
	} {
		u, err := url.Parse(tc.in)
		if err != nil {
			u = &url.URL{Scheme: "http", Host: "a b"}
		}
		if got := cspOrigin(u); got != tc.want {
			t.Errorf("cspOrigin(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestStandingAt: what a node keeps of a consent is checked against now
// on every call: the grant's end, the person's key's and the OpenID
// sign-in's bound.
func TestStandingAt(t *testing.T) {
	t.Parallel()
	now := time.Now()
	g := &toolplane.OAuthGrant{ExpiresAt: now.Add(time.Hour), SignedInAt: now.Add(-time.Hour)}
	tests := []struct {
		name string
		st   standing
		at   time.Time
		ok   bool
	}{
		{"in force", standing{g: g}, now, true},
		{"the grant ended", standing{g: g}, now.Add(time.Hour), false},
		{"within the key's life", standing{g: g, keyExpires: now.Add(time.Minute)}, now, true},
		{"the key ended", standing{g: g, keyExpires: now.Add(time.Minute)}, now.Add(time.Minute), false},
		{"within the sign-in's bound", standing{g: g, signInEnds: signInEnds(g, 2*time.Hour)}, now.Add(59 * time.Minute), true},
		{"the sign-in's bound reached", standing{g: g, signInEnds: signInEnds(g, 2*time.Hour)}, now.Add(time.Hour), false},
		{"no bound", standing{g: g, signInEnds: signInEnds(g, -1)}, now.Add(59 * time.Minute), true},
	}
	for _, tt := range tests {
		if err := tt.st.at(tt.at); (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrInvalid)) {
			t.Errorf("%s: %v, want in force %v", tt.name, err, tt.ok)
		}
	}
	if !signInEnds(&toolplane.OAuthGrant{PersonKey: "tpk_x", SignedInAt: now}, time.Hour).IsZero() {
		t.Error("a person key's consent is bound by the OpenID sign-in")
	}
}
