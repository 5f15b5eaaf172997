package toolplane

import (
	"errors"
	"testing"
)

// HasAnyRole and InGroup are the one answer to "does this credential hold
// the role" every service asks: only a person holds roles, platform_admin
// holds every role and is a member of every group, a group is the role
// "group:<name>", and a team role is not an organization-wide one.
func TestHasAnyRoleAndInGroup(t *testing.T) {
	t.Parallel()
	person := func(roles ...string) *Credential { return &Credential{Kind: CredentialPerson, Roles: roles} }
	tests := []struct {
		name    string
		c       *Credential
		roles   []string
		group   string
		hasAny  bool
		inGroup bool
	}{
		{"the role held", person(RoleApprover), []string{RoleApprover}, "finance", true, false},
		{"one of the roles asked", person(RoleAuditor), []string{RoleApprover, RoleAuditor}, "", true, false},
		{"another role", person(RoleAuditor), []string{RoleApprover}, "", false, false},
		{"no role asked", person(RoleApprover), nil, "", false, false},
		{"platform_admin holds every role and group", person(RolePlatformAdmin), []string{RoleApprover}, "finance", true, true},
		{"a member of the group", person(RoleApprover, "group:finance"), []string{RoleApprover}, "finance", true, true},
		{"a member of another group", person("group:ops"), []string{RoleApprover}, "finance", false, false},
		{"no group named", person("group:"), nil, "", false, false},
		{"a team role is not the organization's", person(RoleToolOwner + ":payments"), []string{RoleToolOwner}, "", false, false},
		{"an agent's key holds no role", &Credential{Kind: CredentialAgent, Roles: []string{RoleApprover, "group:finance"}}, []string{RoleApprover}, "finance", false, false},
		{"no credential", nil, []string{RoleApprover}, "finance", false, false},
	}
	for _, tt := range tests {
		if got := tt.c.HasAnyRole(tt.roles...); got != tt.hasAny {
			t.Errorf("%s: HasAnyRole(%v) = %v", tt.name, tt.roles, got)
		}
		if got := tt.c.InGroup(tt.group); got != tt.inGroup {
			t.Errorf("%s: InGroup(%q) = %v", tt.name, tt.group, got)
		}
	}
}

// A refusal says what the operation needs, tells an agent's key that roles
// are carried by a person's key, and wraps the refusing service's sentinel.
func TestRefuse(t *testing.T) {
	t.Parallel()
	errService := errors.New("not authorized here")
	for _, tt := range []struct {
		name string
		c    *Credential
		want string
	}{
		{"a person", &Credential{Kind: CredentialPerson}, "it needs a role"},
		{"an agent", &Credential{Kind: CredentialAgent}, "it needs a role; this is an agent's key, and roles are carried by a person's key"},
		{"no credential", nil, "it needs a role"},
	} {
		err := error(Refuse(tt.c, errService, "it needs a role"))
		if !errors.Is(Refuse(tt.c, nil, "x"), ErrForbidden) {
			t.Errorf("%s: a refusal naming no sentinel is not forbidden", tt.name)
		}
		var d *DeniedError
		if !errors.As(err, &d) || d.Why != tt.want || err.Error() != tt.want || !errors.Is(err, errService) {
			t.Errorf("%s: %v", tt.name, err)
		}
	}
}
