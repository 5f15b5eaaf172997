package mcpserver_test

import (
	"context"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/registry"
)

// When a listed version is deprecated, a session is told the list changed
// and the tool's model-facing description says so, naming its replacement
// by the name the model calls it.
func TestDeprecatedToolTellsTheModelItsReplacement(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v1 := `{"type":"object","properties":{"id":{"type":"string"}}}`
	find := lookup("1.0.0", v1)
	find.Def.Name = "crm.find"
	f := newCRMDoor(t, slog.New(slog.DiscardHandler), lookup("1.0.0", v1), find)
	reg, grants, srv, operator := f.reg, f.grants, f.srv, f.operator
	if err := grants.AddGrant(ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator); err != nil {
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
