// Command mcpclient is the MCP half of the README's quickstart: it connects
// to toolplane's /mcp with the demo agent's key, as any MCP client would,
// lists the tools it is shown and calls one.
//
// The server is $TOOLPLANE_SERVER (its /mcp), else http://localhost:8080;
// --url names an MCP endpoint in full.
//
//	set -a; . toolplane-data/credentials.env; set +a
//	go run ./examples/mcpclient                         # lists the tools, searches tickets
//	go run ./examples/mcpclient demo_add_note '{"ticket_id":"t-1001","text":"Called back."}'
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	url := flag.String("url", endpoint(os.Getenv("TOOLPLANE_SERVER")), "toolplane's MCP endpoint (default $TOOLPLANE_SERVER/mcp)")
	key := flag.String("key", os.Getenv("TOOLPLANE_DEMO_AGENT_KEY"), "an agent's API key ($TOOLPLANE_DEMO_AGENT_KEY)")
	flag.Parse()
	tool, args := "demo_search_tickets", `{"query":"cracked"}`
	if flag.NArg() >= 1 {
		tool = flag.Arg(0)
	}
	if flag.NArg() >= 2 {
		args = flag.Arg(1)
	}
	if err := run(context.Background(), *url, *key, tool, args); err != nil {
		fmt.Fprintln(os.Stderr, "mcpclient:", err)
		os.Exit(1)
	}
}

// endpoint answers the MCP endpoint of the server at base, the same
// variable toolplane's command line reads, so one setting serves both.
func endpoint(base string) string {
	if base == "" {
		base = "http://localhost:8080"
	}
	return strings.TrimRight(base, "/") + "/mcp"
}

func run(ctx context.Context, url, key, tool, args string) error {
	if key == "" {
		return fmt.Errorf("no key: pass --key or set TOOLPLANE_DEMO_AGENT_KEY")
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "toolplane-quickstart", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url,
		HTTPClient: &http.Client{Transport: bearer{key}}}, nil)
	if err != nil {
		return fmt.Errorf("connect %s: %w", url, err)
	}
	defer cs.Close()
	for t, err := range cs.Tools(ctx, nil) {
		if err != nil {
			return fmt.Errorf("list tools: %w", err)
		}
		fmt.Printf("tool %-22s %s\n", t.Name, t.Description)
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(args), &arguments); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		return fmt.Errorf("call %s: %w", tool, err)
	}
	fmt.Printf("\n%s (isError=%v):\n", tool, res.IsError)
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			fmt.Println(t.Text)
		}
	}
	if id, ok := res.Meta["toolplane/approval_id"]; ok {
		fmt.Printf("waiting for approval %v\n", id)
	}
	return nil
}

// bearer adds the agent's key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}
