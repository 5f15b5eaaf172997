package server

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// callbackUpstream is an MCP server whose one tool, bounce, calls back
// into toolplane's /mcp, calling bounce again through toolplane with the
// _meta it was sent, as a server that itself calls tools passes on the
// time and hops it was given. It records the _meta of every call it got.
type callbackUpstream struct {
	url string
	// toolplane and key are where and as whom it calls back, set once
	// toolplane is up.
	toolplane, key string
	mu             sync.Mutex
	seen           []mcp.Meta
}

func newCallbackUpstream(t *testing.T) *callbackUpstream {
	t.Helper()
	u := &callbackUpstream{}
	srv := mcp.NewServer(&mcp.Implementation{Name: "loop", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "bounce", Description: "Calls itself again through toolplane, passing on the time and hops it was given."},
		func(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			u.mu.Lock()
			u.seen = append(u.seen, req.Params.Meta)
			depth := len(u.seen)
			u.mu.Unlock()
			if depth > 20 {
				// A guard for the test itself: a chain that was not cut.
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "runaway"}}}, nil, nil
			}
			meta := mcp.Meta{}
			for _, k := range []string{toolplane.MetaRemainingHops, toolplane.MetaTimeoutMS} {
				if v, ok := req.Params.Meta[k]; ok {
					meta[k] = v
				}
			}
			text, err := u.callBack(ctx, meta)
			if err != nil {
				return nil, nil, err
			}
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil, nil
		})
	u.url = serveLoopback(t, mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	return u
}

// callBack calls bounce through toolplane's /mcp with meta and answers
// the text of what toolplane answered.
func (u *callbackUpstream) callBack(ctx context.Context, meta mcp.Meta) (string, error) {
	return callBounce(ctx, u.toolplane, u.key, meta)
}

// callBounce calls mcp.loop.bounce on toolplane at base, as key, with
// meta, and answers the text of its result.
func callBounce(ctx context.Context, base, key string, meta mcp.Meta) (string, error) {
	c := mcp.NewClient(&mcp.Implementation{Name: "bouncer", Version: "1"}, nil)
	s, err := c.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: base + "/mcp", HTTPClient: &http.Client{Transport: bearer{key: key}}}, nil)
	if err != nil {
		return "", fmt.Errorf("connect: %w", err)
	}
	defer s.Close()
	name := ""
	for tool, err := range s.Tools(ctx, nil) {
		if err != nil {
			return "", err
		}
		if strings.Contains(tool.Name, "bounce") {
			name = tool.Name
		}
	}
	if name == "" {
		return "", fmt.Errorf("toolplane lists no bounce tool")
	}
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: map[string]any{}, Meta: meta})
	if err != nil {
		return "", fmt.Errorf("call: %w", err)
	}
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String(), nil
}

// An upstream MCP server that calls back into toolplane with the _meta it
// was sent is counted down hop by hop, whatever door it comes back by: a
// chain of calls calling calls ends at max_hops_exceeded, with nothing
// run past it, and each call's time is at most what the call above it had
// left.
func TestUpstreamCallingBackIsCountedDown(t *testing.T) {
	t.Parallel()
	up := newCallbackUpstream(t)
	dir := t.TempDir()
	no := false
	cfg := Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), Demo: true, Stdout: &strings.Builder{},
		Upstreams: []upstream.Config{{Slug: "loop", URL: up.url, Timeout: 20 * time.Second,
			Tools: map[string]upstream.Relax{"bounce": {Effect: toolplane.EffectRead, RequiresApproval: &no}}}}}
	s, err := New(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- s.Run(ctx) }()
	t.Cleanup(func() { stop(); <-ran })
	base := "http://" + s.Addr()
	creds := readCreds(t, dir)
	agent, admin := creds["TOOLPLANE_DEMO_AGENT_KEY"], creds["TOOLPLANE_ADMIN_KEY"]
	if status, got := post(t, base, "/v1/grants", admin, `{"agent_id":"demo-agent","pattern":"mcp.loop.*"}`); status != http.StatusCreated {
		t.Fatalf("grant: %d %s", status, got)
	}
	up.toolplane, up.key = base, agent

	callCtx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var text string
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The upstream's tools are ingested in the background.
		text, err = callBounce(callCtx, base, agent, mcp.Meta{toolplane.MetaRemainingHops: 3, toolplane.MetaTimeoutMS: 15000})
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text, string(toolplane.CodeMaxHopsExceeded)) {
		t.Fatalf("the chain answered %q, want max_hops_exceeded at its end", text)
	}
	up.mu.Lock()
	defer up.mu.Unlock()
	// Asked 3: the server is sent 2, then (called back with 2) 1, then 0,
	// then -1, with which its call back is refused before anything runs.
	var hops []int
	last := 15000.0
	for i, m := range up.seen {
		h, _ := m[toolplane.MetaRemainingHops].(float64)
		hops = append(hops, int(h))
		ms, _ := m[toolplane.MetaTimeoutMS].(float64)
		if ms <= 0 || ms > last {
			t.Errorf("call %d was given %vms after its caller had %vms", i, ms, last)
		}
		last = ms
	}
	if fmt.Sprint(hops) != "[2 1 0 -1]" {
		t.Fatalf("the server was sent remaining hops %v, want [2 1 0 -1]", hops)
	}
}
