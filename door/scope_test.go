package door_test

import (
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/door"
)

// Scope challenges only an OAuth access token of this server's own
// authorization server (ClientID set), for the tools outside its consent,
// each named once; never an API key's narrowing, another issuer's token
// or a certificate, nor a name a scope cannot carry.
func TestScope(t *testing.T) {
	t.Parallel()
	narrowed := &toolplane.Credential{Kind: toolplane.CredentialAgent, ClientID: "cursor", Tools: []string{"demo.search_tickets", "crm.*"}}
	tests := []struct {
		name  string
		cred  *toolplane.Credential
		tools []string
		scope string // "" for no challenge
	}{
		{"consented", narrowed, []string{"demo.search_tickets", "crm.read"}, ""},
		{"one outside", narrowed, []string{"demo.add_note"}, "tool:demo.add_note"},
		{"several, one twice", narrowed, []string{"demo.add_note", "crm.read", "demo.refund_order", "demo.add_note"}, "tool:demo.add_note tool:demo.refund_order"},
		{"every tool consented", &toolplane.Credential{Kind: toolplane.CredentialAgent, ClientID: "claude"}, []string{"demo.add_note"}, ""},
		{"an API key's narrowing", &toolplane.Credential{ID: "tpk_x", Kind: toolplane.CredentialAgent, Tools: []string{"demo.search_tickets"}}, []string{"demo.add_note"}, ""},
		{"a name no scope carries", narrowed, []string{`a" b`, "x\\y"}, ""},
		{"no credential", nil, []string{"demo.add_note"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := door.Scope(tt.cred, tt.tools...)
			var se *door.ScopeError
			if tt.scope == "" {
				if err != nil {
					t.Fatalf("Scope: %v, want none", err)
				}
				return
			}
			if !errors.As(err, &se) || se.Scope() != tt.scope {
				t.Fatalf("Scope: %v, want the scope %q", err, tt.scope)
			}
		})
	}
}
