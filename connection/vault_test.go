package connection_test

// These tests read secrets from vaulttest.Server, a loopback server
// imitating Vault's documented KV version 2 API: no real Vault or OpenBao
// could be installed where they were written (see package vaulttest).

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/oauth/oauthtest"
	"github.com/toolplane/toolplane/secret"
	"github.com/toolplane/toolplane/secret/vaulttest"
)

// vaultTTL is the Vault cache's lifetime in these tests.
const vaultTTL = 30 * time.Second

// withVault starts a Vault imitation and answers it with a service of e
// reading it as vaulttest.RootToken, whose value e then watches for.
func withVault(t *testing.T, e *env) (*vaulttest.Server, *service) {
	t.Helper()
	vs := vaulttest.New(t)
	e.plant(vaulttest.RootToken)
	return vs, e.serviceOf(connection.Config{Store: e.store, Keys: e.keys, Node: "n1", Vault: vaultOf(t, vs), VaultTTL: vaultTTL})
}

// inVault is the input of a shared bearer connection to provider whose
// token is kept in Vault at secret/path.
func inVault(name, provider, path string) connection.Input {
	in := static(name, provider, "")
	in.Secrets = toolplane.Secrets{}
	in.Config.Vault = &toolplane.VaultRef{Mount: vaulttest.Mount, Path: path}
	return in
}

func TestCreateInVault(t *testing.T) {
	t.Parallel()
	ref := func(mount, path string) func(*connection.Input) {
		return func(in *connection.Input) { in.Config.Vault = &toolplane.VaultRef{Mount: mount, Path: path} }
	}
	for _, tc := range []struct {
		name  string
		edit  func(*connection.Input)
		field string // "" when created
	}{
		{name: "bearer", edit: ref("secret", "crm/api")},
		{name: "nested mount and odd characters", edit: ref("kv/team-a", "crm/api_key@v2=eu~x+y")},
		{name: "basic", edit: func(in *connection.Input) { in.Config.Auth = toolplane.AuthBasic }},
		{name: "sql", edit: func(in *connection.Input) { in.Config.Driver = "postgres" }},
		{name: "client credentials", edit: func(in *connection.Input) {
			in.Kind, in.Config.ClientID, in.Config.TokenURL = toolplane.ConnectionClientCredentials, "svc", "https://id.crm.test/token"
		}},
		{name: "authorization code", field: "config.vault", edit: func(in *connection.Input) {
			in.Kind, in.Config.ClientID, in.Config.Issuer = toolplane.ConnectionAuthorizationCode, "app", "https://id.crm.test"
		}},
		{name: "a token beside it", field: "secrets", edit: func(in *connection.Input) { in.Secrets.Token = toolplane.SecretString(secretToken("beside")) }},
		{name: "a client secret beside it", field: "secrets", edit: func(in *connection.Input) {
			in.Kind, in.Config.ClientID, in.Config.TokenURL = toolplane.ConnectionClientCredentials, "svc", "https://id.crm.test/token"
			in.Secrets.ClientSecret = toolplane.SecretString(secretToken("beside"))
		}},
		{name: "no mount", field: "config.vault.mount", edit: ref("", "crm/api")},
		{name: "no path", field: "config.vault.path", edit: ref("secret", "")},
		{name: "leading slash", field: "config.vault.path", edit: ref("secret", "/crm/api")},
		{name: "mount with a trailing slash", field: "config.vault.mount", edit: ref("secret/", "crm/api")},
		{name: "dot dot", field: "config.vault.path", edit: ref("secret", "crm/../sys/policy")},
		{name: "dot dot inside a segment", field: "config.vault.path", edit: ref("secret", "crm/a..b")},
		{name: "dot segment", field: "config.vault.path", edit: ref("secret", "crm/./api")},
		{name: "empty segment", field: "config.vault.path", edit: ref("secret", "crm//api")},
		{name: "escape", field: "config.vault.path", edit: ref("secret", "crm/%2e%2e/api")},
		{name: "query", field: "config.vault.path", edit: ref("secret", "crm/api?version=1")},
		{name: "space", field: "config.vault.mount", edit: ref("my secret", "crm")},
		{name: "too long", field: "config.vault.path", edit: ref("secret", strings.Repeat("a/", 256)+"b")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			_, s := withVault(t, e)
			in := inVault("crm-vault", "crm", "crm/api")
			tc.edit(&in)
			e.plant(in.Secrets.Token.Reveal(), in.Secrets.ClientSecret.Reveal())
			c, err := s.Create(t.Context(), admin, in)
			e.saw(c)
			e.saw(err)
			if tc.field != "" {
				var ie *connection.InvalidError
				if !errors.As(err, &ie) || ie.Field != tc.field || !errors.Is(err, toolplane.ErrInvalid) {
					t.Fatalf("Create = %v, want an InvalidError at %s", err, tc.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if c.Config.Vault == nil || *c.Config.Vault != *in.Config.Vault {
				t.Errorf("created with vault %v, want %v", c.Config.Vault, in.Config.Vault)
			}
			if row, _ := e.stored(org, c.ID); len(row.Secret) != 0 || row.Config.Vault == nil {
				t.Errorf("stored %d sealed bytes and vault %v; want none and the reference", len(row.Secret), row.Config.Vault)
			}
		})
	}
}

func TestCreateInVaultWithoutVault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	_, err := e.service("n1").Create(t.Context(), admin, inVault("crm-vault", "crm", "crm/api"))
	e.saw(err)
	var ie *connection.InvalidError
	if !errors.As(err, &ie) || ie.Field != "config.vault" || !strings.Contains(ie.Why, "no Vault") {
		t.Fatalf("Create on a deployment without Vault = %v, want it refused at config.vault", err)
	}
}

func TestReleaseFromVault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	vs, s := withVault(t, e)
	first, second := secretToken("v1"), secretToken("v2")
	e.plant(first, second)
	vs.Put("crm/api", map[string]any{"token": first, "note": "kept by the CRM team"})
	c := e.create(s, admin, inVault("crm-vault", "crm", "crm/api"))
	crmRead := tool("crm.read", "crm")

	r, err := e.release(s, call(""), crmRead, nil)
	if err != nil || r.Secrets.Token.Reveal() != first || r.Connection.ID != c.ID {
		t.Fatalf("Release = %v; want the token kept in Vault", err)
	}
	if n := vs.Reads("crm/api"); n != 1 {
		t.Fatalf("Vault read %d times, want 1", n)
	}

	// Within the TTL Vault is not asked again, even once the secret was
	// rotated there.
	vs.Put("crm/api", map[string]any{"token": second})
	e.clock.Advance(vaultTTL - time.Second)
	r, err = e.release(s, call(""), crmRead, nil)
	if err != nil || r.Secrets.Token.Reveal() != first || vs.Reads("crm/api") != 1 {
		t.Fatalf("Release within the TTL = %v, %d Vault reads; want the cached token and no read", err, vs.Reads("crm/api"))
	}

	// Past it, the rotated secret is used.
	e.clock.Advance(2 * time.Second)
	r, err = e.release(s, call(""), crmRead, nil)
	if err != nil || r.Secrets.Token.Reveal() != second || vs.Reads("crm/api") != 2 {
		t.Fatalf("Release past the TTL = %v, %d Vault reads; want the rotated token", err, vs.Reads("crm/api"))
	}
	if !strings.Contains(e.logs.String(), "connection secret changed in Vault") {
		t.Errorf("the rotation was not logged")
	}

	// A revocation here takes effect on the next call, the cached
	// secret notwithstanding, and Vault is not asked.
	if _, err := s.Revoke(t.Context(), admin, c.ID, "moved"); err != nil {
		t.Fatal(err)
	}
	_, err = e.release(s, call(""), crmRead, nil)
	connErr(t, err, toolplane.CodeConnectionRevoked)
	if n := vs.Reads("crm/api"); n != 2 {
		t.Errorf("Vault read %d times after the revocation, want 2", n)
	}
}

func TestReleaseFromVaultOnce(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	vs, s := withVault(t, e)
	tok := secretToken("shared")
	e.plant(tok)
	vs.Put("crm/api", map[string]any{"token": tok})
	e.create(s, admin, inVault("crm-vault", "crm", "crm/api"))
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			r, err := s.Release(t.Context(), releaseOf(call(""), tool("crm.read", "crm"), nil))
			if err != nil || r.Secrets.Token.Reveal() != tok {
				t.Errorf("Release = %v", err)
			}
		})
	}
	wg.Wait()
	// Calls arriving together share a read; a call arriving after it
	// ends finds the cache. Either way, Vault is not asked per call.
	if n := vs.Reads("crm/api"); n < 1 || n > 2 {
		t.Errorf("16 concurrent calls read Vault %d times, want 1 (or 2 at a race's edge)", n)
	}
}

func TestReleaseFromVaultRefused(t *testing.T) {
	t.Parallel()
	const path = "crm/api"
	for _, tc := range []struct {
		name string
		// vault changes the imitation after the connection was created.
		vault func(vs *vaulttest.Server)
		// without: the node releasing has no Vault configured.
		without bool
		code    toolplane.Code
		says    []string
	}{
		{name: "token refused (403)", vault: func(vs *vaulttest.Server) { vs.SetToken(vaulttest.RootToken, vaulttest.None) },
			code: toolplane.CodeUnavailable, says: []string{"permission denied", "secret/" + path}},
		{name: "entry deleted (404)", vault: func(vs *vaulttest.Server) { vs.Delete(path) },
			code: toolplane.CodeConnectionExpired, says: []string{"the secret at secret/" + path + " is gone"}},
		{name: "entry never written (404)", vault: func(vs *vaulttest.Server) {},
			code: toolplane.CodeConnectionExpired, says: []string{"the secret at secret/" + path + " is gone"}},
		{name: "unreachable", vault: func(vs *vaulttest.Server) { vs.Close() },
			code: toolplane.CodeUnavailable, says: []string{"could not be reached", "secret/" + path}},
		{name: "entry without the token", vault: func(vs *vaulttest.Server) { vs.Put(path, map[string]any{"username": "u"}) },
			code: toolplane.CodeUnavailable, says: []string{"holds no token", "secret/" + path}},
		{name: "a value that is not a string", vault: func(vs *vaulttest.Server) { vs.Put(path, map[string]any{"token": 42.0}) },
			code: toolplane.CodeUnavailable, says: []string{"not one toolplane reads", "secret/" + path}},
		{name: "node without Vault", without: true,
			code: toolplane.CodeUnavailable, says: []string{"no Vault configured"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			vs, s := withVault(t, e)
			c := e.create(s, admin, inVault("crm-vault", "crm", path))
			if tc.vault != nil {
				tc.vault(vs)
			}
			if tc.without {
				s = e.service("n2")
			}
			_, err := e.release(s, call(""), tool("crm.read", "crm"), nil)
			ce := connErr(t, err, tc.code)
			for _, want := range append(tc.says, c.ID) {
				if !strings.Contains(ce.Message, want) {
					t.Errorf("message %q does not say %q", ce.Message, want)
				}
			}
			if tc.code.Retryable() != (tc.code == toolplane.CodeUnavailable) {
				t.Errorf("%s retryable %t", tc.code, tc.code.Retryable())
			}
		})
	}
}

func TestClientCredentialsFromVault(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	p := startProvider(t, e)
	vs, s := withVault(t, e)
	e.plant(oauthtest.ServiceClientSecret)
	vs.Put("crm/service", map[string]any{"client_secret": oauthtest.ServiceClientSecret})
	c := e.create(s, admin, connection.Input{
		Name: "crm-service", Provider: "crm", Kind: toolplane.ConnectionClientCredentials,
		Config: toolplane.ConnectionConfig{Issuer: p.Issuer, ClientID: oauthtest.ServiceClientID, RequestScope: []string{"openid"}, Egress: loopback,
			Vault: &toolplane.VaultRef{Mount: vaulttest.Mount, Path: "crm/service"}},
	})
	crmRead := tool("crm.read", "crm")

	r, err := e.release(s, call(""), crmRead, nil)
	if err != nil || r.Secrets.AccessToken == "" || e.count(p.token) != 1 {
		t.Fatalf("Release = %v, %d token requests; want a token minted with Vault's client secret", err, e.count(p.token))
	}
	// The minted token is toolplane's and sealed here; the client secret
	// stays Vault's alone.
	row, sealed := e.stored(org, c.ID)
	if sealed.AccessToken != r.Secrets.AccessToken || sealed.ClientSecret != "" || row.TokenExpiresAt.IsZero() {
		t.Errorf("sealed here: access token %t, client secret %t; want the token only",
			sealed.AccessToken == r.Secrets.AccessToken, sealed.ClientSecret != "")
	}
	// Another node opens the sealed token and reads Vault for the rest.
	other := e.serviceOf(connection.Config{Store: e.store, Keys: e.keys, Node: "n2", Vault: vaultOf(t, vs), VaultTTL: vaultTTL})
	r2, err := e.release(other, call(""), crmRead, nil)
	if err != nil || r2.Secrets.AccessToken != r.Secrets.AccessToken || e.count(p.token) != 1 {
		t.Fatalf("Release on another node = %v, %d token requests; want the sealed token", err, e.count(p.token))
	}

	// A client secret rotated in Vault is what mints the next token: a
	// wrong one is refused by the provider, and the connection stays
	// active, to be corrected in Vault.
	vs.Put("crm/service", map[string]any{"client_secret": "not-the-secret"})
	e.clock.Advance(10 * time.Minute)
	_, err = e.release(s, call(""), crmRead, nil)
	ce := connErr(t, err, toolplane.CodeConnectionExpired)
	if !strings.Contains(ce.Message, "secret/crm/service") || !strings.Contains(ce.Message, c.ID) {
		t.Errorf("message %q names neither the entry nor the connection", ce.Message)
	}
	if row, _ := e.stored(org, c.ID); row.State != toolplane.ConnectionActive || row.RefreshOwner != "" {
		t.Fatalf("after Vault's client secret was refused: state %s, lease %q; want active, no lease", row.State, row.RefreshOwner)
	}
	// Corrected there, it works on the next call: the refusal let the
	// cached read go.
	vs.Put("crm/service", map[string]any{"client_secret": oauthtest.ServiceClientSecret})
	r, err = e.release(s, call(""), crmRead, nil)
	if err != nil || r.Secrets.AccessToken == "" || r.Secrets.AccessToken == r2.Secrets.AccessToken {
		t.Fatalf("Release after the correction in Vault = %v; want a new token", err)
	}
}

// vaultOf answers a client of the imitation vs as its root.
func vaultOf(t *testing.T, vs *vaulttest.Server) *secret.Vault {
	t.Helper()
	v, err := secret.NewVault(secret.VaultConfig{Addr: vs.URL, Token: vaulttest.RootToken})
	if err != nil {
		t.Fatal(err)
	}
	return v
}
