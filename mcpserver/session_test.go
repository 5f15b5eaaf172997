package mcpserver_test

import (
	"context"
	"io"
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
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/ratelimit"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// demoServer serves the demo catalogue over MCP and answers its URL and an
// agent key granting every demo tool.
func demoServer(t *testing.T, publicURL string) (string, string) {
	t.Helper()
	url, key, _ := demoDoor(t, publicURL)
	return url, key
}

// demoDoor is demoServer, also answering the invoker behind the door (where
// a test resolves approvals as a person would).
func demoDoor(t *testing.T, publicURL string) (string, string, *invoke.Invoker) {
	t.Helper()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, hs := demotest.Registry(t)
	quiet := slog.New(slog.DiscardHandler)
	approvals := approval.New(approval.Config{Store: store, TTL: time.Hour})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{}, Approvals: approvals, Logger: quiet})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Tools: []string{"demo.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, store), Version: "test", PublicURL: publicURL}).Handler())
	t.Cleanup(srv.Close)
	return srv.URL, apikey.Key(id, secret), iv
}

func TestApprovalIsElicitedByURLWhereTheClientSupportsIt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	url, key := demoServer(t, "https://toolplane.example")
	asked := make(chan *mcp.ElicitParams, 1)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		Capabilities: &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}},
		ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
			asked <- req.Params
			return &mcp.ElicitResult{Action: "accept"}, nil
		},
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url, HTTPClient: &http.Client{Transport: bearer{key, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_refund_order", Arguments: map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ := r.Meta["toolplane/approval_id"].(string)
	if id == "" {
		t.Fatalf("no approval: %+v", r)
	}
	// The answer and the elicitation name the approval's own address.
	want := "https://toolplane.example/console/approvals/" + id
	approve := "POST https://toolplane.example/v1/approvals/" + id + "/approve"
	if details, _ := r.Meta["toolplane/approval"].(map[string]any); details["url"] != want || details["approve"] != approve {
		t.Errorf("approval details %v, want url %s", details, want)
	}
	select {
	case p := <-asked:
		if p.Mode != "url" || p.URL != want || p.ElicitationID != id {
			t.Errorf("elicitation %+v", p)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the client was not asked to open the approval")
	}
}

func TestOlderProtocolVersionsAreNegotiated(t *testing.T) {
	t.Parallel()
	url, key := demoServer(t, "")
	for _, version := range []string{"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"} {
		t.Run(version, func(t *testing.T) {
			t.Parallel()
			body := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"` + version + `","capabilities":{},"clientInfo":{"name":"old","version":"1"}}}`
			req, _ := http.NewRequest("POST", url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+key)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != http.StatusOK || !strings.Contains(string(got), `"protocolVersion":"`+version+`"`) {
				t.Fatalf("initialize at %s: %d %s", version, resp.StatusCode, got)
			}
			session := resp.Header.Get("Mcp-Session-Id")
			// The session then lists tools under that version.
			list, _ := http.NewRequest("POST", url, strings.NewReader(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`))
			for k, v := range map[string]string{"Authorization": "Bearer " + key, "Content-Type": "application/json",
				"Accept": "application/json, text/event-stream", "Mcp-Session-Id": session, "Mcp-Protocol-Version": version} {
				list.Header.Set(k, v)
			}
			resp2, err := http.DefaultClient.Do(list)
			if err != nil {
				t.Fatal(err)
			}
			defer resp2.Body.Close()
			got, _ = io.ReadAll(resp2.Body)
			if resp2.StatusCode != http.StatusOK || !strings.Contains(string(got), "demo_search_tickets") {
				t.Fatalf("tools/list at %s: %d %s", version, resp2.StatusCode, got)
			}
		})
	}
}

func TestMCPRequestsAreRateLimitedPerKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	reg, _, _ := registry.Build(nil, registry.Options{})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{}})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Limiter = ratelimit.New(2, time.Minute)
	d.Now = frozen()
	srv := httptest.NewServer((&mcpserver.Server{Door: d}).Handler())
	t.Cleanup(srv.Close)
	statuses := []int{}
	for range 3 {
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer "+apikey.Key(id, secret))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		statuses = append(statuses, resp.StatusCode)
		if resp.Header.Get("X-RateLimit-Limit") != "2" {
			t.Errorf("X-RateLimit-Limit = %q", resp.Header.Get("X-RateLimit-Limit"))
		}
	}
	if statuses[2] != http.StatusTooManyRequests || statuses[0] == http.StatusTooManyRequests {
		t.Errorf("statuses %v, want the third refused with 429", statuses)
	}
}
