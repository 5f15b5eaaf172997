package mcpserver_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/registry"
)

// A session that keeps no stream open (a client between calls, as most
// are) cannot be sent tools/list_changed; it sees the change at its next
// tools/list. A publish is routine, so it is not logged as a warning for
// every such session: the operator's log shows it at DEBUG only.
func TestListChangedToIdleSessionsIsNoWarning(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	v1 := `{"type":"object","properties":{"id":{"type":"string"}}}`
	var logs syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	f := newCRMDoor(t, log, lookup("1.0.0", v1))
	reg, grants, srv, operator := f.reg, f.grants, f.srv, f.operator
	if err := grants.AddGrant(ctx, &toolplane.Grant{AgentID: "bot", Pattern: "crm.*"}, operator); err != nil {
		t.Fatal(err)
	}
	// Three sessions that initialize and list, over POST only: no stream
	// stays open for a notification.
	post := func(session, body string) (string, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", srv.URL, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+f.key)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
			req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, _ = io.Copy(&sb, resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, sb.String())
		}
		return resp.Header.Get("Mcp-Session-Id"), sb.String()
	}
	for range 3 {
		session, _ := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"idle","version":"1"}}}`)
		post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`)
		if _, out := post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(out, "crm_lookup") {
			t.Fatalf("tools/list: %s", out)
		}
	}
	// A new version is published: every session's list changes.
	reg.SetVersions("published", []registry.Version{lookup("1.0.0", v1), lookup("1.1.0", v1)})
	want := `level=DEBUG msg="calling notifications/tools/list_changed: rejected by transport`
	for deadline := time.Now().Add(10 * time.Second); strings.Count(logs.String(), want) < 3; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the undelivered notifications are not at DEBUG:\n%s", logs.String())
		}
	}
	if strings.Contains(logs.String(), "level=WARN") {
		t.Errorf("a routine publish warned:\n%s", logs.String())
	}
}
