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
		{"an agent's key listing meta-tools", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Listing: toolplane.ListingMeta}, admin, "", ""},
		{"an agent's key listing its 25 most used", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Listing: toolplane.ListingHybrid, ListingTop: 25}, admin, "", ""},
		{"no such listing", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Listing: "all"}, admin, "", "/listing"},
		{"a number past the bound", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Listing: toolplane.ListingHybrid, ListingTop: toolplane.MaxListingTop + 1}, admin, "", "/listing_top"},
		{"a number without hybrid", apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "x", Listing: toolplane.ListingMeta, ListingTop: 3}, admin, "", "/listing_top"},
		{"a person's key with a listing", apikey.NewKey{Kind: toolplane.CredentialPerson, Subject: "x", Listing: toolplane.ListingMeta}, admin, "", "/listing"},
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
				if err != nil || stored.OrganizationID != "org-1" || stored.CreatedBy != "root" || stored.Subject != tt.k.Subject ||
					stored.Listing != tt.k.Listing || stored.ListingTop != tt.k.ListingTop {
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

// A key's listing is changed by a platform_admin of its organization, the
// change recorded beside it; a change to what it is already records
// nothing, and a person's key, a revoked key, another organization's key
// and a listing that is none are refused.
func TestKeysSetListing(t *testing.T) {
	t.Parallel()
	svc, store, _ := newKeys(t)
	ctx := t.Context()
	_, cred, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-support"}, admin)
	if err != nil {
		t.Fatal(err)
	}
	_, pat, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{"approver"}}, admin)
	if err != nil {
		t.Fatal(err)
	}
	_, theirs, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-x"}, person("org-2", "root2", toolplane.RolePlatformAdmin))
	if err != nil {
		t.Fatal(err)
	}
	_, gone, err := svc.Create(ctx, apikey.NewKey{Kind: toolplane.CredentialAgent, Subject: "agent-old"}, admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := svc.Revoke(ctx, gone.ID, admin); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		id      string
		listing toolplane.ToolListing
		top     int
		by      *toolplane.Credential
		denied  string
		field   string
		err     error
		// events is how many listing changes the trail holds after.
		events int
	}{
		{"by an auditor", cred.ID, toolplane.ListingMeta, 0, auditor, "changing keys needs the platform_admin role", "", nil, 0},
		{"by the agent's key", cred.ID, toolplane.ListingMeta, 0, bot, "changing keys needs the platform_admin role", "", nil, 0},
		{"to meta", cred.ID, toolplane.ListingMeta, 0, admin, "", "", nil, 1},
		{"to meta again", cred.ID, toolplane.ListingMeta, 0, admin, "", "", nil, 1},
		{"to hybrid, 12 most used", cred.ID, toolplane.ListingHybrid, 12, admin, "", "", nil, 2},
		{"to no such listing", cred.ID, "some", 0, admin, "", "/listing", nil, 2},
		{"past the bound", cred.ID, toolplane.ListingHybrid, 51, admin, "", "/listing_top", nil, 2},
		{"a person's key", pat.ID, toolplane.ListingMeta, 0, admin, "", "/listing", nil, 2},
		{"a revoked key", gone.ID, toolplane.ListingMeta, 0, admin, "", "/listing", nil, 2},
		{"another organization's key", theirs.ID, toolplane.ListingMeta, 0, admin, "", "", toolplane.ErrNotFound, 2},
		{"an unknown key", "tpk_nope", toolplane.ListingMeta, 0, admin, "", "", toolplane.ErrNotFound, 2},
		{"back to full", cred.ID, toolplane.ListingFull, 0, admin, "", "", nil, 3},
	}
	for _, tt := range tests {
		before, err := store.GetCredential(ctx, tt.id)
		if err != nil && !errors.Is(err, toolplane.ErrNotFound) {
			t.Fatal(err)
		}
		got, err := svc.SetListing(ctx, tt.id, tt.listing, tt.top, tt.by)
		var invalid *apikey.InvalidError
		switch {
		case tt.denied != "":
			refused(t, err, tt.denied)
		case tt.field != "":
			if !errors.As(err, &invalid) || invalid.Field != tt.field {
				t.Fatalf("%s: err = %v, want invalid at %s", tt.name, err, tt.field)
			}
		case tt.err != nil:
			if !errors.Is(err, tt.err) {
				t.Fatalf("%s: err = %v, want %v", tt.name, err, tt.err)
			}
		case err != nil:
			t.Fatalf("%s: %v", tt.name, err)
		default:
			stored, err := store.GetCredential(ctx, tt.id)
			if err != nil || stored.Listing != tt.listing || stored.ListingTop != tt.top || got.Version != stored.Version {
				t.Fatalf("%s: stored %+v, %v; answered %+v", tt.name, stored, err, got)
			}
		}
		if err != nil && before != nil {
			if after, _ := store.GetCredential(ctx, tt.id); after.Version != before.Version || after.Listing != before.Listing {
				t.Errorf("%s: a refused change changed the key: %+v", tt.name, after)
			}
		}
		evs, _, err := store.ListAudit(ctx, "org-1", toolplane.AuditFilter{Outcome: "listing_changed"}, "", 10)
		if err != nil || len(evs) != tt.events {
			t.Fatalf("%s: %d listing changes audited (%v), want %d", tt.name, len(evs), err, tt.events)
		}
		if tt.err == nil && tt.field == "" && tt.denied == "" && tt.events > 0 && (evs[0].Subject != cred.ID || evs[0].PrincipalID != "root") {
			t.Errorf("%s: the newest listing change is %+v", tt.name, evs[0])
		}
	}
}
