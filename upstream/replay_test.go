package upstream_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/upstream"
)

// keyedServer is an MCP server whose charge tools make one effect per
// idempotency key, as a server that honours the key does; the first call
// of each tool answers too late.
type keyedServer struct {
	mu      sync.Mutex
	keys    map[string][]string // tool -> keys seen, in order
	answers map[string]int
}

func startKeyedServer(t *testing.T) (*keyedServer, string) {
	t.Helper()
	k := &keyedServer{keys: map[string][]string{}, answers: map[string]int{}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "keyed", Version: "1"}, nil)
	for _, name := range []string{"charge", "charge_plain"} {
		mcp.AddTool(srv, &mcp.Tool{Name: name, Description: "Charge a card."},
			func(ctx context.Context, req *mcp.CallToolRequest, in struct {
				Cents int `json:"cents"`
			}) (*mcp.CallToolResult, any, error) {
				key, _ := req.Params.Meta["toolplane/idempotency_key"].(string)
				k.mu.Lock()
				k.keys[name] = append(k.keys[name], key)
				first := len(k.keys[name]) == 1
				k.mu.Unlock()
				if first {
					select { // the answer is lost: toolplane stops waiting first
					case <-ctx.Done():
					case <-time.After(2 * time.Second):
					}
				}
				return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "charged"}}}, nil, nil
			})
	}
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil))
	t.Cleanup(hs.Close)
	return k, hs.URL
}

// effects answers how many effects the server made for tool: one per
// distinct key.
func (k *keyedServer) effects(tool string) (effects, calls int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	seen := map[string]bool{}
	for _, key := range k.keys[tool] {
		seen[key] = true
	}
	return len(seen), len(k.keys[tool])
}

// An owner may declare that a remote tool's server honours the idempotency
// key: a call whose answer was lost may then run again with the same key,
// one effect at the server, instead of waiting uncertain for a person. A
// tool without the declaration is never repeated.
func TestIdempotentDownstreamMakesALostCallReplayable(t *testing.T) {
	k, url := startKeyedServer(t)
	e := newEnv(t, nil, upstream.Config{Slug: "up", URL: url, Timeout: 300 * time.Millisecond, Tools: map[string]upstream.Relax{
		"charge":       {Effect: toolplane.EffectWrite, RequiresApproval: no(), IdempotentDownstream: true, MaxAttempts: 2},
		"charge_plain": {Effect: toolplane.EffectWrite, RequiresApproval: no()},
	}})
	inv := e.inv("run-1")
	inv.Principal.Tools = []string{"mcp.up.charge", "mcp.up.charge_plain"}
	call := func(tool string) toolplane.Result {
		t.Helper()
		r, err := e.iv.InvokeJSON(e.ctx, tool, []byte(`{"cents":500}`), inv)
		if err != nil {
			t.Fatalf("%s: %v", tool, err)
		}
		return r
	}
	eventually(t, "the tools ingested", func() bool {
		_, a := e.reg.Get("", "mcp.up.charge")
		_, b := e.reg.Get("", "mcp.up.charge_plain")
		return a && b
	})
	if tool, _ := e.reg.Get("", "mcp.up.charge"); tool.Def.Replay == nil || tool.Def.Replay.MaxAttempts != 2 {
		t.Fatalf("declared tool's replay = %+v", tool.Def.Replay)
	}

	// Declared: the lost answer is a timeout the caller may repeat; the
	// repeat runs with the same key and answers.
	if r := call("mcp.up.charge"); r.OK || r.Error.Code != toolplane.CodeTimeout || !strings.Contains(r.Error.Message, "safe to call again") {
		t.Fatalf("first declared call: %+v", r)
	}
	if r := call("mcp.up.charge"); !r.OK {
		t.Fatalf("repeated declared call: %+v", r.Error)
	}
	if effects, calls := k.effects("charge"); effects != 1 || calls != 2 {
		t.Fatalf("declared tool: %d effects in %d calls; want one effect, the key sent twice", effects, calls)
	}

	// Not declared: the lost answer is an uncertain action, and the repeat
	// is answered so without reaching the server.
	if r := call("mcp.up.charge_plain"); r.OK || r.Error.Code != toolplane.CodeUncertain {
		t.Fatalf("first plain call: %+v", r)
	}
	if r := call("mcp.up.charge_plain"); r.OK || r.Error.Code != toolplane.CodeUncertain {
		t.Fatalf("repeated plain call: %+v", r)
	}
	if _, calls := k.effects("charge_plain"); calls != 1 {
		t.Fatalf("plain tool reached the server %d times; want once", calls)
	}
}

// The declaration is checked: it is for a write or send, and a bound on
// attempts needs it.
func TestIdempotentDownstreamIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		relax upstream.Relax
		want  string
	}{
		{"read", upstream.Relax{Effect: toolplane.EffectRead, IdempotentDownstream: true}, "idempotent_downstream is for a write or send"},
		{"attempts alone", upstream.Relax{MaxAttempts: 2}, "max_attempts needs idempotent_downstream"},
		{"too many attempts", upstream.Relax{IdempotentDownstream: true, MaxAttempts: 1000}, "outside 1..100"},
		{"negative attempts", upstream.Relax{IdempotentDownstream: true, MaxAttempts: -1}, "outside 1..100"},
		{"declared", upstream.Relax{IdempotentDownstream: true}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := upstream.Check([]upstream.Config{{Slug: "up", URL: "http://127.0.0.1:1", Tools: map[string]upstream.Relax{"x": tt.relax}}})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check = %v; want %q", err, tt.want)
			}
		})
	}
}

// A connection provider authorizes calls over HTTP: it is refused for a
// stdio server, and must be a provider's name.
func TestConnectionIsChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  upstream.Config
		want string
	}{
		{"url", upstream.Config{Slug: "up", URL: "http://127.0.0.1:1", Connection: "notes"}, ""},
		{"command", upstream.Config{Slug: "up", Command: []string{"server"}, Connection: "notes"}, "connection applies to a url upstream only"},
		{"not a provider", upstream.Config{Slug: "up", URL: "http://127.0.0.1:1", Connection: "Notes App"}, "connection must name a provider"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := upstream.Check([]upstream.Config{tt.cfg})
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Check = %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Check = %v; want %q", err, tt.want)
			}
		})
	}
}
