package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

// When a listed version is deprecated, a session is told the list changed
// and the tool's model-facing description says so, naming its replacement
// by the name the model calls it.
func TestDeprecatedToolTellsTheModelItsReplacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	store := sqlitetest.New(t)
	hs := handler.NewRegistry()
	b, _ := handler.BindFunc("crm.lookup", func(context.Context, handler.Call, any) (any, error) { return map[string]any{"name": "Ada"}, nil }, nil)
	_ = hs.Register(b)
	reg, _, err := registry.Build(nil, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	v1 := `{"type":"object","properties":{"id":{"type":"string"}}}`
	find := lookup("1.0.0", v1)
	find.Def.Name = "crm.find"
	if ps := reg.SetVersions("published", []registry.Version{lookup("1.0.0", v1), find}); len(ps) != 0 {
		t.Fatal(ps)
	}
	quiet := slog.New(slog.DiscardHandler)
	grants := authz.New(authz.Config{Store: store, Registry: reg, Logger: quiet})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: authz.Policy{Service: grants}, Logger: quiet,
		Principals: authz.Principals{Grants: grants, Keys: store}})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot",
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Authz = grants
	srv := httptest.NewServer((&mcpserver.Server{Door: d}).Handler())
	t.Cleanup(srv.Close)
	operator := &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "opal", Roles: []string{"agent_operator"}}
	if err := grants.AddGrant(ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator); err != nil {
		t.Fatal(err)
	}
	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{apikey.Key(id, secret), http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	description := func() string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tl := range res.Tools {
			if tl.Name == "crm_lookup" {
				return tl.Description
			}
		}
		t.Fatalf("crm_lookup not listed: %v", res.Tools)
		return ""
	}
	if got := description(); got != "Look a customer up." {
		t.Fatalf("before: %q", got)
	}
	deprecated := lookup("1.0.0", v1)
	deprecated.State, deprecated.SunsetAt, deprecated.Replacement = toolplane.StateDeprecated, time.Date(2027, 12, 3, 0, 0, 0, 0, time.UTC), "crm.find"
	reg.SetVersions("published", []registry.Version{deprecated, find})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after the deprecation")
	}
	want := "Look a customer up.\n\nDeprecated: it may be retired from 2027-12-03; use crm_find instead."
	if got := description(); got != want {
		t.Errorf("after: %q, want %q", got, want)
	}
}
