package apikey_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/sqlite"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func newKeys(t *testing.T) (*apikey.Keys, *sqlite.Store, *apikey.Cache) {
	t.Helper()
	s := sqlitetest.New(t)
	cache := apikey.NewCache(16, time.Minute)
	return apikey.NewKeys(apikey.KeysConfig{Store: s, Cache: cache}), s, cache
}

func person(org, subject string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
}

var (
	admin   = person("org-1", "root", toolplane.RolePlatformAdmin)
	auditor = person("org-1", "grace", toolplane.RoleAuditor)
	bot     = &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Roles: []string{toolplane.RoleActForUsers}}
)

// refused fails t unless err is a refusal wrapping apikey.ErrNotAuthorized
// whose words begin with says.
func refused(t *testing.T, err error, says string) {
	t.Helper()
	var denied *toolplane.DeniedError
	if !errors.As(err, &denied) || !errors.Is(err, apikey.ErrNotAuthorized) || !errors.Is(err, toolplane.ErrForbidden) || !strings.HasPrefix(denied.Why, says) {
		t.Fatalf("err = %v, want a refusal saying %q", err, says)
	}
}

// Keys are minted by a platform_admin, in their own organization, recorded
// as minted by them; anyone else is refused, and a request that cannot be
// a key is refused naming its part at fault.
func TestKeysCreate(t *testing.T) {
	t.Parallel()
	svc, store, _ := newKeys(t)
	ctx := context.Background()
	agentKey := apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-support", Tools: []string{"demo.*"}}
	tests := []struct {
		name string
		k    apikey.NewKey
		by   *toolplane.Credential
		// denied, field: the refusal's words, or the part at fault of an
		// invalid request; both empty when the key is minted.
		denied, field string
	}{
		{"an agent's key by a platform_admin", agentKey, admin, "", ""},
		{"a person's key by a platform_admin", apikey.NewKey{Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{"approver"}}, admin, "", ""},
		{"by an auditor", agentKey, auditor, "creating keys needs the platform_admin role", ""},
		{"by an approver", agentKey, person("org-1", "ada", toolplane.RoleApprover), "creating keys needs the platform_admin role", ""},
		{"by an agent's key", agentKey, bot, "creating keys needs the platform_admin role; this is an agent's key", ""},
		{"by nobody", agentKey, nil, "creating keys needs the platform_admin role", ""},
		{"of no kind", apikey.NewKey{Kind: "robot", Subject: "x"}, admin, "", "/kind"},
		{"for no subject", apikey.NewKey{Kind: toolplane.CredentialAgent}, admin, "", "/subject"},
		{"an agent's key with a role", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Roles: []string{"approver"}}, admin, "", "/roles"},
		{"an agent's key acting for users", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Roles: []string{toolplane.RoleActForUsers}}, admin, "", ""},
		{"an agent's key acting for users with a role besides", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Roles: []string{toolplane.RoleActForUsers, toolplane.RolePlatformAdmin}}, admin, "", "/roles"},
		{"a person's key with tools", apikey.NewKey{Kind: toolplane.CredentialPerson, Subject: "x", Tools: []string{"demo.*"}}, admin, "", "/tools"},
		{"a pattern that cannot match", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Tools: []string{"demo.*", "["}}, admin, "", "/tools/1"},
		{"an overlong subject", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: strings.Repeat("x", toolplane.MaxRefLen+1)}, admin, "", "subject"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			key, cred, err := svc.Create(ctx, tt.k, tt.by)
			var invalid *apikey.InvalidError
			var tooLong *toolplane.TooLongError
			switch {
			case tt.denied != "":
				refused(t, err, tt.denied)
			case tt.field != "" && errors.As(err, &invalid):
				if invalid.Field != tt.field || !errors.Is(err, toolplane.ErrInvalid) {
					t.Fatalf("invalid at %s, want %s", invalid.Field, tt.field)
				}
			case tt.field != "" && errors.As(err, &tooLong):
				if tooLong.Field != tt.field {
					t.Fatalf("too long at %s, want %s", tooLong.Field, tt.field)
				}
			case tt.field != "":
				t.Fatalf("err = %v, want invalid at %s", err, tt.field)
			case err != nil:
				t.Fatal(err)
			default:
				stored, err := store.GetCredential(ctx, cred.ID)
				if err != nil || stored.OrganizationID != "org-1" || stored.CreatedBy != "root" || stored.Subject != tt.k.Subject {
					t.Fatalf("stored %+v, %v", stored, err)
				}
				if id, secret, err := apikey.Parse(key); err != nil || id != cred.ID || !apikey.Verify(stored.Hash, secret) {
					t.Fatalf("the minted key does not verify: %v", err)
				}
				return
			}
			if key != "" || cred != nil {
				t.Fatalf("a refused request minted %q %+v", key, cred)
			}
		})
	}
}

// Keys are listed by a platform_admin or an auditor, their organization's
// only, and revoked by a platform_admin; another organization's key is not
// found, and a revoked key is refused on this node at once.
func TestKeysListAndRevoke(t *testing.T) {
	t.Parallel()
	svc, store, cache := newKeys(t)
	ctx := context.Background()
	mine, cred, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-support"}, admin)
	if err != nil {
		t.Fatal(err)
	}
	otherAdmin := person("org-2", "root2", toolplane.RolePlatformAdmin)
	_, theirs, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-x"}, otherAdmin)
	if err != nil {
		t.Fatal(err)
	}

	list := []struct {
		name   string
		by     *toolplane.Credential
		want   int
		denied string
	}{
		{"a platform_admin", admin, 1, ""},
		{"an auditor", auditor, 1, ""},
		{"a platform_admin of another organization", otherAdmin, 1, ""},
		{"an approver", person("org-1", "ada", toolplane.RoleApprover), 0, "listing keys needs the platform_admin or auditor role"},
		{"an agent's key", bot, 0, "listing keys needs the platform_admin or auditor role; this is an agent's key"},
	}
	for _, tt := range list {
		cs, _, err := svc.List(ctx, "", 10, tt.by)
		if tt.denied != "" {
			refused(t, err, tt.denied)
			continue
		}
		if err != nil || len(cs) != tt.want || cs[0].OrganizationID != tt.by.OrganizationID {
			t.Fatalf("%s: List = %+v, %v", tt.name, cs, err)
		}
	}

	if _, err := cache.Authenticate(ctx, store, mine, time.Now()); err != nil {
		t.Fatalf("the key before its revocation: %v", err)
	}
	revoke := []struct {
		name   string
		id     string
		by     *toolplane.Credential
		denied string
		err    error
	}{
		{"by an auditor", cred.ID, auditor, "revoking keys needs the platform_admin role", nil},
		{"by an agent's key", cred.ID, bot, "revoking keys needs the platform_admin role; this is an agent's key", nil},
		{"another organization's key", theirs.ID, admin, "", toolplane.ErrNotFound},
		{"an unknown key", "tpk_nope", admin, "", toolplane.ErrNotFound},
		{"by a platform_admin", cred.ID, admin, "", nil},
		{"again", cred.ID, admin, "", nil},
	}
	for _, tt := range revoke {
		got, err := svc.Revoke(ctx, tt.id, tt.by)
		switch {
		case tt.denied != "":
			refused(t, err, tt.denied)
		case tt.err != nil:
			if !errors.Is(err, tt.err) {
				t.Fatalf("%s: Revoke = %v, want %v", tt.name, err, tt.err)
			}
		case err != nil || got.RevokedAt.IsZero():
			t.Fatalf("%s: Revoke = %+v, %v", tt.name, got, err)
		}
	}
	if _, err := cache.Authenticate(ctx, store, mine, time.Now()); err == nil {
		t.Fatal("the revoked key still authenticates on this node")
	}
}
