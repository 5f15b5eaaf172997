package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/sqlite"
)

// An identifier a client sends past its bound (an approval id in the
// call's _meta, a tool name) is refused with invalid_input, without quoting
// it, on the fast path and the SDK's alike, and nothing reaches the audit
// trail.
func TestOverlongIdentifiersAreRefusedBeforeTheAuditTrail(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		f := newFastFixture(t, 0)
		url := f.url
		if stream {
			// Streamed answers are the SDK's: the fast path passes them on.
			f.s.StreamResponses = true
			srv := httptest.NewServer(f.s.Handler())
			t.Cleanup(srv.Close)
			url = srv.URL
		}
		client := mcp.NewClient(&mcp.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := client.Connect(context.Background(), &mcp.StreamableClientTransport{Endpoint: url,
			HTTPClient: &http.Client{Transport: withKey{f.keyA, http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cs.Close() })
		tests := []struct {
			name   string
			params *mcp.CallToolParams
		}{
			{"a long authorized_by", &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": "c-1"},
				Meta: mcp.Meta{"toolplane/authorized_by": strings.Repeat("a", 100<<10)}}},
			{"a 100 KB tool name", &mcp.CallToolParams{Name: strings.Repeat("t", 100<<10), Arguments: map[string]any{}}},
		}
		for _, tt := range tests {
			res, err := cs.CallTool(context.Background(), tt.params)
			if err != nil || !res.IsError {
				t.Fatalf("stream %v, %s: %v %+v", stream, tt.name, err, res)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			if !strings.Contains(text, "invalid_input") || len(text) > 1000 {
				t.Errorf("stream %v, %s: %.300s (%d bytes)", stream, tt.name, text, len(text))
			}
		}
		evs, _, err := f.s.Door.Store.(*sqlite.Store).ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 10)
		if err != nil || len(evs) != 0 {
			t.Errorf("stream %v: the audit trail holds %d events (%v); want none", stream, len(evs), err)
		}
		if n := f.s.sdkCalls.Load(); (n > 0) != stream {
			t.Errorf("stream %v: the SDK dispatched %d calls", stream, n)
		}
	}
}
