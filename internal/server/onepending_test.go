package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// concurrentCalls is how many identical calls the tests send at once.
const concurrentCalls = 12

// startOnePending serves the demo on database (in dir) and answers the
// server, the demo agent's key and an approver's.
func startOnePending(t *testing.T, dir, database string) (e *e2e, agent, approver string) {
	t.Helper()
	e = &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
	e.cfg = Config{Addr: "127.0.0.1:0", Database: database, DataDir: dir, Demo: true}
	e.start(t, dir)
	agent = readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
	if agent == "" {
		t.Fatal("the demo wrote no agent key")
	}
	approver = e.mintKey(t, e.admin, `{"kind":"person","subject":"ada","roles":["approver"]}`)
	return e, agent, approver
}

// onePendingBackends are the stores the tests run on: SQLite always,
// PostgreSQL when the test server is set.
func onePendingBackends() map[string]func(t *testing.T, dir string) string {
	backends := map[string]func(t *testing.T, dir string) string{
		"sqlite": func(_ *testing.T, dir string) string { return filepath.Join(dir, "toolplane.db") },
	}
	if _, ok := pgtest.LookupDSN(); ok {
		backends["postgres"] = func(t *testing.T, _ string) string { return pgtest.SchemaDSN(t, pgtest.DSN(t)) }
	}
	return backends
}

// pendingRefunds answers the IDs of the pending approvals of
// demo.refund_order whose arguments hold the order id.
func pendingRefunds(t *testing.T, e *e2e, approver, order string) []string {
	t.Helper()
	list := e.must(t, "GET", "/v1/approvals?status=pending&limit=1000", approver, "", http.StatusOK)
	items, _ := list["items"].([]any)
	var ids []string
	for _, it := range items {
		a, _ := it.(map[string]any)
		args, _ := json.Marshal(a["arguments"])
		if a["tool"] == "demo.refund_order" && strings.Contains(string(args), `"`+order+`"`) {
			ids = append(ids, a["id"].(string))
		}
	}
	return ids
}

// TestIdenticalCallsAtOnceFileOneApproval: identical REST calls of a tool
// that needs a person's approval, sent at the same moment, file one
// approval, on either store: every call is answered 202 with the same
// approval, and one approval waits. It holds for a call identified by its
// run (its key derived) and for one carrying the caller's own key.
func TestIdenticalCallsAtOnceFileOneApproval(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e, agent, approver := startOnePending(t, dir, database(t, dir))
			tests := []struct {
				name, order, body string
			}{
				{"the key derived from the run", "o-501", `{"arguments":{"order_id":"o-501","amount_cents":1200,"reason":"damaged"},"run_id":"run-at-once"}`},
				{"the caller's key", "o-502", `{"arguments":{"order_id":"o-502","amount_cents":1300,"reason":"late"},"run_id":"run-at-once","idempotency_key":"refund-o-502"}`},
			}
			for _, tt := range tests {
				start := make(chan struct{})
				ids := make([]string, concurrentCalls)
				var wg sync.WaitGroup
				for i := range concurrentCalls {
					wg.Go(func() {
						req, err := http.NewRequest("POST", e.base+"/v1/tools/demo.refund_order/invoke", strings.NewReader(tt.body))
						if err != nil {
							t.Error(err)
							return
						}
						req.Header.Set("Content-Type", "application/json")
						req.Header.Set("Authorization", "Bearer "+agent)
						<-start
						resp, err := http.DefaultClient.Do(req)
						if err != nil {
							t.Error(err)
							return
						}
						defer resp.Body.Close()
						raw, _ := io.ReadAll(resp.Body)
						var got struct {
							Approval struct {
								ID string `json:"id"`
							} `json:"approval"`
						}
						if json.Unmarshal(raw, &got); resp.StatusCode != http.StatusAccepted || got.Approval.ID == "" {
							t.Errorf("%s: call %d: %d %s; want 202 and an approval", tt.name, i, resp.StatusCode, raw)
						}
						ids[i] = got.Approval.ID
					})
				}
				close(start)
				wg.Wait()
				answered := slices.Compact(slices.Sorted(slices.Values(ids)))
				if len(answered) != 1 {
					t.Errorf("%s: %d identical calls at once were answered the approvals %q; want one", tt.name, concurrentCalls, answered)
				}
				if pending := pendingRefunds(t, e, approver, tt.order); len(pending) != 1 {
					t.Errorf("%s: %d identical calls at once filed the approvals %q; want one", tt.name, concurrentCalls, pending)
				}
			}
		})
	}
}

// TestOneKeyInTwoSessionsIsOneApproval: an MCP client that repeats a call
// with the same _meta idempotency key in a new session (a reconnect, a
// client that opens a session per call) asks a person once: the second
// session is answered the first one's approval, and when a person
// rejects it, the call is rejected in both sessions and no new approval
// is filed.
func TestOneKeyInTwoSessionsIsOneApproval(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e, agent, approver := startOnePending(t, dir, database(t, dir))
			args := map[string]any{"order_id": "o-503", "amount_cents": 1400, "reason": "twice asked"}
			meta := mcp.Meta{"toolplane/idempotency_key": "refund-o-503"}
			call := func(cs *mcp.ClientSession) (*mcp.CallToolResult, string) {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_refund_order", Arguments: args, Meta: meta})
				if err != nil {
					t.Fatalf("MCP call: %v", err)
				}
				raw, _ := json.Marshal(res)
				return res, string(raw)
			}
			first, second := e.mcpSession(t, agent), e.mcpSession(t, agent)
			res1, raw1 := call(first)
			res2, raw2 := call(second)
			id1, _ := res1.Meta["toolplane/approval_id"].(string)
			id2, _ := res2.Meta["toolplane/approval_id"].(string)
			if id1 == "" || id2 != id1 {
				t.Fatalf("the same key in two sessions: approvals %q and %q; want one\nfirst: %s\nsecond: %s", id1, id2, raw1, raw2)
			}
			if !strings.Contains(raw2, "Still waiting for approval "+id1) {
				t.Errorf("the second session is not told the call already waits: %s", raw2)
			}
			if pending := pendingRefunds(t, e, approver, "o-503"); len(pending) != 1 {
				t.Fatalf("pending approvals of the call: %q; want one", pending)
			}

			e.must(t, "POST", "/v1/approvals/"+id1+"/reject", approver, `{"reason":"not this one"}`, http.StatusOK)
			for i, cs := range []*mcp.ClientSession{first, second, e.mcpSession(t, agent)} {
				res, raw := call(cs)
				if !res.IsError || !strings.Contains(raw, "rejected") || strings.Contains(raw, "Approval required") {
					t.Errorf("session %d after the rejection: %s; want the call rejected", i+1, raw)
				}
			}
			if pending := pendingRefunds(t, e, approver, "o-503"); len(pending) != 0 {
				t.Errorf("after the rejection the call filed %q; want nothing pending", pending)
			}
		})
	}
}

// TestAKeyWithoutARunScopesTheApproval: a REST call of a tool that needs
// approval, with an idempotency_key and no run_id, is filed (the key
// scopes the approval) and never answered as a fault; the same call again
// is the same approval. Without either it is refused at the door, naming
// run_id.
func TestAKeyWithoutARunScopesTheApproval(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e, agent, approver := startOnePending(t, dir, filepath.Join(dir, "toolplane.db"))
	body := `{"arguments":{"order_id":"o-501","amount_cents":1500,"reason":"no run"},"idempotency_key":"refund-o-504"}`
	var ids []string
	for i := range 2 {
		status, got := e.do(t, "POST", "/v1/tools/demo.refund_order/invoke", agent, body)
		var filed struct {
			Approval struct {
				ID string `json:"id"`
			} `json:"approval"`
		}
		if json.Unmarshal([]byte(got), &filed); status != http.StatusAccepted || filed.Approval.ID == "" {
			t.Fatalf("call %d with a key and no run: %d %s; want 202 and an approval", i+1, status, got)
		}
		ids = append(ids, filed.Approval.ID)
	}
	if ids[0] != ids[1] {
		t.Errorf("the same keyed call twice filed %v; want one approval", ids)
	}
	if pending := pendingRefunds(t, e, approver, "o-501"); len(pending) != 1 {
		t.Errorf("pending approvals of the call: %q; want one", pending)
	}
	// Approved, the call runs under its key: asked again, it is answered.
	e.must(t, "POST", "/v1/approvals/"+ids[0]+"/approve", approver, "", http.StatusOK)
	deadline := time.Now().Add(30 * time.Second)
	for {
		status, got := e.do(t, "POST", "/v1/tools/demo.refund_order/invoke", agent, body)
		if status == http.StatusOK && strings.Contains(got, `"ok":true`) {
			break
		}
		if status >= 500 || time.Now().After(deadline) {
			t.Fatalf("the approved keyed call: %d %s", status, got)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// Neither a run nor a key: refused at the door, naming run_id.
	status, got := e.do(t, "POST", "/v1/tools/demo.refund_order/invoke", agent, `{"arguments":{"order_id":"o-505","amount_cents":1500,"reason":"nothing"}}`)
	if status != http.StatusBadRequest || !strings.Contains(got, "run_id") {
		t.Errorf("a call with neither run nor key: %d %s; want 400 naming run_id", status, got)
	}
}
