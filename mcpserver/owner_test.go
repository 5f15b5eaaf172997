package mcpserver

import (
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// A stored session names its owner as the node that opened it does: a
// client that stepped up (a new consent, a new credential ID) resumes its
// session on any node, another client, person, agent or organization
// does not, and an API key is its own ID.
func TestStoredOwner(t *testing.T) {
	t.Parallel()
	token := func(id, org, client, agent, person string) *toolplane.Credential {
		return &toolplane.Credential{ID: id, OrganizationID: org, Kind: toolplane.CredentialAgent, ClientID: client, Subject: agent, ActsFor: person}
	}
	long := "https://client.example/" + strings.Repeat("x", 2000)
	opened := token("oauth:oag_1", "acme", long, "oauth-clients", "sam")
	tests := []struct {
		name string
		cred *toolplane.Credential
		same bool
	}{
		{"the same client after a step-up", token("oauth:oag_2", "acme", long, "oauth-clients", "sam"), true},
		{"another person", token("oauth:oag_3", "acme", long, "oauth-clients", "ana"), false},
		{"another client", token("oauth:oag_4", "acme", "https://other.example/c", "oauth-clients", "sam"), false},
		{"another agent", token("oauth:oag_5", "acme", long, "bot", "sam"), false},
		{"another organization", token("oauth:oag_6", "umbrella", long, "oauth-clients", "sam"), false},
		{"an API key of the same agent", &toolplane.Credential{ID: "tpk_1", OrganizationID: "acme", Kind: toolplane.CredentialAgent, Subject: "oauth-clients"}, false},
	}
	want := storedOwner(opened)
	if len(want) > 64 || !strings.HasPrefix(want, "oauth:") {
		t.Fatalf("storedOwner = %q; want a short oauth: digest", want)
	}
	for _, tt := range tests {
		if got := storedOwner(tt.cred) == want; got != tt.same {
			t.Errorf("%s: same owner = %v, want %v", tt.name, got, tt.same)
		}
		if got := sessionOwner(tt.cred) == sessionOwner(opened); got != tt.same {
			t.Errorf("%s: sessionOwner agrees = %v, want %v", tt.name, got, tt.same)
		}
	}
	if key := (&toolplane.Credential{ID: "tpk_9", OrganizationID: "acme"}); storedOwner(key) != "tpk_9" {
		t.Errorf("an API key's stored owner = %q, want its ID", storedOwner(key))
	}
}
