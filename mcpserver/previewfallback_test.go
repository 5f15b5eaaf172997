package mcpserver_test

import (
	"context"
	"encoding/json"
	"errors"
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
	"github.com/toolplane/toolplane/httpapi"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// payIn are the arguments of the tool whose preview always fails.
type payIn struct {
	Account  string `json:"account"`
	Amount   int64  `json:"amount_cents"`
	APIToken string `json:"api_token,omitempty"`
}

// A tool whose approval preview fails (its CRM is down, and says so with
// a token in the error) still has its calls approved by a person, over
// REST and over MCP: each call files an approval whose line says the
// preview is unavailable, in the platform's words, over the arguments,
// the credential redacted and the x-sensitive account masked; the agent
// is told to wait, not refused; and the approval reads the same over REST.
func TestAFailingPreviewStillAsksAPerson(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const leak = "crm down: token=sk_live_0123456789abcdefghij"
	d, err := handler.Define[payIn, map[string]any](toolplane.Definition{
		Name: "pay.send", Version: "1.0.0", Description: "Pay an account.", Kind: toolplane.KindInternal,
		Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "pay.send"}}, Effect: toolplane.EffectWrite,
		ApprovalPreview: true, Annotations: toolplane.Annotations{RequiresApproval: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	no := false
	d.Repeatable = &no
	var in map[string]any
	if err := json.Unmarshal(d.InputSchema, &in); err != nil {
		t.Fatal(err)
	}
	in["properties"].(map[string]any)["account"].(map[string]any)["x-sensitive"] = true
	if d.InputSchema, err = json.Marshal(in); err != nil {
		t.Fatal(err)
	}
	hs := handler.NewRegistry()
	b, err := handler.Bind("pay.send", func(context.Context, handler.Call, payIn) (map[string]any, error) {
		return map[string]any{"paid": true}, nil
	}, nil, handler.WithPreview(func(context.Context, handler.Call, any) (string, error) { return "", errors.New(leak) }))
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Register(b); err != nil {
		t.Fatal(err)
	}
	reg, _, err := registry.Build([]toolplane.Definition{d}, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	store := sqlitetest.New(t)
	quiet := slog.New(slog.DiscardHandler)
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: policy.Grants{},
		Approvals: approval.New(approval.Config{Store: store, TTL: time.Hour}), Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	layer := mcpserver.NewTestDoor(iv, reg, store)
	mcpSrv := httptest.NewServer((&mcpserver.Server{Door: layer, Version: "test"}).Handler())
	t.Cleanup(mcpSrv.Close)
	restSrv := httptest.NewServer((&httpapi.Server{Door: layer, Store: store, Log: quiet}).Handler())
	t.Cleanup(restSrv.Close)
	mintKey := func(kind toolplane.CredentialKind, subject string, roles, tools []string) string {
		id, secret, _ := apikey.New(kind)
		if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: kind, Subject: subject,
			Roles: roles, Tools: tools, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		return apikey.Key(id, secret)
	}
	agent := mintKey(toolplane.CredentialAgent, "agent-1", nil, []string{"pay.send"})
	approver := mintKey(toolplane.CredentialPerson, "ada", []string{toolplane.RoleApprover}, nil)
	rest := func(method, path, key, body string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest(method, restSrv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		var out map[string]any
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, raw)
		}
		return resp.StatusCode, out
	}
	// filed checks the approval as a person reads it over REST.
	filed := func(door, id, amount string) {
		t.Helper()
		want := `preview unavailable: the tool's preview failed; pay.send {"account":"[redacted]","amount_cents":` + amount + `,"api_token":"[redacted]"}`
		status, a := rest("GET", "/v1/approvals/"+id, approver, "")
		if status != http.StatusOK || a["status"] != "pending" || a["preview"] != want {
			t.Fatalf("%s: the approval reads %d %v; want pending with %q", door, status, a, want)
		}
		raw, _ := json.Marshal(a)
		for _, secret := range []string{"sk_live", "crm down", "acct-secret-9", "tok-abc-123"} {
			if strings.Contains(string(raw), secret) {
				t.Fatalf("%s: the approval shows %q: %s", door, secret, raw)
			}
		}
	}

	status, body := rest("POST", "/v1/tools/pay.send/invoke", agent,
		`{"arguments":{"account":"acct-secret-9","amount_cents":500,"api_token":"tok-abc-123"},"run_id":"run-rest"}`)
	ap, _ := body["approval"].(map[string]any)
	id, _ := ap["id"].(string)
	if status != http.StatusAccepted || id == "" || !strings.HasPrefix(ap["preview"].(string), "preview unavailable: ") {
		t.Fatalf("REST: %d %v; want 202 with an approval", status, body)
	}
	filed("REST", id, "500")

	client := mcp.NewClient(&mcp.Implementation{Name: "test-client", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: mcpSrv.URL,
		HTTPClient: &http.Client{Transport: bearer{agent, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "pay_send", Arguments: map[string]any{"account": "acct-secret-9", "amount_cents": 700, "api_token": "tok-abc-123"}})
	if err != nil {
		t.Fatal(err)
	}
	id, _ = res.Meta["toolplane/approval_id"].(string)
	if raw, _ := json.Marshal(res); !res.IsError || id == "" || !strings.Contains(string(raw), "preview unavailable") {
		t.Fatalf("MCP: %s; want an approval required, its line shown", raw)
	}
	filed("MCP", id, "700")
}
