package authz_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/clientcert"
)

// A stored call's live principal keeps a tool only while the agent's
// grants allow it and the key it was made with is in force and admits it.
func TestLivePrincipalFollowsGrantsAndTheKey(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, g := range []toolplane.Grant{{AgentID: "bot", Pattern: "crm.*"}, {AgentID: "limited", Pattern: "crm.lookup"}} {
		if err := f.svc.AddGrant(f.ctx, &g, operator); err != nil {
			t.Fatal(err)
		}
	}
	key := func(tools []string, change func(*toolplane.Credential)) string {
		t.Helper()
		id, secret, err := apikey.New(toolplane.CredentialAgent)
		if err != nil {
			t.Fatal(err)
		}
		c := &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot", Tools: tools,
			Hash: apikey.Hash(secret), CreatedAt: f.clock.Now()}
		if change != nil {
			change(c)
		}
		if err := f.store.InsertCredential(f.ctx, c); err != nil {
			t.Fatal(err)
		}
		return id
	}
	whole := key(nil, nil)
	narrowed := key([]string{"crm.lookup"}, nil)
	revoked := key(nil, func(c *toolplane.Credential) { c.RevokedAt = f.clock.Now() })
	expired := key(nil, func(c *toolplane.Credential) { c.ExpiresAt = f.clock.Now().Add(-time.Minute) })
	both := []string{"crm.lookup", "crm.delete_customer"}

	tests := []struct {
		name, agent, credential string
		held, want              []string
	}{
		{"unchanged", "bot", whole, both, both},
		{"key narrowed", "bot", narrowed, both, []string{"crm.lookup"}},
		{"key revoked", "bot", revoked, both, nil},
		{"key expired", "bot", expired, both, nil},
		{"key gone", "bot", "tpk_0000000000000000", both, nil},
		{"grant narrower", "limited", whole, both, []string{"crm.lookup"}},
		{"not an API key: grants only", "bot", "jwt:issuer/bot", both, both},
		{"nothing gained", "bot", whole, []string{"crm.lookup"}, []string{"crm.lookup"}},
		{"consent standing", "bot", authz.ConsentPrefix + "oag_live", both, both},
		{"consent revoked", "bot", authz.ConsentPrefix + "oag_revoked", both, nil},
		{"certificate standing", "bot", clientcert.CredentialPrefix + "1a", both, both},
		{"certificate revoked", "bot", clientcert.CredentialPrefix + "2b", both, nil},
	}
	// The consents as an authorization server's store would answer them
	// (authserver.ConsentInForce), asked for the call's organization.
	consents := func(_ context.Context, org, id string, _ time.Time) (bool, error) {
		return org == "org-1" && id == authz.ConsentPrefix+"oag_live", nil
	}
	live := authz.Principals{Grants: f.svc, Keys: f.store, Now: f.clock.Now, Consents: consents,
		CertificateRevoked: func(serial string) bool { return serial == "2b" }}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := &toolplane.Invocation{OrganizationID: "org-1", AgentID: tt.agent, CredentialID: tt.credential,
				Principal: toolplane.Principal{ID: tt.agent, Tools: tt.held}}
			p, err := live.Principal(f.ctx, inv)
			if err != nil {
				t.Fatal(err)
			}
			if p.ID != tt.agent || !slices.Equal(p.Tools, tt.want) {
				t.Fatalf("Principal = %+v, want %s holding %v", p, tt.agent, tt.want)
			}
		})
	}
}
