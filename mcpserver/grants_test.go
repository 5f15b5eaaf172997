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
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/handler"
	"github.com/toolplane/toolplane/internal/demo/demotest"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/mcpserver"
	"github.com/toolplane/toolplane/registry"
	"github.com/toolplane/toolplane/sqlite/sqlitetest"
)

func lookup(version, input string) registry.Version {
	return registry.Version{State: toolplane.StateActive, Def: toolplane.Definition{
		Name: "crm.lookup", Version: version, Kind: toolplane.KindInternal, Description: "Look a customer up.",
		InputSchema: json.RawMessage(input), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Effect: toolplane.EffectRead, Binding: toolplane.Binding{Handler: &toolplane.HandlerBinding{Key: "crm.lookup"}},
	}}
}

// crmDoor is an MCP door the tests list and call through: a SQLite store,
// the crm.lookup handler, a registry publishing vs, the grants deciding
// what the agent bot is shown, bot's key, and an agent_operator to grant
// with.
type crmDoor struct {
	reg      *registry.Registry
	grants   *authz.Service
	srv      *httptest.Server
	key      string
	operator *toolplane.Credential
}

// newCRMDoor serves a crmDoor, logging to log.
func newCRMDoor(t *testing.T, log *slog.Logger, vs ...registry.Version) *crmDoor {
	t.Helper()
	store := sqlitetest.New(t)
	hs := handler.NewRegistry()
	b, _ := handler.BindFunc("crm.lookup", func(context.Context, handler.Call, any) (any, error) { return map[string]any{"name": "Ada"}, nil }, nil)
	_ = hs.Register(b)
	reg, _, err := registry.Build(nil, registry.Options{Bindings: demotest.Bindings{Registry: hs}})
	if err != nil {
		t.Fatal(err)
	}
	if ps := reg.SetVersions("published", vs); len(ps) != 0 {
		t.Fatal(ps)
	}
	grants := authz.New(authz.Config{Store: store, Registry: reg})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: authz.Policy{Service: grants}, Logger: log,
		Principals: authz.Principals{Grants: grants, Keys: store}})
	id, secret, _ := apikey.New(toolplane.CredentialAgent)
	if err := store.InsertCredential(context.Background(), &toolplane.Credential{ID: id, OrganizationID: "org-1", Kind: toolplane.CredentialAgent, Subject: "bot",
		Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
		t.Fatal(err)
	}
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Authz = grants
	srv := httptest.NewServer((&mcpserver.Server{Door: d, Log: log}).Handler())
	t.Cleanup(srv.Close)
	return &crmDoor{reg: reg, grants: grants, srv: srv, key: apikey.Key(id, secret),
		operator: &toolplane.Credential{OrganizationID: "org-1", Kind: toolplane.CredentialPerson, Subject: "opal", Roles: []string{"agent_operator"}}}
}

// The tools a session lists follow the grants and the published versions
// live; a session that listed one contract is refused a call shaped for it
// once the version it resolves to changed, until it lists again.
func TestListsFollowGrantsAndVersions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v1 := `{"type":"object","properties":{"id":{"type":"string"}}}`
	v2 := `{"type":"object","properties":{"id":{"type":"string"},"region":{"type":"string"}}}`
	f := newCRMDoor(t, slog.New(slog.DiscardHandler), lookup("1.0.0", v1))
	reg, grants, srv, operator := f.reg, f.grants, f.srv, f.operator
	g := &toolplane.Grant{AgentID: "bot", Pattern: "crm.lookup@^1.0.0"}
	if err := grants.AddGrant(ctx, g, operator); err != nil {
		t.Fatal(err)
	}

	changed := make(chan struct{}, 4)
	client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, &mcp.ClientOptions{
		ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { changed <- struct{}{} },
	})
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{f.key, http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	list := func() map[string]string { // model name -> version
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, tl := range res.Tools {
			v, _ := tl.Meta["toolplane/version"].(string)
			out[tl.Name] = v
		}
		return out
	}
	call := func() string {
		t.Helper()
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": "c-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError {
			return "ok"
		}
		return res.Content[0].(*mcp.TextContent).Text
	}
	if got := list(); got["crm_lookup"] != "1.0.0" {
		t.Fatalf("granted: %v", got)
	}
	if got := call(); got != "ok" {
		t.Fatalf("call: %s", got)
	}

	// A compatible minor with a new contract is published.
	reg.SetVersions("published", []registry.Version{lookup("1.0.0", v1), lookup("1.1.0", v2)})
	select {
	case <-changed:
	case <-time.After(10 * time.Second):
		t.Fatal("no list_changed after a new version")
	}
	if got := call(); !strings.Contains(got, string(toolplane.CodeToolChanged)) {
		t.Fatalf("a call shaped for the listed contract: %s", got)
	}
	if got := list(); got["crm_lookup"] != "1.1.0" {
		t.Fatalf("after the new version: %v", got)
	}
	if got := call(); got != "ok" {
		t.Fatalf("after listing again: %s", got)
	}

	// The grant is revoked: the next list no longer shows the tool, and a
	// call is refused.
	if err := grants.RevokeGrant(ctx, g.ID, operator); err != nil {
		t.Fatal(err)
	}
	if got := list(); len(got) != 0 {
		t.Fatalf("after the grant was revoked: %v", got)
	}
	if got := call(); !strings.Contains(got, string(toolplane.CodeToolUnavailable)) && !strings.Contains(got, string(toolplane.CodeDenied)) {
		t.Fatalf("a call after the grant was revoked: %s", got)
	}
}

// A session is served its own organization's published versions and the
// platform's tools, never another organization's: an agent of an
// organization that published nothing lists no published tool and cannot
// call one by its name, whatever its grants say.
func TestSessionsAreServedTheirOrganizationsVersionsOnly(t *testing.T) {
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
	obj := `{"type":"object","properties":{"id":{"type":"string"}}}`
	v1, v2 := lookup("1.0.0", obj), lookup("2.0.0", obj)
	v1.Organization, v2.Organization = "org-1", "org-2"
	if ps := reg.SetVersions("published", []registry.Version{v1, v2}); len(ps) != 0 {
		t.Fatal(ps)
	}
	quiet := slog.New(slog.DiscardHandler)
	grants := authz.New(authz.Config{Store: store, Registry: reg})
	iv, _ := invoke.New(invoke.Config{Registry: reg, Handlers: hs, Store: store, Policy: authz.Policy{Service: grants}, Logger: quiet,
		Principals: authz.Principals{Grants: grants, Keys: store}})
	d := mcpserver.NewTestDoor(iv, reg, store)
	d.Authz = grants
	srv := httptest.NewServer((&mcpserver.Server{Door: d}).Handler())
	t.Cleanup(srv.Close)
	for _, tt := range []struct {
		org, want string // want is the version listed, "" for none
	}{{"org-1", "1.0.0"}, {"org-2", "2.0.0"}, {"org-3", ""}} {
		id, secret, _ := apikey.New(toolplane.CredentialAgent)
		if err := store.InsertCredential(ctx, &toolplane.Credential{ID: id, OrganizationID: tt.org, Kind: toolplane.CredentialAgent, Subject: "bot",
			Hash: apikey.Hash(secret), CreatedAt: time.Now()}); err != nil {
			t.Fatal(err)
		}
		operator := &toolplane.Credential{OrganizationID: tt.org, Kind: toolplane.CredentialPerson, Subject: "opal", Roles: []string{"agent_operator"}}
		if err := grants.AddGrant(ctx, &toolplane.Grant{AgentID: "bot", Pattern: "*"}, operator); err != nil {
			t.Fatal(err)
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: srv.URL, HTTPClient: &http.Client{Transport: bearer{apikey.Key(id, secret), http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		listed := map[string]any{}
		for _, tl := range res.Tools {
			listed[tl.Name] = tl.Meta["toolplane/version"]
		}
		if tt.want == "" && len(listed) != 0 || tt.want != "" && (len(listed) != 1 || listed["crm_lookup"] != tt.want) {
			t.Errorf("%s lists %v, want crm_lookup %q", tt.org, listed, tt.want)
		}
		call, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": "c-1"}})
		if err != nil {
			t.Fatal(err)
		}
		if call.IsError != (tt.want == "") {
			t.Errorf("%s calling crm_lookup: error %v, %v", tt.org, call.IsError, call.Content)
		}
		cs.Close()
	}
}
