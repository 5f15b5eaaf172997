// Command mcpclient is the MCP half of the README's quickstart: it connects
// to toolplane's /mcp with the demo agent's key, as any MCP client would,
// lists the tools it is shown and calls one.
//
// The server is $TOOLPLANE_SERVER (its /mcp), else http://localhost:8080;
// --url names an MCP endpoint in full.
//
// A call that needs a person's approval is waited for, as an agent would:
// the client says where the approval is, then calls again with the same
// arguments, naming the approval in _meta "toolplane/authorized_by", until
// it is answered (the approved call's result, or the rejection), for at
// most --wait (0: file the approval and return).
//
//	set -a; . toolplane-data/credentials.env; set +a
//	go run ./examples/mcpclient                         # lists the tools, searches tickets
//	go run ./examples/mcpclient demo_add_note '{"ticket_id":"t-1001","text":"Called back."}'
//	go run ./examples/mcpclient demo_refund_order '{"order_id":"o-501","amount_cents":4990,"reason":"cracked"}'   # waits for a person
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	url := flag.String("url", endpoint(os.Getenv("TOOLPLANE_SERVER")), "toolplane's MCP endpoint (default $TOOLPLANE_SERVER/mcp)")
	key := flag.String("key", os.Getenv("TOOLPLANE_DEMO_AGENT_KEY"), "an agent's API key ($TOOLPLANE_DEMO_AGENT_KEY)")
	wait := flag.Duration("wait", 10*time.Minute, "how long to wait for a person to answer an approval (0: file it and return)")
	flag.Parse()
	tool, args := "demo_search_tickets", `{"query":"cracked"}`
	if flag.NArg() >= 1 {
		tool = flag.Arg(0)
	}
	if flag.NArg() >= 2 {
		args = flag.Arg(1)
	}
	if err := run(context.Background(), os.Stdout, *url, *key, tool, args, *wait); err != nil {
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

// pollEvery is how often a call waiting for approval is asked again.
var pollEvery = 2 * time.Second

func run(ctx context.Context, out io.Writer, url, key, tool, args string, wait time.Duration) error {
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
		fmt.Fprintf(out, "tool %-22s %s\n", t.Name, t.Description)
	}
	var arguments map[string]any
	if err := json.Unmarshal([]byte(args), &arguments); err != nil {
		return fmt.Errorf("arguments: %w", err)
	}
	params := &mcp.CallToolParams{Name: tool, Arguments: arguments}
	res, err := cs.CallTool(ctx, params)
	if err != nil {
		return fmt.Errorf("call %s: %w", tool, err)
	}
	show(out, tool, res)
	id, waiting := res.Meta["toolplane/approval_id"].(string)
	if !waiting {
		return nil
	}
	if wait <= 0 {
		fmt.Fprintf(out, "approval %s filed; not waiting (-wait 0): call again with the same arguments and _meta {\"toolplane/authorized_by\": %q} once a person answered it\n", id, id)
		return nil
	}
	fmt.Fprintf(out, "waiting up to %s for a person to answer approval %s (in the console, or `toolplane approvals approve %s`)...\n", wait, id, id)
	// The same arguments, naming the approval: answered "still waiting"
	// until a person decides, then the approved call's result (it ran
	// once, in the background) or the rejection.
	params.Meta = mcp.Meta{"toolplane/authorized_by": id}
	deadline := time.Now().Add(wait)
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollEvery):
		}
		res, err = cs.CallTool(ctx, params)
		if err != nil {
			return fmt.Errorf("call %s: %w", tool, err)
		}
		if !stillWaiting(res) {
			show(out, tool, res)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("approval %s was not answered within %s; call again with the same arguments and _meta {\"toolplane/authorized_by\": %q}", id, wait, id)
		}
	}
}

// stillWaiting reports whether a call naming its approval was answered
// that the approval is still pending, or that the approved call is still
// running: both mean ask again later.
func stillWaiting(res *mcp.CallToolResult) bool {
	if _, ok := res.Meta["toolplane/retry_after_seconds"]; ok {
		return true
	}
	details, _ := res.Meta["toolplane/approval"].(map[string]any)
	return details["status"] == "pending"
}

// show prints one answer of tool.
func show(out io.Writer, tool string, res *mcp.CallToolResult) {
	fmt.Fprintf(out, "\n%s (isError=%v):\n", tool, res.IsError)
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			fmt.Fprintln(out, t.Text)
		}
	}
}

// bearer adds the agent's key to every request.
type bearer struct{ key string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.key)
	return http.DefaultTransport.RoundTrip(r)
}
