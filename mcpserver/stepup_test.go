package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/approval"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// accessTokens verifies the access tokens this server's authorization
// server would have issued, as its verifier hands them to the doors: an
// agent's credential acting for a person, ClientID the OAuth client,
// Tools the consented narrowing.
type accessTokens map[string]toolplane.Credential

func (a accessTokens) Verify(_ context.Context, token string) (*toolplane.Credential, error) {
	c, ok := a[token]
	if !ok {
		return nil, fmt.Errorf("unknown token: %w", toolplane.ErrUnauthenticated)
	}
	return &c, nil
}

// The MCP authorization spec's scope challenge: a tools/call outside an
// OAuth access token's consent is answered HTTP 403 with
// WWW-Authenticate: Bearer error="insufficient_scope", scope="tool:<name>"
// and the endpoint's resource metadata, whether the client was shown the
// tool or not; the go-sdk client sees the call fail, and the same call
// with a token consented for the tool runs. An API key narrowed the same
// way keeps its answer: a tool result the model reads, not a challenge.
func TestMCPStepUpForAToolOutsideTheConsent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const meta = "https://tp.example/.well-known/oauth-protected-resource/mcp"
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		Approvals: approval.New(approval.Config{Store: store, TTL: time.Hour}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	// Each authorization is a consent of its own, so the wider token is
	// another credential of the same client for the same person.
	agent := func(consent, client, person string, tools ...string) toolplane.Credential {
		return toolplane.Credential{ID: "oauth:" + consent, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-support",
			ActsFor: person, ClientID: client, Tools: tools}
	}
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Tokens = accessTokens{"narrow": agent("g1", "cursor", "ada", "demo.search_tickets"), "wider": agent("g2", "cursor", "ada", "demo.search_tickets", "demo.add_note"),
		"other-client": agent("g3", "vscode", "ada", "demo.search_tickets", "demo.add_note"), "other-person": agent("g4", "cursor", "bob", "demo.search_tickets", "demo.add_note")}
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-support",
		Tools: []string{"demo.search_tickets"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	narrowKey := apikey.Key(id, secret)
	srv := &mcpserver.Server{Door: d, Version: "test", PublicURL: "https://tp.example", AuthorizationServer: "https://tp.example"}
	mux := http.NewServeMux()
	mux.Handle("/mcp", srv.Handler())
	hts := httptest.NewServer(mux)
	t.Cleanup(hts.Close)

	// The go-sdk client, with the narrowed token.
	rt := &switching{next: http.DefaultTransport}
	rt.token.Store("narrow")
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "t", Version: "1"}, nil).Connect(ctx,
		&mcp.StreamableClientTransport{Endpoint: hts.URL + "/mcp", HTTPClient: &http.Client{Transport: rt}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_search_tickets", Arguments: map[string]any{"query": "refund"}}); err != nil || r.IsError {
		t.Fatalf("the consented tool: %+v %v", r, err)
	}
	note := &mcp.CallToolParams{Name: "demo_add_note", Arguments: map[string]any{"ticket_id": "t-1001", "text": "Shipped."},
		Meta: mcp.Meta{"toolplane/idempotency_key": "note-1"}}
	if r, err := cs.CallTool(ctx, note); err == nil {
		t.Fatalf("a tool outside the consent: %+v, want the call refused at HTTP", r)
	} else if !strings.Contains(err.Error(), "tool:demo.add_note") {
		t.Errorf("the client's error %q does not name the scope", err)
	}
	// Another client's token, or one for another person, may not use
	// the session.
	for _, other := range []string{"other-client", "other-person"} {
		rt.token.Store(other)
		if _, err := cs.CallTool(ctx, note); err == nil || !strings.Contains(err.Error(), "session user mismatch") {
			t.Errorf("%s in the session: %v, want the session refused", other, err)
		}
	}
	// Stepped up: the client goes on in its session with the new token,
	// which covers the tool; the session now shows it, and the call runs.
	rt.token.Store("wider")
	if r, err := cs.CallTool(ctx, note); err != nil || r.IsError {
		raw, _ := json.Marshal(r)
		t.Fatalf("after the step-up: %s %v", raw, err)
	}
	listed, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range listed.Tools {
		names = append(names, tool.Name)
	}
	if !slices.Contains(names, "demo_add_note") {
		t.Errorf("after the step-up the session lists %v, want demo_add_note in it", names)
	}

	// The raw answer, as curl sees it.
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	call := `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo_add_note","arguments":{"ticket_id":"t-1001","text":"x"},"_meta":{"toolplane/idempotency_key":"note-%s"}}}`
	for _, tt := range []struct {
		name, token string
		status      int
		challenge   string
	}{
		{"narrowed token", "narrow", http.StatusForbidden,
			`Bearer realm="toolplane", error="insufficient_scope", scope="tool:demo.add_note", resource_metadata="` + meta + `", error_description="the token's consent does not cover this tool"`},
		{"narrowed API key", narrowKey, http.StatusOK, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			open := send(t, "POST", hts.URL+"/mcp", tt.token, "", initialize)
			sid := open.header.Get("Mcp-Session-Id")
			if open.status != http.StatusOK || sid == "" {
				t.Fatalf("initialize: %d %s", open.status, open.body)
			}
			send(t, "POST", hts.URL+"/mcp", tt.token, sid, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			got := send(t, "POST", hts.URL+"/mcp", tt.token, sid, fmt.Sprintf(call, tt.name))
			if got.status != tt.status {
				t.Fatalf("status %d, want %d: %s", got.status, tt.status, got.body)
			}
			if h := got.header.Get("WWW-Authenticate"); h != tt.challenge {
				t.Errorf("WWW-Authenticate %q\n want %q", h, tt.challenge)
			}
			var rpc struct {
				ID     json.RawMessage `json:"id"`
				Error  map[string]any  `json:"error"`
				Result struct {
					IsError bool `json:"isError"`
				} `json:"result"`
			}
			if err := json.Unmarshal(got.body, &rpc); err != nil || string(rpc.ID) != "7" {
				t.Fatalf("not a JSON-RPC answer to id 7: %v: %s", err, got.body)
			}
			if tt.status == http.StatusForbidden && (rpc.Error == nil || !strings.Contains(fmt.Sprint(rpc.Error["message"]), "tool:demo.add_note")) {
				t.Errorf("the 403's body %s, want a JSON-RPC error naming the scope", got.body)
			}
			if tt.status == http.StatusOK && !rpc.Result.IsError {
				t.Errorf("a call outside the key's narrowing ran: %s", got.body)
			}
		})
	}
}
