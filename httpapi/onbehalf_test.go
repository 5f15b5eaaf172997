package httpapi_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/jwtauth"
)

// on_behalf_of names the person a call acts for, which then keeps that
// person from approving it: only a key allowed to act for users (the
// act_for_users role, on an API key or an agent's JWT) may name one; any
// other agent is refused, and nothing is recorded for the call.
func TestOnBehalfOfNeedsAKeyThatActsForUsers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.mintAdmin(t)
	call := `{"arguments":{"query":"invoice"},"run_id":"run-b","on_behalf_of":"ada"}`
	if status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, call); status != http.StatusForbidden {
		t.Errorf("an agent's key without the role named a person: %d %v", status, body)
	}
	// An agent's key holds no role but act_for_users.
	if status, body := f.do(t, "POST", "/v1/keys", admin, `{"kind":"agent","subject":"agent-support","roles":["approver"]}`); status != http.StatusBadRequest {
		t.Fatalf("an agent key with the approver role: %d %v", status, body)
	}
	status, body := f.do(t, "POST", "/v1/keys", admin, `{"kind":"agent","subject":"agent-support","roles":["act_for_users"],"tools":["demo.*"]}`)
	if status != http.StatusCreated {
		t.Fatalf("an agent key acting for users: %d %v", status, body)
	}
	frontDesk := body["key"].(string)

	k, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	jwks := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		json.NewEncoder(w).Encode(jose.JSONWebKeySet{Keys: []jose.JSONWebKey{{Key: &k.PublicKey, KeyID: "k1", Algorithm: string(jose.ES256)}}})
	}))
	t.Cleanup(jwks.Close)
	f.door.Tokens = &jwtauth.Verifier{Issuer: "https://idp.example", Audience: "toolplane", JWKSURL: jwks.URL}
	signer, _ := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: k}, (&jose.SignerOptions{}).WithHeader("kid", "k1"))
	token := func(roles ...string) string {
		tok, _ := jwt.Signed(signer).Claims(map[string]any{"iss": "https://idp.example", "aud": "toolplane", "sub": "agent-support", "org": "org-1",
			"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "agent", "toolplane_tools": []string{"demo.*"}, "toolplane_roles": roles}).Serialize()
		return tok
	}

	tests := []struct {
		name, key string
		want      int
	}{
		{"an agent's key without the role", f.agent, http.StatusForbidden},
		{"an agent's JWT without the role", token(), http.StatusForbidden},
		{"an agent's JWT claiming another role", token("approver"), http.StatusForbidden},
		{"an agent's key acting for users", frontDesk, http.StatusOK},
		{"an agent's JWT acting for users", token("act_for_users"), http.StatusOK},
	}
	allowed := 0
	for _, tt := range tests {
		status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", tt.key, call)
		if status != tt.want {
			t.Errorf("%s: %d %v; want %d", tt.name, status, body, tt.want)
		}
		if tt.want == http.StatusForbidden {
			if e, _ := body["error"].(map[string]any); errCode(body) != "denied" || e["field_path"] != "on_behalf_of" {
				t.Errorf("%s: %v", tt.name, body)
			}
		} else {
			allowed++
		}
	}
	// Only the allowed calls are in the trail, each for the person named.
	evs, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{RunID: "run-b"}, "", 100)
	if err != nil || len(evs) != allowed {
		t.Fatalf("%d audit events (%v); want %d", len(evs), err, allowed)
	}
	for _, e := range evs {
		if e.UserID != "ada" {
			t.Errorf("an allowed call recorded for %q", e.UserID)
		}
	}
	// Without on_behalf_of any agent calls as itself.
	if status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, `{"arguments":{"query":"invoice"},"run_id":"run-c"}`); status != http.StatusOK {
		t.Errorf("a call without on_behalf_of: %d %v", status, body)
	}
}
