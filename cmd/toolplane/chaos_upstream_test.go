package main_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// countingTool is the write tool the counting upstream exposes; toolplane
// ingests it as mcp.<slug>.write.
const countingTool = "write"

// idempotencyMeta is the _meta key under which toolplane passes a call's
// idempotency key to an upstream (upstream/call.go), and under which an MCP
// client passes its own key to toolplane's MCP door.
const idempotencyMeta = "toolplane/idempotency_key"

// effect is one application of the counting tool: the downstream system
// changed once.
type effect struct {
	// Key is the idempotency key toolplane sent in _meta ("" if none).
	Key string
	At  time.Time
}

// countingUpstream is an MCP server on loopback standing for a downstream
// system that applies every call it receives: it does not deduplicate, so
// it counts exactly how many effects each action had. Effects are counted
// by the action's id (the tool's one argument), which the test's agents
// choose, one per action, whatever door and session they call through.
type countingUpstream struct {
	URL string

	mu      sync.Mutex
	effects map[string][]effect
}

// newCountingUpstream starts the server; it lives as long as the test and
// is never killed, so every effect it counts is the truth.
func newCountingUpstream(t *testing.T) *countingUpstream {
	t.Helper()
	u := &countingUpstream{effects: map[string][]effect{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "chaos-counter", Version: "1"}, nil)
	srv.AddTool(&mcp.Tool{
		Name:        countingTool,
		Description: "Apply one change, named by id, to the downstream system.",
		InputSchema: json.RawMessage(`{"type":"object","required":["id"],"properties":{"id":{"type":"string"}},"additionalProperties":false}`),
	}, u.write)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	u.URL = hs.URL
	return u
}

// write applies the change. It pauses before and after the effect so a
// SIGKILL of the calling node lands, often enough, between the dispatch
// and the effect and between the effect and the answer: the two windows
// an exactly-once promise has to survive.
func (u *countingUpstream) write(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
	var args struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(req.Params.Arguments, &args); err != nil || args.ID == "" {
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "id is required"}}}, nil
	}
	key, _ := req.Params.Meta[idempotencyMeta].(string)
	time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
	u.mu.Lock()
	u.effects[args.ID] = append(u.effects[args.ID], effect{Key: key, At: time.Now()})
	n := len(u.effects[args.ID])
	u.mu.Unlock()
	time.Sleep(time.Duration(20+rand.IntN(100)) * time.Millisecond)
	return &mcp.CallToolResult{
		Content:           []mcp.Content{&mcp.TextContent{Text: "applied " + args.ID}},
		StructuredContent: map[string]any{"id": args.ID, "applied": n},
	}, nil
}

// Effects answers a copy of every action's effects.
func (u *countingUpstream) Effects() map[string][]effect {
	u.mu.Lock()
	defer u.mu.Unlock()
	out := make(map[string][]effect, len(u.effects))
	for id, es := range u.effects {
		out[id] = append([]effect(nil), es...)
	}
	return out
}
