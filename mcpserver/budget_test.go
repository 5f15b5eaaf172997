package mcpserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/internal/allocbudget"
	"github.com/toolplane/toolplane/ratelimit"
)

// budgetMCPReadCall is the allocation budget of one read call through the
// MCP door (issue 35), a little above the figure measured when it was set:
// measured 105 allocs per call (2026-12-06, the answer written in one
// pass by encodeCallAnswer; 109 with the arguments read by
// jsondec.Value; 113 after the audit insert outside a transaction and the
// cuts beside it, 148 before them, 203 at 879b4e3d). An optimisation that
// lowers the figure lowers the budget in the same change.
const budgetMCPReadCall = 110

// TestAllocBudgetMCPReadCall is BenchmarkFastPathCall's tools/call of an
// established session through the whole door (host check, key cache, rate
// limits, the fast path, the invoker and its audit event, stored before
// the answer), served by a direct ServeHTTP call: no socket, so only the
// door and what is behind it are counted. The requests and recorders are
// made before the measurement.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetMCPReadCall(t *testing.T) {
	allocbudget.Skip(t)
	f := newFastFixture(t, 0)
	f.s.Door.Keys = apikey.NewCache(0, time.Hour)
	f.s.Door.Limiter = ratelimit.New(1<<30, time.Minute)
	h := f.s.Handler()
	cs := f.connect(t)
	sid, version := cs.ID(), cs.InitializeResult().ProtocolVersion
	const warm, runs = 20, 200
	reqs := make([]*http.Request, warm+runs+1)
	recs := make([]*httptest.ResponseRecorder, len(reqs))
	for i := range reqs {
		r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"crm_lookup","arguments":{"id":"c-1"}}}`))
		r.RemoteAddr = "127.0.0.1:40000"
		for k, v := range map[string]string{"Authorization": "Bearer " + f.keyA, "Content-Type": "application/json",
			"Accept": "application/json, text/event-stream", "Mcp-Session-Id": sid, "Mcp-Protocol-Version": version} {
			r.Header.Set(k, v)
		}
		reqs[i], recs[i] = r, httptest.NewRecorder()
	}
	i := 0
	call := func() {
		h.ServeHTTP(recs[i], reqs[i])
		if w := recs[i]; w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "Ada") {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		i++
	}
	allocbudget.Check(t, "call", budgetMCPReadCall, warm, runs, call)
}
