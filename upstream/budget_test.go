package upstream_test

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/apikey"
	"github.com/toolplane/toolplane/internal/allocbudget"
	"github.com/toolplane/toolplane/internal/loadtest"
	"github.com/toolplane/toolplane/upstream"
)

// budgetFederatedCall is the allocation budget of one governed call of a
// federated tool (issue 35), a little above the figure measured when it
// was set: measured 375 allocs per call (2026-12-06, the governed
// copy's answer written in one pass by mcpserver's encodeCallAnswer;
// 378 before, 380–382 after the response decoded in one pass by pooled
// decoders and the configured headers set without cloning the request;
// 410 at 254aa2f). The
// figure holds the plain server's half of the call too (see
// TestAllocBudgetFederatedCall). An optimisation that lowers the figure
// lowers the budget in the same change.
const budgetFederatedCall = 388

// fedFixture is toolplane governing the plain MCP server toolplane-load
// measures (the demo read tool, loadtest.PlainHandler) as the upstream
// "plain", with a session open on the governed copy (/mcp/plain), and
// every request that reaches the plain server counted.
type fedFixture struct {
	e            *env
	h            http.Handler // the governed copy's handler
	sid, version string
	// requests counts the requests that reached the plain server, by HTTP
	// method.
	mu       sync.Mutex
	requests map[string]int
}

func newFedFixture(tb testing.TB) *fedFixture {
	tb.Helper()
	plain, err := loadtest.PlainHandler()
	if err != nil {
		tb.Fatal(err)
	}
	f := &fedFixture{requests: map[string]int{}}
	hs := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		f.requests[r.Method]++
		f.mu.Unlock()
		plain.ServeHTTP(w, r)
	}))
	tb.Cleanup(hs.Close)
	f.e = newEnv(tb, nil, upstream.Config{Slug: "plain", URL: hs.URL,
		Tools: map[string]upstream.Relax{"demo_search_tickets": {Effect: toolplane.EffectRead, RequiresApproval: no()}}})
	// As serve wires the door: keys from the cache.
	f.e.mcp.Door.Keys = apikey.NewCache(0, time.Hour)
	f.h = f.e.mcp.UpstreamHandler("plain")
	cs := f.e.clientFor(tb, f.h, nil)
	f.sid, f.version = cs.ID(), cs.InitializeResult().ProtocolVersion
	return f
}

// callBody is the tools/call toolplane-load sends.
const callBody = `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"demo_search_tickets","arguments":{"query":"cracked"}}}`

// request answers a tools/call of the fixture's session on the governed
// copy, as the agent's client sends it.
func (f *fedFixture) request() *http.Request {
	r := httptest.NewRequestWithContext(context.Background(), http.MethodPost, "http://127.0.0.1/mcp/plain", strings.NewReader(callBody))
	r.RemoteAddr = "127.0.0.1:40000"
	for k, v := range map[string]string{"Authorization": "Bearer " + f.e.key, "Content-Type": "application/json",
		"Accept": "application/json, text/event-stream", "Mcp-Session-Id": f.sid, "Mcp-Protocol-Version": f.version} {
		r.Header.Set(k, v)
	}
	return r
}

// check fails tb unless w holds the demo tool's answer.
func check(tb testing.TB, w *httptest.ResponseRecorder) {
	tb.Helper()
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), "t-1001") {
		tb.Fatalf("%d %s", w.Code, w.Body)
	}
}

func (f *fedFixture) counted() map[string]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.requests)
}

// A governed call of a federated tool is one request to the server: the
// session toolplane opened is reused, and nothing is listed, initialised
// or opened per call.
func TestFederatedCallIsOneRequestUpstream(t *testing.T) {
	f := newFedFixture(t)
	before := f.counted()
	const calls = 20
	for range calls {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, f.request())
		check(t, w)
	}
	after := f.counted()
	for method, n := range after {
		if want := before[method] + map[string]int{http.MethodPost: calls}[method]; n != want {
			t.Errorf("%d calls sent %d %s requests upstream, want %d", calls, n-before[method], method, want-before[method])
		}
	}
	if after[http.MethodPost] == before[http.MethodPost] {
		t.Error("no call reached the server")
	}
}

// BenchmarkFederatedCall is one tools/call of an established session on
// the governed copy of the plain server, through the whole door and the
// lean path to the server over loopback. The plain server shares the
// process, so its work is in the figures too.
func BenchmarkFederatedCall(b *testing.B) {
	f := newFedFixture(b)
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, f.request())
		check(b, w)
	}
}

// TestAllocBudgetFederatedCall holds the allocations of
// BenchmarkFederatedCall's call under budgetFederatedCall. The requests
// and recorders are made before the measurement. The plain server's half
// of the call (its SDK handler, the demo tool) is counted with
// toolplane's: AllocsPerRun counts the whole process.
//
// Not parallel: testing.AllocsPerRun refuses to run beside other tests.
func TestAllocBudgetFederatedCall(t *testing.T) {
	allocbudget.Skip(t)
	f := newFedFixture(t)
	const warm, runs = 20, 200
	reqs := make([]*http.Request, warm+runs+1)
	recs := make([]*httptest.ResponseRecorder, len(reqs))
	for i := range reqs {
		reqs[i], recs[i] = f.request(), httptest.NewRecorder()
	}
	i := 0
	allocbudget.Check(t, "call", budgetFederatedCall, warm, runs, func() {
		f.h.ServeHTTP(recs[i], reqs[i])
		check(t, recs[i])
		i++
	})
}
