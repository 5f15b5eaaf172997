package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// accessTokens verifies the access tokens this server's authorization
// server would have issued: a token stands for the credential it maps to,
// as the authorization server's verifier hands it to the doors (an
// agent's, acting for a person, ClientID the OAuth client, Tools the
// consented narrowing). Anything else is not valid.
type accessTokens map[string]toolplane.Credential

func (a accessTokens) Verify(_ context.Context, token string) (*toolplane.Credential, error) {
	c, ok := a[token]
	if !ok {
		return nil, fmt.Errorf("unknown token: %w", toolplane.ErrUnauthenticated)
	}
	return &c, nil
}

// A call outside an OAuth access token's consent is a scope the client
// may ask the person for: 403 with an insufficient_scope challenge
// naming tool:<name> and the resource metadata, for a single call and for
// a batch (every scope it needs, the batch refused whole). A token whose
// consent is every tool ("tools": no narrowing) and an API key narrowed
// the same way keep their answers: the key's call is decided (and
// refused) by the invoker, never a challenge.
func TestRESTStepUpForAToolOutsideTheConsent(t *testing.T) {
	t.Parallel()
	const meta = "https://tp.example/.well-known/oauth-protected-resource"
	f := newFixture(t)
	f.api.ResourceMetadata = meta
	agent := func(client string, tools ...string) toolplane.Credential {
		return toolplane.Credential{ID: "oat_" + client, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-support",
			ActsFor: "ada", ClientID: client, Tools: tools}
	}
	f.door.Tokens = accessTokens{"narrow": agent("cursor", "demo.search_tickets"), "all": agent("claude"),
		"other-issuer": {ID: "jwt", OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-support", Tools: []string{"demo.search_tickets"}}}
	narrowKey := mint(t, f.store, toolplane.CredentialAgent, "agent-support", nil, []string{"demo.search_tickets"}, false)
	const note = `{"arguments":{"ticket_id":"t-1001","text":"hi"},"run_id":"r-1","idempotency_key":"k-%d"}`
	batch := `{"calls":[{"tool":"demo.add_note","arguments":{"ticket_id":"t-1","text":"a"},"run_id":"r","idempotency_key":"b1"},` +
		`{"tool":"demo.search_tickets","arguments":{"query":"x"}},{"tool":"demo.refund_order","arguments":{"order_id":"o-1","amount_cents":1},"run_id":"r","idempotency_key":"b2"},` +
		`{"tool":"demo.add_note","arguments":{"ticket_id":"t-2","text":"b"},"run_id":"r","idempotency_key":"b3"}]}`
	tests := []struct {
		name, token, path, body string
		status                  int
		challenge               string
	}{
		{"narrowed token, a tool outside", "narrow", "/v1/tools/demo.add_note/invoke", fmt.Sprintf(note, 1), http.StatusForbidden,
			`Bearer realm="toolplane", error="insufficient_scope", scope="tool:demo.add_note", resource_metadata="` + meta + `", error_description="the token's consent does not cover this call"`},
		{"narrowed token, a batch with tools outside", "narrow", "/v1/invoke:batch", batch, http.StatusForbidden,
			`Bearer realm="toolplane", error="insufficient_scope", scope="tool:demo.add_note tool:demo.refund_order", resource_metadata="` + meta + `", error_description="the token's consent does not cover this call"`},
		{"narrowed token, the tool consented", "narrow", "/v1/tools/demo.search_tickets/invoke", `{"arguments":{"query":"refund"}}`, http.StatusOK, ""},
		{"token for every tool", "all", "/v1/tools/demo.add_note/invoke", fmt.Sprintf(note, 2), http.StatusOK, ""},
		{"another issuer's narrowed token", "other-issuer", "/v1/tools/demo.add_note/invoke", fmt.Sprintf(note, 3), http.StatusOK, ""},
		{"narrowed API key", narrowKey, "/v1/tools/demo.add_note/invoke", fmt.Sprintf(note, 4), http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodPost, f.srv.URL+tt.path, strings.NewReader(tt.body))
			req.Header.Set("Authorization", "Bearer "+tt.token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			raw, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tt.status, raw)
			}
			if got := resp.Header.Get("WWW-Authenticate"); got != tt.challenge {
				t.Errorf("WWW-Authenticate %q\n want %q", got, tt.challenge)
			}
			if tt.status == http.StatusForbidden {
				var env struct {
					Error map[string]any `json:"error"`
				}
				if err := json.Unmarshal(raw, &env); err != nil || env.Error["code"] != "denied" || !strings.Contains(env.Error["message"].(string), "tool:demo.add_note") {
					t.Errorf("body %s, want the denied envelope naming the scope", raw)
				}
			}
			if tt.name == "another issuer's narrowed token" || tt.name == "narrowed API key" {
				// Decided by the invoker: the key's own narrowing refuses it.
				if !strings.Contains(string(raw), "denied") && !strings.Contains(string(raw), "tool_unavailable") {
					t.Errorf("a call outside a key's narrowing: %s, want it refused by the invoker", raw)
				}
			}
		})
	}
}
