package jwtauth

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
)

type issuer struct {
	key     *ecdsa.PrivateKey
	kid     string
	fetches atomic.Int64
	srv     *httptest.Server
}

func newIssuer(t *testing.T) *issuer {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	is := &issuer{key: k, kid: "k1"}
	is.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		is.fetches.Add(1)
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &is.key.PublicKey, KeyID: is.kid, Algorithm: string(jose.ES256), Use: "sig"}}})
	}))
	t.Cleanup(is.srv.Close)
	return is
}

func (is *issuer) sign(t *testing.T, c any, alg jose.SignatureAlgorithm, key any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: alg, Key: key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", is.kid))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := jwt.Signed(s).Claims(c).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

var now = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func good() map[string]any {
	return map[string]any{"iss": "https://idp.example", "aud": "toolplane", "sub": "agent-7", "org": "org-1",
		"exp": now.Add(time.Hour).Unix(), "iat": now.Unix(), "toolplane_kind": "agent", "toolplane_tools": []string{"demo.*"}}
}

func TestVerify(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	v := &Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: is.srv.URL, Now: func() time.Time { return now }}
	cred, err := v.Verify(context.Background(), is.sign(t, good(), jose.ES256, is.key))
	if err != nil || cred.Kind != toolplane.CredentialAgent || cred.Subject != "agent-7" || cred.OrganizationID != "org-1" || !cred.Grants("demo.add_note") {
		t.Fatalf("valid token: %+v %v", cred, err)
	}
	person := good()
	person["toolplane_kind"], person["toolplane_roles"] = "person", []string{"approver"}
	delete(person, "toolplane_tools")
	if cred, err := v.Verify(context.Background(), is.sign(t, person, jose.ES256, is.key)); err != nil || cred.Kind != toolplane.CredentialPerson || len(cred.Roles) != 1 {
		t.Fatalf("person token: %+v %v", cred, err)
	}
	other, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tests := []struct {
		name  string
		edit  func(map[string]any)
		key   any
		alg   jose.SignatureAlgorithm
		token string
	}{
		{name: "another issuer", edit: func(c map[string]any) { c["iss"] = "https://evil.example" }},
		{name: "another audience", edit: func(c map[string]any) { c["aud"] = "other" }},
		{name: "expired", edit: func(c map[string]any) { c["exp"] = now.Add(-time.Hour).Unix() }},
		{name: "no expiry", edit: func(c map[string]any) { delete(c, "exp") }},
		{name: "no organization", edit: func(c map[string]any) { delete(c, "org") }},
		{name: "no subject", edit: func(c map[string]any) { delete(c, "sub") }},
		{name: "unknown kind", edit: func(c map[string]any) { c["toolplane_kind"] = "admin" }},
		// sub and org become identities in every record; the signature
		// does not make them short.
		{name: "a 100 KB subject", edit: func(c map[string]any) { c["sub"] = strings.Repeat("s", 100<<10) }},
		{name: "a long organization", edit: func(c map[string]any) { c["org"] = strings.Repeat("o", toolplane.MaxRefLen+1) }},
		{name: "signed by another key", key: other},
		{name: "a shared-secret algorithm", alg: jose.HS256, key: []byte("0123456789abcdef0123456789abcdef")},
		{name: "not a token", token: "not.a.token"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.token
			if tok == "" {
				c := good()
				if tt.edit != nil {
					tt.edit(c)
				}
				key, alg := any(is.key), jose.ES256
				if tt.key != nil {
					key = tt.key
				}
				if tt.alg != "" {
					alg = tt.alg
				}
				tok = is.sign(t, c, alg, key)
			}
			if _, err := v.Verify(context.Background(), tok); !errors.Is(err, toolplane.ErrUnauthenticated) {
				t.Fatalf("err = %v, want ErrUnauthenticated", err)
			}
		})
	}
}

func TestKeysAreCachedAndRefetchedForANewKeyID(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	clock := now
	v := &Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: is.srv.URL, Now: func() time.Time { return clock }}
	for range 3 {
		if _, err := v.Verify(context.Background(), is.sign(t, good(), jose.ES256, is.key)); err != nil {
			t.Fatal(err)
		}
	}
	if is.fetches.Load() != 1 {
		t.Fatalf("fetched %d times", is.fetches.Load())
	}
	// The issuer rotates its key; a token names the new kid.
	is.key, _ = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	is.kid = "k2"
	clock = clock.Add(time.Minute)
	if _, err := v.Verify(context.Background(), is.sign(t, good(), jose.ES256, is.key)); err != nil {
		t.Fatalf("after rotation: %v", err)
	}
	if is.fetches.Load() != 2 {
		t.Fatalf("fetched %d times", is.fetches.Load())
	}
}

func TestUnreachableJWKSIsNotAnInvalidToken(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	tok := is.sign(t, good(), jose.ES256, is.key)
	v := &Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: "http://127.0.0.1:1/jwks", Now: func() time.Time { return now }}
	if _, err := v.Verify(context.Background(), tok); err == nil || errors.Is(err, toolplane.ErrUnauthenticated) {
		t.Fatalf("err = %v, want an error that is not ErrUnauthenticated", err)
	}
}

func TestUnknownKeyIDsDoNotHammerTheIssuer(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	clock := now
	v := &Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: is.srv.URL, Now: func() time.Time { return clock }}
	if _, err := v.Verify(context.Background(), is.sign(t, good(), jose.ES256, is.key)); err != nil {
		t.Fatal(err)
	}
	for i := range 50 {
		is.kid = fmt.Sprintf("random-%d", i)
		if _, err := v.Verify(context.Background(), is.sign(t, good(), jose.ES256, is.key)); !errors.Is(err, toolplane.ErrUnauthenticated) {
			t.Fatalf("unknown kid: %v", err)
		}
	}
	if n := is.fetches.Load(); n > 2 {
		t.Fatalf("50 unknown key ids made %d reads of the key set", n)
	}
}

// A person's token handed to an agent (sub the person, act.sub the agent)
// is the agent's credential acting for that person, carrying what the
// deployment maps from the person's claims; one that names no agent, or
// is an agent's own, is refused.
func TestVerifyDelegatedToken(t *testing.T) {
	t.Parallel()
	is := newIssuer(t)
	v := &Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: is.srv.URL, Now: func() time.Time { return now },
		Claims: Claims{Roles: "roles", Groups: "groups", Manager: "manager", Attributes: []string{"department"}}}
	delegated := func(mut func(map[string]any)) string {
		c := good()
		c["sub"], c["toolplane_kind"] = "sam", "person"
		c["act"] = map[string]any{"sub": "agent-support"}
		c["roles"], c["groups"], c["manager"], c["department"] = []string{"support"}, "finance", "kim", "emea"
		if mut != nil {
			mut(c)
		}
		return is.sign(t, c, jose.ES256, is.key)
	}
	cred, err := v.Verify(context.Background(), delegated(nil))
	if err != nil {
		t.Fatal(err)
	}
	if cred.Kind != toolplane.CredentialAgent || cred.Subject != "agent-support" || cred.ActsFor != "sam" || !cred.Grants("demo.search_tickets") {
		t.Fatalf("delegated credential %+v", cred)
	}
	if u := cred.User; u == nil || len(u.Roles) != 1 || u.Roles[0] != "support" || len(u.Groups) != 1 || u.Groups[0] != "finance" || u.Manager != "kim" || u.Attributes["department"] != "emea" {
		t.Fatalf("the person's claims: %+v", cred.User)
	}
	// The claims are the person's: none of them is the agent's, so a rule
	// on the agent's attributes (principal.attributes, its team) does not
	// read the person's department as the agent's.
	if len(cred.Attributes) != 0 {
		t.Errorf("the agent of a delegated token carries attributes %v, the person's", cred.Attributes)
	}
	for name, mut := range map[string]func(map[string]any){
		"no agent named":   func(c map[string]any) { c["act"] = map[string]any{} },
		"an agent's token": func(c map[string]any) { c["toolplane_kind"] = "agent" },
	} {
		if cred, err := v.Verify(context.Background(), delegated(mut)); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %+v, %v; want ErrInvalid", name, cred, err)
		}
	}
}
