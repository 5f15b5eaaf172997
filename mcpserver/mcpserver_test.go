package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
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

type bearer struct {
	key  string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return b.next.RoundTrip(r)
}

func TestMCPClientCallsThroughTheInvoker(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Tools: []string{"demo.search_tickets", "demo.add_note", "demo.refund_order"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, store), Version: "test"}).Handler())
	t.Cleanup(srv.Close)

	// Without a key the endpoint refuses.
	if resp, err := http.Post(srv.URL, "application/json", strings.NewReader(`{}`)); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("no key: %v %v", resp, err)
	}

	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL,
		HTTPClient: &http.Client{Transport: bearer{apikey.Key(id, secret), http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })

	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if strings.Join(names, ",") != "demo_add_note,demo_refund_order,demo_search_tickets" {
		t.Fatalf("tools/list = %v", names)
	}

	text := func(r *mcp.CallToolResult) string {
		var b strings.Builder
		for _, c := range r.Content {
			if tc, ok := c.(*mcp.TextContent); ok {
				b.WriteString(tc.Text)
			}
		}
		return b.String()
	}
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_add_note", Arguments: map[string]any{"ticket_id": "t-1001"}})
	if err != nil || !r.IsError || !strings.Contains(text(r), `"field_path":"/text"`) {
		t.Fatalf("validation refusal: %+v %v", r, err)
	}
	for i, replayed := range []bool{false, true} {
		r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_add_note", Arguments: map[string]any{"ticket_id": "t-1001", "text": "Shipped."}})
		if err != nil || r.IsError || strings.Contains(text(r), `"replayed":true`) != replayed || r.StructuredContent == nil {
			t.Fatalf("write %d: %+v %v", i, r, err)
		}
	}
	// A refund waits for a person; after the approval the same call in the
	// same session answers the executed result.
	args := map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_refund_order", Arguments: args})
	approvalID, _ := r.Meta["toolplane/approval_id"].(string)
	if err != nil || !r.IsError || approvalID == "" || !strings.Contains(text(r), "waits for a person's approval") {
		t.Fatalf("refund: %+v %v", r, err)
	}
	if _, err := iv.Resolve(ctx, approvalID, approval.Decision{Approve: true}, &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "ada", Roles: []string{toolplane.RoleApprover}}); err != nil {
		t.Fatal(err)
	}
	if _, err := iv.ExecuteApproved(ctx, "org-1", approvalID); err != nil { // what the background job does
		t.Fatal(err)
	}
	r, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_refund_order", Arguments: args})
	if err != nil || r.IsError || !strings.Contains(text(r), `"replayed":true`) || !strings.Contains(text(r), `"remaining_cents":0`) {
		t.Fatalf("after approval: %+v %v", r, err)
	}
	// Another key, of another organization, cannot drive this session.
	otherID, otherSecret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: otherID, OrganizationID: "org-2", Kind: toolplane.CredentialAgent, Subject: "intruder",
		Hash: apikey.Hash(otherSecret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	hijack, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":99,"method":"tools/call","params":{"name":"demo_add_note","arguments":{"ticket_id":"t-1001","text":"hijacked"}}}`))
	hijack.Header.Set("Authorization", "Bearer "+apikey.Key(otherID, otherSecret))
	hijack.Header.Set("Content-Type", "application/json")
	hijack.Header.Set("Accept", "application/json, text/event-stream")
	hijack.Header.Set("Mcp-Session-Id", cs.ID())
	if resp, err := http.DefaultClient.Do(hijack); err != nil || resp.StatusCode < 400 {
		t.Fatalf("another key drove the session: %v %v", resp, err)
	}
	// A tool the key does not grant is not there.
	if r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_analyze_text", Arguments: map[string]any{"text": "x"}}); err == nil && !r.IsError {
		t.Fatalf("an ungranted tool answered: %+v", r)
	}
}
