package connection_test

import (
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/connection"
)

// What a page offers agrees with what the service decides: revoking to an
// administrator or the person whose account a connection holds, consenting
// to that person only (through the connection's application) or, on an
// application, to any person of its organization; listing to people.
func TestWhatAPageOffers(t *testing.T) {
	t.Parallel()
	person := func(org, subject string, roles ...string) *toolplane.Credential {
		return &toolplane.Credential{ID: "k-" + subject, OrganizationID: org, Kind: toolplane.CredentialPerson, Subject: subject, Roles: roles}
	}
	admin := person("org-1", "root", toolplane.RolePlatformAdmin)
	auditor := person("org-1", "grace", toolplane.RoleAuditor)
	bob := person("org-1", "bob", toolplane.RoleApprover)
	ada := person("org-1", "ada", toolplane.RoleApprover)
	stranger := person("org-2", "bob", toolplane.RolePlatformAdmin)
	agent := &toolplane.Credential{ID: "k-agent", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1"}

	app := &toolplane.Connection{ID: "con_app", OrganizationID: "org-1", Kind: toolplane.ConnectionAuthorizationCode, State: toolplane.ConnectionActive}
	bobs := &toolplane.Connection{ID: "con_bob", OrganizationID: "org-1", Kind: toolplane.ConnectionAuthorizationCode, UserID: "bob",
		State: toolplane.ConnectionNeedsReauth, Config: toolplane.ConnectionConfig{App: "con_app"}}
	static := &toolplane.Connection{ID: "con_static", OrganizationID: "org-1", Kind: toolplane.ConnectionStatic, State: toolplane.ConnectionActive}
	revoked := &toolplane.Connection{ID: "con_gone", OrganizationID: "org-1", Kind: toolplane.ConnectionAuthorizationCode, UserID: "bob",
		State: toolplane.ConnectionRevoked, Config: toolplane.ConnectionConfig{App: "con_app"}}

	for _, tt := range []struct {
		name    string
		by      *toolplane.Credential
		c       *toolplane.Connection
		revoke  bool
		consent string
	}{
		{"an administrator on a static one", admin, static, true, ""},
		{"an administrator on bob's", admin, bobs, true, ""},
		{"an administrator on the application", admin, app, true, "con_app"},
		{"an auditor on bob's", auditor, bobs, false, ""},
		{"bob on his own", bob, bobs, true, "con_app"},
		{"ada on bob's", ada, bobs, false, ""},
		{"ada on the application", ada, app, false, "con_app"},
		{"bob on his revoked one", bob, revoked, false, ""},
		{"another organization's administrator", stranger, bobs, false, ""},
		{"another organization's person on the application", stranger, app, false, ""},
		{"an agent", agent, app, false, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := connection.MayRevoke(tt.by, tt.c); got != tt.revoke {
				t.Errorf("MayRevoke = %v, want %v", got, tt.revoke)
			}
			if got := connection.ConsentApp(tt.by, tt.c); got != tt.consent {
				t.Errorf("ConsentApp = %q, want %q", got, tt.consent)
			}
		})
	}
	for _, by := range []*toolplane.Credential{admin, auditor, bob, ada} {
		if err := connection.MayList(by); err != nil {
			t.Errorf("%s may not list: %v", by.Subject, err)
		}
	}
	for _, by := range []*toolplane.Credential{agent, nil} {
		if err := connection.MayList(by); err == nil {
			t.Errorf("%v may list", by)
		}
	}
}
