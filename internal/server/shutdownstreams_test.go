package server

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// TestRunStopsPromptlyWithAnMCPClientConnected: an MCP client that stays
// connected holds a stream open for the server's notifications; the end of
// Run's context with no call in flight stops the server promptly, rather
// than waiting out the 30-second grace meant for calls in flight while the
// idle stream keeps the HTTP server from shutting down.
func TestRunStopsPromptlyWithAnMCPClientConnected(t *testing.T) {
	t.Parallel()
	no := false
	r := start(t, Config{}, upstream.Relax{Effect: toolplane.EffectRead, RequiresApproval: &no})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	client := mcp.NewClient(&mcp.Implementation{Name: "servertest", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: r.base + "/mcp", HTTPClient: &http.Client{Transport: bearer{r.agent}}, MaxRetries: -1}, nil)
	if err != nil {
		t.Fatalf("MCP initialize: %v", err)
	}
	defer cs.Close()
	if _, err := cs.ListTools(ctx, nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // the client's notification stream is open
	began := time.Now()
	r.stop()
	select {
	case err := <-r.ran:
		if err != nil {
			t.Fatalf("Run: %v", err)
		}
		t.Logf("Run returned %v after its context ended", time.Since(began))
	case <-time.After(10 * time.Second):
		t.Fatal("Run has not returned 10s after its context ended, with no call in flight: an idle MCP client holds shutdown")
	}
}
