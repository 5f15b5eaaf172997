package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// A tools/call's _meta carries the caller's time (toolplane/timeout_ms)
// and hops (toolplane/remaining_hops), on the fast path and the SDK's
// alike: too little time answers deadline_exceeded, no hop left
// max_hops_exceeded, a value that is not a number invalid_input, and ten
// years or a forged count of hops runs under the platform's own bounds.
func TestMetaCarriesTheDeadlineAndHops(t *testing.T) {
	t.Parallel()
	for _, stream := range []bool{false, true} {
		f := newFastFixture(t, 0)
		url := f.url
		if stream {
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
			name string
			meta mcp.Meta
			want string // "" for an answer that ran
		}{
			{"ten years", mcp.Meta{"toolplane/timeout_ms": 315360000000}, ""},
			{"a second", mcp.Meta{"toolplane/timeout_ms": 1000}, ""},
			{"a millisecond", mcp.Meta{"toolplane/timeout_ms": 1}, "deadline_exceeded"},
			{"a timeout that is not a number", mcp.Meta{"toolplane/timeout_ms": "1000"}, "invalid_input"},
			{"a negative timeout", mcp.Meta{"toolplane/timeout_ms": -5}, "invalid_input"},
			{"no hop left", mcp.Meta{"toolplane/remaining_hops": -1}, "max_hops_exceeded"},
			{"hops forged upward", mcp.Meta{"toolplane/remaining_hops": 1 << 20}, ""},
			{"a fraction of a hop", mcp.Meta{"toolplane/remaining_hops": 1.5}, "invalid_input"},
			{"hops that are not a number", mcp.Meta{"toolplane/remaining_hops": "3"}, "invalid_input"},
		}
		for _, tt := range tests {
			res, err := cs.CallTool(context.Background(), &mcp.CallToolParams{Name: "crm_lookup", Arguments: map[string]any{"id": "c-1"}, Meta: tt.meta})
			if err != nil {
				t.Fatalf("stream %v, %s: %v", stream, tt.name, err)
			}
			text := res.Content[0].(*mcp.TextContent).Text
			switch {
			case tt.want == "" && res.IsError:
				t.Errorf("stream %v, %s: %s", stream, tt.name, text)
			case tt.want != "" && (!res.IsError || !strings.Contains(text, `"`+tt.want+`"`)):
				t.Errorf("stream %v, %s: %s; want %s", stream, tt.name, text, tt.want)
			}
		}
	}
}
