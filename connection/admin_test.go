package connection_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
	"github.com/toolplane/toolplane/secret"
)

func TestCreateAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	for _, by := range []*toolplane.Credential{agentKey, auditor, sam, nil} {
		tok := secretToken("refused")
		e.plant(tok)
		c, err := s.Create(t.Context(), by, static("crm", "crm", tok))
		e.saw(err)
		var de *toolplane.DeniedError
		if c != nil || !errors.As(err, &de) || !errors.Is(err, connection.ErrNotAuthorized) || !errors.Is(err, toolplane.ErrForbidden) {
			t.Errorf("Create by %v = %v, %v; want a DeniedError of ErrNotAuthorized", by, c, err)
		}
	}
	all, _, err := e.store.ListConnections(t.Context(), org, toolplane.ConnectionFilter{}, "", 10)
	if err != nil || len(all) != 0 {
		t.Fatalf("refused creations stored %d connections (%v)", len(all), err)
	}
	e.create(s, admin, static("crm", "crm", secretToken("static")))
}

func TestCreateValidation(t *testing.T) {
	t.Parallel()
	oauthCfg := toolplane.ConnectionConfig{ClientID: "client-1", Issuer: "https://id.example.com"}
	tok := toolplane.Secrets{Token: "sk-valid-token"}
	for _, tc := range []struct {
		name string
		in   connection.Input
		ok   bool
	}{
		{"bearer", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok}, true},
		{"name upper case", connection.Input{Name: "CRM", Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok}, false},
		{"name empty", connection.Input{Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok}, false},
		{"name too long", connection.Input{Name: strings.Repeat("a", 64), Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok}, false},
		{"provider with a slash", connection.Input{Name: "crm", Provider: "crm/v2", Kind: toolplane.ConnectionStatic, Secrets: tok}, false},
		{"kind unknown", connection.Input{Name: "crm", Provider: "crm", Kind: "password", Secrets: tok}, false},
		{"bearer without token", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic}, false},
		{"auth unknown", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: "digest"}, Secrets: tok}, false},
		{"header", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "X-API-Key"}, Secrets: tok}, true},
		{"header without header name", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: toolplane.AuthHeader}, Secrets: tok}, false},
		{"header name not a token", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "X-API Key"}, Secrets: tok}, false},
		{"header without key", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: toolplane.AuthHeader, Header: "X-API-Key"}}, false},
		{"basic without user", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Auth: toolplane.AuthBasic}, Secrets: toolplane.Secrets{Password: "pw"}}, false},
		{"a base URL", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{BaseURL: "http://127.0.0.1:9090/api"}, Secrets: tok}, true},
		{"a base URL that is a path", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{BaseURL: "/api"}, Secrets: tok}, false},
		{"a base URL of another scheme", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{BaseURL: "ftp://files.example.com"}, Secrets: tok}, false},
		{"a base URL with a user", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{BaseURL: "https://u:p@api.example.com"}, Secrets: tok}, false},
		{"a base URL with a query", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{BaseURL: "https://api.example.com/?key=1"}, Secrets: tok}, false},
		{"a base URL on a SQL connection", connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Driver: "postgres", BaseURL: "https://db.example.com"}, Secrets: toolplane.Secrets{DSN: "postgres://u:p@db/x"}}, false},
		{"sql", connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Driver: "postgres"}, Secrets: toolplane.Secrets{DSN: "postgres://u:p@db/x"}}, true},
		{"sql allowing a privileged role", connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Driver: "postgres", AllowPrivilegedRole: true}, Secrets: toolplane.Secrets{DSN: "postgres://u:p@db/x"}}, true},
		{"a privileged role without a database", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{AllowPrivilegedRole: true}, Secrets: tok}, false},
		{"sql driver unknown", connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Driver: "oracle"}, Secrets: toolplane.Secrets{DSN: "x"}}, false},
		{"sql without dsn", connection.Input{Name: "db", Provider: "db", Kind: toolplane.ConnectionStatic, Config: toolplane.ConnectionConfig{Driver: "sqlite"}}, false},
		{"client credentials", connection.Input{Name: "m2m", Provider: "crm", Kind: toolplane.ConnectionClientCredentials, Config: oauthCfg}, true},
		{"oauth without client id", connection.Input{Name: "m2m", Provider: "crm", Kind: toolplane.ConnectionClientCredentials, Config: toolplane.ConnectionConfig{Issuer: "https://id.example.com"}}, false},
		{"oauth without endpoints", connection.Input{Name: "m2m", Provider: "crm", Kind: toolplane.ConnectionClientCredentials, Config: toolplane.ConnectionConfig{ClientID: "c"}}, false},
		{"authorization code without authorize url", connection.Input{Name: "app", Provider: "crm", Kind: toolplane.ConnectionAuthorizationCode, Config: toolplane.ConnectionConfig{ClientID: "c", TokenURL: "https://id.example.com/token"}}, false},
		{"authorization code with endpoints", connection.Input{Name: "app", Provider: "crm", Kind: toolplane.ConnectionAuthorizationCode, Config: toolplane.ConnectionConfig{ClientID: "c", TokenURL: "https://id.example.com/token", AuthorizeURL: "https://id.example.com/authorize"}}, true},
		{"oauth with a driver", connection.Input{Name: "m2m", Provider: "crm", Kind: toolplane.ConnectionClientCredentials, Config: toolplane.ConnectionConfig{ClientID: "c", Issuer: "https://id.example.com", Driver: "mysql"}}, false},
		{"egress", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok, Config: toolplane.ConnectionConfig{Egress: toolplane.EgressRules{Hosts: []string{"*.crm.test"}, AllowCIDRs: []string{"10.1.0.0/16"}}}}, true},
		{"bad egress cidr", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok, Config: toolplane.ConnectionConfig{Egress: toolplane.EgressRules{AllowCIDRs: []string{"10.1.0.0/33"}}}}, false},
		{"bad egress host", connection.Input{Name: "crm", Provider: "crm", Kind: toolplane.ConnectionStatic, Secrets: tok, Config: toolplane.ConnectionConfig{Egress: toolplane.EgressRules{Hosts: []string{"http://crm.test/"}}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e := newEnv(t)
			c, err := e.service("n1").Create(t.Context(), admin, tc.in)
			e.saw(err)
			if tc.ok {
				if err != nil {
					t.Fatalf("Create = %v, want it created", err)
				}
				if c.State != toolplane.ConnectionActive || c.OrganizationID != org || c.Owner != admin.Subject || c.Secret != nil {
					t.Errorf("created %+v", c)
				}
				return
			}
			if !errors.Is(err, toolplane.ErrInvalid) {
				t.Fatalf("Create = %v, %v; want ErrInvalid", c, err)
			}
			if all, _, _ := e.store.ListConnections(t.Context(), org, toolplane.ConnectionFilter{}, "", 10); len(all) != 0 {
				t.Errorf("an invalid connection was stored")
			}
		})
	}
}

func TestCreateStoresSealedSecret(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	tok := secretToken("static")
	c := e.create(s, admin, static("crm", "crm", tok))

	// A second connection of that name is refused while the first is
	// not revoked.
	_, err := s.Create(t.Context(), admin, static("crm", "crm", secretToken("dup")))
	e.saw(err)
	if !errors.Is(err, toolplane.ErrExists) {
		t.Fatalf("duplicate Create = %v, want ErrExists", err)
	}
	// Another organization may use the name.
	e.create(s, stranger, static("crm", "crm", secretToken("other")))

	row, sec := e.stored(org, c.ID)
	if sec.Token.Reveal() != tok || row.Name != "crm" || row.Owner != admin.Subject {
		t.Errorf("stored %+v does not hold what was given", row)
	}
	if _, err := secret.OpenSecrets(e.keys, org, "con_other", row.Secret); err == nil {
		t.Errorf("the secret opens for another connection")
	}
	chs, _, err := e.store.ListChanges(t.Context(), org, "connection.create", c.ID, "", 10)
	if err != nil || len(chs) != 1 {
		t.Fatalf("changes of %s = %d, %v; want one", c.ID, len(chs), err)
	}
	var detail map[string]any
	if err := json.Unmarshal(chs[0].Detail, &detail); err != nil || detail["name"] != "crm" || chs[0].Actor != admin.Subject {
		t.Errorf("change %+v detail %s", chs[0], chs[0].Detail)
	}

	// Once revoked, the name is free again.
	if _, err := s.Revoke(t.Context(), admin, c.ID, "rotated"); err != nil {
		t.Fatal(err)
	}
	e.create(s, admin, static("crm", "crm", secretToken("again")))
}

// TestReadAuthorization reads the organization's shared connection, sam's
// own and kim's own with each credential.
func TestReadAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	shared := e.create(s, admin, static("crm", "crm", secretToken("shared")))
	samOwn := e.personal(org, "sam", "crm", "crm-sam", secretToken("sam"))
	kimOwn := e.personal(org, "kim", "crm", "crm-kim", secretToken("kim"))
	all := []string{shared.ID, samOwn.ID, kimOwn.ID}
	for _, tc := range []struct {
		name string
		by   *toolplane.Credential
		sees []string
	}{
		{"admin", admin, all},
		{"auditor", auditor, all},
		{"sam", sam, []string{samOwn.ID}},
		{"kim", kim, []string{kimOwn.ID}},
		{"another organization", stranger, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, id := range all {
				c, err := s.Get(t.Context(), tc.by, id)
				e.saw(err)
				e.saw(c)
				want := contains(tc.sees, id)
				switch {
				case want && err != nil:
					t.Errorf("Get %s = %v, want it", id, err)
				case want && (c.ID != id || c.Secret != nil):
					t.Errorf("Get %s = %+v", id, c)
				case !want && !errors.Is(err, toolplane.ErrNotFound):
					t.Errorf("Get %s = %v, %v; want ErrNotFound", id, c, err)
				}
			}
			cs, _, err := s.List(t.Context(), tc.by, toolplane.ConnectionFilter{}, "", 10)
			e.saw(err)
			e.saw(cs)
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			var got []string
			for _, c := range cs {
				got = append(got, c.ID)
				if c.Secret != nil {
					t.Errorf("List shows the sealed secret of %s", c.ID)
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.sees, ",") {
				t.Errorf("List = %v, want %v", got, tc.sees)
			}
		})
	}
	_, _, err := s.List(t.Context(), agentKey, toolplane.ConnectionFilter{}, "", 10)
	if !errors.Is(err, connection.ErrNotAuthorized) {
		t.Errorf("List by an agent's key = %v, want ErrNotAuthorized", err)
	}
	if c, err := s.Get(t.Context(), agentKey, samOwn.ID); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("Get by an agent's key = %v, %v; want ErrNotFound", c, err)
	}
}

func contains(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func TestRevokeAuthorization(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	shared := e.create(s, admin, static("crm", "crm", secretToken("shared")))
	samOwn := e.personal(org, "sam", "crm", "crm-sam", secretToken("sam"))
	kimOwn := e.personal(org, "kim", "crm", "crm-kim", secretToken("kim"))

	refusals := []struct {
		by   *toolplane.Credential
		id   string
		want error
	}{
		{auditor, shared.ID, connection.ErrNotAuthorized},
		{sam, shared.ID, toolplane.ErrNotFound},
		{sam, kimOwn.ID, toolplane.ErrNotFound},
		{agentKey, samOwn.ID, toolplane.ErrNotFound},
		{stranger, shared.ID, toolplane.ErrNotFound},
		{stranger, samOwn.ID, toolplane.ErrNotFound},
	}
	for _, r := range refusals {
		c, err := s.Revoke(t.Context(), r.by, r.id, "no")
		e.saw(err)
		if !errors.Is(err, r.want) {
			t.Errorf("Revoke %s by %s = %v, %v; want %v", r.id, r.by.Subject, c, err, r.want)
		}
	}
	for _, id := range []string{shared.ID, samOwn.ID, kimOwn.ID} {
		if c, _ := e.stored(org, id); c.State != toolplane.ConnectionActive {
			t.Fatalf("a refused revocation revoked %s", id)
		}
	}

	// The owning person revokes their own; the administrator any.
	for _, r := range []struct {
		by *toolplane.Credential
		id string
	}{{sam, samOwn.ID}, {admin, shared.ID}, {admin, kimOwn.ID}} {
		c, err := s.Revoke(t.Context(), r.by, r.id, "no longer needed")
		e.saw(err)
		e.saw(c)
		if err != nil || c.State != toolplane.ConnectionRevoked || c.RevokedAt.IsZero() || c.Reason != "no longer needed" || c.Secret != nil {
			t.Fatalf("Revoke %s by %s = %+v, %v", r.id, r.by.Subject, c, err)
		}
		row, sec := e.stored(org, r.id)
		if len(row.Secret) != 0 || sec.Token != "" {
			t.Errorf("revoked %s keeps its secret", r.id)
		}
		chs, _, err := e.store.ListChanges(t.Context(), org, "connection.revoke", r.id, "", 10)
		if err != nil || len(chs) != 1 || chs[0].Actor != r.by.Subject {
			t.Errorf("revocation of %s recorded %v, %v", r.id, chs, err)
		}
	}

	// Revocation is final: revoking again changes nothing, and no update
	// brings it back.
	before, _ := e.stored(org, shared.ID)
	c, err := s.Revoke(t.Context(), admin, shared.ID, "again")
	if err != nil || c.Reason != "no longer needed" || !c.RevokedAt.Equal(before.RevokedAt) {
		t.Errorf("second Revoke = %+v, %v; want the first revocation", c, err)
	}
	before.State, before.RevokedAt = toolplane.ConnectionActive, before.RevokedAt.AddDate(-1, 0, 0)
	if ok, err := e.store.UpdateConnection(t.Context(), before, nil); err != nil || !ok {
		t.Fatalf("update = %t, %v", ok, err)
	}
	if after, _ := e.stored(org, shared.ID); after.State != toolplane.ConnectionRevoked || !after.RevokedAt.Equal(c.RevokedAt) {
		t.Errorf("an update brought back a revoked connection: %+v", after)
	}
	if _, err := s.Release(t.Context(), releaseOf(call(""), tool("crm.read", "crm"), nil)); err == nil {
		t.Errorf("a revoked connection was released")
	}
}

// TestRevokeReasonIsBoundedAsText: a long reason is cut to its bound at a
// character, never inside one: a store that keeps only valid UTF-8
// (PostgreSQL's TEXT) would otherwise refuse the revocation itself.
func TestRevokeReasonIsBoundedAsText(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.service("n1")
	c := e.create(s, admin, static("crm", "crm", secretToken("crm")))
	reason := strings.Repeat("a", 499) + strings.Repeat("é", 10) + "\xff"
	got, err := s.Revoke(t.Context(), admin, c.ID, reason)
	if err != nil {
		t.Fatal(err)
	}
	if !utf8.ValidString(got.Reason) || len(got.Reason) > 500 || !strings.HasPrefix(got.Reason, strings.Repeat("a", 499)) {
		t.Fatalf("reason %q (%d bytes)", got.Reason, len(got.Reason))
	}
}

// A connection that reaches the network with no host on its egress list
// is warned about (every call through it would be refused); one naming a
// host, or a SQLite connection, which opens a file, is not.
func TestWarningsOfAConnectionWithoutHosts(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  toolplane.ConnectionConfig
		warn bool
	}{
		{"http without hosts", toolplane.ConnectionConfig{Auth: toolplane.AuthBearer}, true},
		{"only allowed ranges", toolplane.ConnectionConfig{Egress: toolplane.EgressRules{AllowCIDRs: []string{"10.0.0.0/8"}}}, true},
		{"postgres without hosts", toolplane.ConnectionConfig{Driver: "postgres"}, true},
		{"a host", toolplane.ConnectionConfig{Egress: toolplane.EgressRules{Hosts: []string{"api.example.com"}}}, false},
		{"sqlite", toolplane.ConnectionConfig{Driver: "sqlite"}, false},
	}
	for _, c := range cases {
		got := connection.Warnings(&toolplane.Connection{Config: c.cfg})
		if (len(got) > 0) != c.warn {
			t.Errorf("%s: warnings %q, want a warning: %t", c.name, got, c.warn)
		}
	}
}
