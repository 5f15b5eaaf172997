package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// A call to an upstream MCP server tells it, in the call's _meta, the time
// the call has left and one hop fewer than the call had: a server that
// calls back into toolplane passes them on, and is counted down.
func TestUpstreamCallSendsTheTimeAndHopsLeft(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen []mcp.Meta
	srv := mcp.NewServer(&mcp.Implementation{Name: "metas", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "peek", Description: "Answer what the call carried."},
		func(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, any, error) {
			mu.Lock()
			seen = append(seen, req.Params.Meta)
			mu.Unlock()
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "seen"}}}, nil, nil
		})
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: hs.URL, Timeout: 5 * time.Second, Tools: map[string]upstream.Relax{
		"peek": {Effect: toolplane.EffectRead, RequiresApproval: no()},
	}})
	eventually(t, "the tool ingested", func() bool { _, ok := e.reg.Get("", "mcp.up.peek"); return ok })

	for _, tt := range []struct {
		hops     int
		deadline time.Duration // 0: none asked
		maxMS    int64
	}{
		{hops: 8, maxMS: 5000},
		{hops: 1, deadline: 2 * time.Second, maxMS: 2000},
		{hops: 0, maxMS: 5000}, // the server is told it may call nothing back
	} {
		inv := e.inv("run-1")
		inv.Hops = tt.hops
		if tt.deadline > 0 {
			inv.Deadline = time.Now().Add(tt.deadline)
		}
		r, err := e.iv.InvokeJSON(e.ctx, "mcp.up.peek", []byte(`{}`), inv)
		if err != nil || !r.OK {
			t.Fatalf("hops %d: %+v, %v", tt.hops, r, err)
		}
		mu.Lock()
		m := seen[len(seen)-1]
		mu.Unlock()
		hops, _ := m[toolplane.MetaRemainingHops].(float64)
		ms, _ := m[toolplane.MetaTimeoutMS].(float64)
		if int(hops) != tt.hops-1 || ms <= 0 || int64(ms) > tt.maxMS || ms < float64(tt.maxMS)/2 {
			t.Errorf("hops %d, deadline %v: the server saw _meta %v; want remaining_hops %d and timeout_ms within %d", tt.hops, tt.deadline, m, tt.hops-1, tt.maxMS)
		}
	}
}
