package loadtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// MCP calls a tool over MCP Streamable HTTP with the official SDK client:
// toolplane's /mcp, a plain SDK server, a proxy, or a federated upstream
// behind toolplane are all this one target type with another Endpoint and
// Key.
type MCP struct {
	Label    string
	Endpoint string // e.g. http://127.0.0.1:8080/mcp
	// Key, when set, is sent as Authorization: Bearer on every request.
	Key string
	// Tool is the name the server lists the tool under (for toolplane, the
	// model-facing name, e.g. demo_search_tickets).
	Tool string
	// Arguments is the JSON object sent as arguments; nil sends none.
	Arguments json.RawMessage
	// Expect, when set, must occur in every result's text content.
	Expect string
}

// Name answers the target's label.
func (t *MCP) Name() string { return t.Label }

// NewClient opens one MCP session (initialize and initialized) over a
// connection of its own. The standalone SSE stream is not opened: the
// clients only make calls, and every target is measured the same way.
func (t *MCP) NewClient(ctx context.Context) (Client, error) {
	var rt http.RoundTripper = newTransport(1)
	if t.Key != "" {
		rt = bearer{auth: "Bearer " + t.Key, next: rt}
	}
	transport := &mcp.StreamableClientTransport{
		Endpoint:             t.Endpoint,
		HTTPClient:           &http.Client{Transport: rt},
		DisableStandaloneSSE: true,
		// A failed call is counted, not retried: a retry would hide
		// failures and add latency that belongs to no call.
		MaxRetries: -1,
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane-load", Version: "1"}, nil)
	session, err := client.Connect(ctx, transport, nil)
	if err != nil {
		return nil, fmt.Errorf("mcp %s: connect to %s: %w", t.Label, t.Endpoint, err)
	}
	params := &mcp.CallToolParams{Name: t.Tool}
	if len(t.Arguments) > 0 {
		params.Arguments = t.Arguments
	}
	return &mcpClient{session: session, params: params, expect: t.Expect}, nil
}

// bearer adds the key to every request of an MCP session, since the SDK
// client transport has no option for a static header.
type bearer struct {
	auth string
	next http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context()) // a RoundTripper must not change its request
	r.Header.Set("Authorization", b.auth)
	return b.next.RoundTrip(r)
}

type mcpClient struct {
	session *mcp.ClientSession
	params  *mcp.CallToolParams
	expect  string
}

func (c *mcpClient) Call(ctx context.Context) error {
	res, err := c.session.CallTool(ctx, c.params)
	if err != nil {
		return fmt.Errorf("mcp call: %w", err)
	}
	text := resultText(res)
	if res.IsError {
		return fmt.Errorf("mcp call: tool error: %s", clip([]byte(text)))
	}
	if !strings.Contains(text, c.expect) {
		return fmt.Errorf("mcp call: unexpected answer: %s", clip([]byte(text)))
	}
	return nil
}

func (c *mcpClient) Close() error {
	if err := c.session.Close(); err != nil {
		return fmt.Errorf("mcp close: %w", err)
	}
	return nil
}

func resultText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			b.WriteString(t.Text)
		}
	}
	return b.String()
}
