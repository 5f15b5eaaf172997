package mcpserver_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// needsConsent is a broker whose every release needs the person to
// connect their account first.
type needsConsent struct{ link string }

func (b needsConsent) Release(context.Context, invoke.Release) (*toolplane.Released, error) {
	return nil, &toolplane.ConnectionError{Code: toolplane.CodeConnectionRequired,
		Message: "connect your calendar first", AuthorizationURL: b.link}
}

// unusedRuntime binds every tool to a handler that must never run: the
// broker refuses before dispatch.
type unusedRuntime struct{ t *testing.T }

func (r unusedRuntime) Binding(d *toolplane.Definition) (*handler.Binding, error) {
	return handler.BindFunc("http:"+d.Name, func(context.Context, handler.Call, any) (any, error) {
		r.t.Error("the tool ran without its connection")
		return nil, nil
	}, nil)
}

func TestConnectionRequiredIsElicitedByURL(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	def := toolplane.Definition{
		Name: "cal.list_events", Version: "1.0.0", Description: "List the person's calendar events.",
		InputSchema: json.RawMessage(`{"type":"object","properties":{}}`), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Kind: toolplane.KindVendor, Effect: toolplane.EffectRead, Connection: "calendar",
		Binding: toolplane.Binding{HTTP: &toolplane.HTTPBinding{Method: "GET", URL: "https://calendar.example/events"}},
	}
	reg, _, err := registry.Build([]toolplane.Definition{def}, registry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const link = "https://toolplane.example/v1/connections/oauth/start?state=abc"
	iv, err := invoke.New(invoke.Config{Registry: reg, Handlers: handler.NewRegistry(), Store: store, Policy: policy.Grants{},
		Runtimes: unusedRuntime{t}, Broker: needsConsent{link}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "agent-1",
		Tools: []string{"cal.*"}, Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer((&mcpserver.Server{Door: mcpserver.NewTestDoor(iv, reg, store), Version: "test", PublicURL: "https://toolplane.example"}).Handler())
	t.Cleanup(srv.Close)

	for _, supports := range []bool{true, false} {
		asked := make(chan *mcp.ElicitParams, 1)
		opts := &mcp.ClientOptions{}
		if supports {
			opts.Capabilities = &mcp.ClientCapabilities{Elicitation: &mcp.ElicitationCapabilities{URL: &mcp.URLElicitationCapabilities{}}}
			opts.ElicitationHandler = func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				asked <- req.Params
				return &mcp.ElicitResult{Action: "accept"}, nil
			}
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, opts)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{apikey.Key(id, secret), http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		r, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "cal_list_events", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		text := r.Content[0].(*mcp.TextContent).Text
		// Every client reads the code and the link in the answer.
		if !r.IsError || !strings.Contains(text, `"connection_required"`) || !strings.Contains(text, `"authorization_url":"`+link+`"`) {
			t.Errorf("answer %s", text)
		}
		select {
		case p := <-asked:
			if !supports {
				t.Error("a client without URL elicitation was asked")
			}
			if p.Mode != "url" || p.URL != link || p.ElicitationID == "" {
				t.Errorf("elicitation %+v", p)
			}
		case <-time.After(5 * time.Second):
			if supports {
				t.Error("the client was not asked to open the link")
			}
		}
		cs.Close()
	}
}
