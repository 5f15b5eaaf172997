package ceiling_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/ceiling"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func person(org string, roles ...string) *toolplane.Credential {
	return &toolplane.Credential{ID: "cred-" + org, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: "ada", Roles: roles}
}

func TestServiceAuthorizesFromTheCredential(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	svc := ceiling.New(store, func() time.Time { return time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC) })
	ctx := t.Context()
	in := ceiling.Input{AccountLimit: 10, Lanes: []toolplane.Lane{{Name: "batch", ActiveRuns: 2, Shape: call("exa", 5)}}}
	agent := &toolplane.Credential{ID: "cred-agent", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Roles: []string{toolplane.RolePlatformAdmin}}
	for _, c := range []struct {
		name string
		by   *toolplane.Credential
		why  string
	}{
		{"auditor", person("org-1", toolplane.RoleAuditor), "needs the platform_admin role"},
		{"approver", person("org-1", toolplane.RoleApprover), "needs the platform_admin role"},
		{"agent key", agent, "an agent's key"},
	} {
		_, err := svc.Set(ctx, c.by, "exa", in)
		if !errors.Is(err, ceiling.ErrNotAuthorized) || !errors.Is(err, toolplane.ErrForbidden) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: Set = %v, want ErrNotAuthorized saying %q", c.name, err, c.why)
		}
	}
	if _, err := svc.Get(ctx, person("org-1", toolplane.RoleApprover), "exa"); !errors.Is(err, ceiling.ErrNotAuthorized) {
		t.Errorf("an approver's Get = %v, want ErrNotAuthorized", err)
	}
	if _, err := svc.List(ctx, person("org-1")); !errors.Is(err, ceiling.ErrNotAuthorized) {
		t.Errorf("List without a role = %v, want ErrNotAuthorized", err)
	}
	if err := svc.Delete(ctx, person("org-1", toolplane.RoleAuditor), "exa", 0); !errors.Is(err, ceiling.ErrNotAuthorized) {
		t.Errorf("an auditor's Delete = %v, want ErrNotAuthorized", err)
	}
	if got, err := store.ListVendorCeilings(ctx, "org-1"); err != nil || len(got) != 0 {
		t.Fatalf("refused sets stored %+v, %v", got, err)
	}

	admin := person("org-1", toolplane.RolePlatformAdmin)
	v, err := svc.Set(ctx, admin, "exa", in)
	if err != nil {
		t.Fatal(err)
	}
	if v.OrganizationID != "org-1" || v.UpdatedBy != "ada" || v.Version != 1 || v.Arithmetic.Sum != 10 {
		t.Errorf("Set = %+v", v)
	}
	if _, err := svc.Get(ctx, person("org-1", toolplane.RoleAuditor), "exa"); err != nil {
		t.Errorf("an auditor's Get = %v", err)
	}
	// The organization is the credential's: another organization's
	// administrator reads nothing of it and changes nothing of it.
	other := person("org-2", toolplane.RolePlatformAdmin)
	if _, err := svc.Get(ctx, other, "exa"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another organization's Get = %v, want ErrNotFound", err)
	}
	if _, err := svc.Set(ctx, other, "exa", ceiling.Input{AccountLimit: 1, Version: 1}); !errors.Is(err, toolplane.ErrConflict) {
		t.Errorf("another organization's Set from this one's version = %v, want ErrConflict", err)
	}
	if err := svc.Delete(ctx, other, "exa", 0); !errors.Is(err, toolplane.ErrNotFound) {
		t.Errorf("another organization's Delete = %v, want ErrNotFound", err)
	}
	if got, err := svc.Get(ctx, admin, "exa"); err != nil || got.AccountLimit != 10 || got.Version != 1 {
		t.Errorf("after another organization's attempts Get = %+v, %v", got, err)
	}
}

// A refused ceiling stores nothing: not on creation, and not over the
// ceiling stored, whose arithmetic stays as it was.
func TestServiceRefusesWithTheArithmetic(t *testing.T) {
	t.Parallel()
	store := sqlitetest.New(t)
	svc := ceiling.New(store, nil)
	ctx, admin := t.Context(), person("org-1", toolplane.RolePlatformAdmin)
	lanes := []toolplane.Lane{
		{Name: "interactive", ActiveRuns: 20, Shape: par(call("exa", 3), call("exa", 3))},
		{Name: "batch", ActiveRuns: 5, Shape: seq(call("exa", 10), call("fullenrich", 40))},
	}
	_, err := svc.Set(ctx, admin, "exa", ceiling.Input{AccountLimit: 100, Lanes: lanes})
	var exceeded *ceiling.ExceededError
	if !errors.As(err, &exceeded) || exceeded.Arithmetic.Sum != 170 {
		t.Fatalf("Set over the limit = %v", err)
	}
	if _, err := store.GetVendorCeiling(ctx, "org-1", "exa"); !errors.Is(err, toolplane.ErrNotFound) {
		t.Fatalf("a refused ceiling was stored: %v", err)
	}
	if _, err := svc.Set(ctx, admin, "exa", ceiling.Input{AccountLimit: 170, Lanes: lanes}); err != nil {
		t.Fatal(err)
	}
	// A lane growing past the account is refused; so is the account
	// shrinking below the lanes.
	grown := append([]toolplane.Lane(nil), lanes...)
	grown[1].ActiveRuns = 6
	for _, in := range []ceiling.Input{{AccountLimit: 170, Lanes: grown}, {AccountLimit: 169, Lanes: lanes}} {
		if _, err := svc.Set(ctx, admin, "exa", in); !errors.As(err, &exceeded) {
			t.Errorf("Set(%+v) = %v, want the arithmetic refused", in, err)
		}
	}
	got, err := store.GetVendorCeiling(ctx, "org-1", "exa")
	if err != nil || got.Version != 1 || got.AccountLimit != 170 || got.Lanes[1].ActiveRuns != 5 {
		t.Fatalf("after refused sets the ceiling is %+v, %v", got, err)
	}
	changes, _, err := store.ListChanges(ctx, "org-1", "vendor_ceiling.set", "vendor:exa", "", 10)
	if err != nil || len(changes) != 1 {
		t.Fatalf("changes = %+v, %v; want the one stored set", changes, err)
	}
	if _, err := svc.Set(ctx, admin, "exa", ceiling.Input{AccountLimit: 170, Lanes: lanes, Version: -1}); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("a negative version = %v, want ErrInvalid", err)
	}
	if _, err := svc.Get(ctx, admin, "Exa\x00"); !errors.Is(err, toolplane.ErrInvalid) {
		t.Errorf("Get of a provider out of the grammar = %v, want ErrInvalid", err)
	}
}
