package server

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
)

// The invariants connections keep across the platform's other features,
// each on a whole server (see startE2E).

// An HTTP tool published through the registry's REST routes, with no Go
// written, is served once approved: an agent granted it calls it through
// the organization's connection, and the call is audited with the
// connection's ID.
func TestPublishedHTTPToolCallsThroughAConnection(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	owner := e.mintKey(t, e.admin, `{"kind":"person","subject":"bea","roles":["tool_owner:billing"]}`)
	def := httpTool("billing.order_status", "read", "orders", map[string]any{"method": "GET", "url": e.api.url + "/orders/{id}"})
	def["owner"] = "billing"
	raw, _ := json.Marshal(def)
	pub := e.must(t, "POST", "/v1/registry/tools", owner, string(raw), http.StatusCreated)
	if pub["state"] != string(toolplane.StateInReview) {
		t.Fatalf("the first tool of a team published %v; want it in review", pub)
	}
	// Not callable before its review.
	e.must(t, "POST", "/v1/grants", e.admin, `{"agent_id":"shop-agent","pattern":"billing.*"}`, http.StatusCreated)
	if r := e.call(t, e.agent, "billing.order_status", map[string]any{"id": "ord_1"}, "run-early", ""); r.OK {
		t.Fatalf("a version in review answered: %s", r.raw)
	}
	e.must(t, "POST", "/v1/registry/tools/billing.order_status/versions/1.0.0/approve", e.admin, `{"note":"reads one order"}`, http.StatusOK)
	before := e.api.gets.Load()
	r := e.call(t, e.agent, "billing.order_status", map[string]any{"id": "ord_1"}, "run-1", "")
	if !r.OK || r.Data["customer"] != "Ada Lovelace" {
		t.Fatalf("the published tool answered %s", r.raw)
	}
	if e.api.gets.Load() != before+1 {
		t.Errorf("the downstream was reached %d times, want once", e.api.gets.Load()-before)
	}
	// And over MCP, where the tool is listed under its model-facing name.
	cs := e.mcpSession(t, e.agent)
	if text, isErr := mcpCall(t, cs, "billing.order_status", map[string]any{"id": "ord_2"}); isErr {
		t.Errorf("over MCP: %s", text)
	}
	events := e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool {
		return len(toolEvents(evs, "billing.order_status", "ok")) >= 2
	})
	ok := toolEvents(events, "billing.order_status", "ok")
	if len(ok) != 2 {
		t.Fatalf("audit: %d ok events of the published tool, want 2", len(ok))
	}
	for _, ev := range ok {
		if ev.ConnectionID != e.conns["orders"] || ev.ToolVersion != "1.0.0" {
			t.Errorf("audit event %+v: want connection %s and version 1.0.0", ev, e.conns["orders"])
		}
	}
}

// toolEvents answers the events of tool with outcome ("" for any).
func toolEvents(evs []toolplane.AuditEvent, tool, outcome string) []toolplane.AuditEvent {
	var out []toolplane.AuditEvent
	for _, ev := range evs {
		if ev.Tool == tool && (outcome == "" || ev.Outcome == outcome) {
			out = append(out, ev)
		}
	}
	return out
}

// A second organization's administrator cannot see, use or revoke the
// first's connections, and its agent's call of the same tool is refused
// for want of a connection of its own: never served with the first's
// secret.
func TestConnectionsStayInTheirOrganization(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	other := e.mintInOrg(t, "org-2", "root2")
	id := e.conns["orders"]

	if m := e.must(t, "GET", "/v1/connections", other, "", http.StatusOK); len(m["items"].([]any)) != 0 {
		t.Errorf("the second organization lists %v", m["items"])
	}
	for _, rq := range []struct{ method, path, body string }{
		{"GET", "/v1/connections/" + id, ""},
		{"POST", "/v1/connections/" + id + "/revoke", `{"reason":"mine now"}`},
		{"POST", "/v1/connections/" + id + "/authorize", ""},
	} {
		if status, got := e.do(t, rq.method, rq.path, other, rq.body); status != http.StatusNotFound {
			t.Errorf("%s %s by the second organization: %d %s, want 404", rq.method, rq.path, status, got)
		}
	}

	agent2 := e.mintKey(t, other, `{"kind":"agent","subject":"shop-agent","label":"org-2 agent"}`)
	e.must(t, "POST", "/v1/grants", other, `{"agent_id":"shop-agent","pattern":"shop.*"}`, http.StatusCreated)
	before := e.api.gets.Load()
	for _, args := range []map[string]any{
		{"id": "ord_1"},
		{"id": "ord_1", "connection_id": id}, // the first organization's, by its ID
	} {
		r := e.call(t, agent2, "shop.get_order", args, "run-org2", "")
		if r.code() != string(toolplane.CodeConnectionRequired) {
			t.Errorf("the second organization's call %v: %s, want connection_required", args, r.raw)
		}
		if strings.Contains(r.raw, e.token) {
			t.Errorf("the second organization's answer holds the first's secret: %s", r.raw)
		}
	}
	cs := e.mcpSession(t, agent2)
	if text, isErr := mcpCall(t, cs, "shop.get_order", map[string]any{"id": "ord_1", "connection_id": id}); !isErr || !strings.Contains(text, "connection_required") {
		t.Errorf("the second organization's MCP call: %s", text)
	}
	if n := e.api.gets.Load() - before; n != 0 {
		t.Errorf("the downstream was reached %d times by the second organization's calls", n)
	}

	// The first organization's connection is untouched and still serves.
	if m := e.must(t, "GET", "/v1/connections/"+id, e.admin, "", http.StatusOK); m["connection"].(map[string]any)["state"] != "active" {
		t.Errorf("the first organization's connection after the second's attempts: %v", m)
	}
	if r := e.call(t, e.agent, "shop.get_order", map[string]any{"id": "ord_1"}, "run-org1", ""); !r.OK {
		t.Errorf("the first organization's call: %s", r.raw)
	}
	// Each organization's trail holds its own calls only.
	evs2 := e.waitAudit(t, other, func(evs []toolplane.AuditEvent) bool { return len(toolEvents(evs, "shop.get_order", "")) >= 3 })
	for _, ev := range evs2 {
		if ev.OrganizationID != "org-2" || ev.ConnectionID != "" {
			t.Errorf("the second organization's trail holds %+v", ev)
		}
	}
	if got := len(toolEvents(evs2, "shop.get_order", string(toolplane.CodeConnectionRequired))); got != 3 {
		t.Errorf("the second organization's trail holds %d refusals, want 3", got)
	}
}

// A write whose answer is lost after the downstream acted is held
// uncertain, and its retry with the same key never reaches the
// downstream; with an idempotency header the runtime's own retry does
// reach it, with the same key, and the downstream makes one effect.
func TestWritesThroughAConnectionHappenOnce(t *testing.T) {
	t.Parallel()
	t.Run("without an idempotency header", func(t *testing.T) {
		t.Parallel()
		e := startE2E(t)
		args := map[string]any{"id": "hangup", "amount_cents": 500}
		r := e.call(t, e.agent, "shop.refund_once", args, "run-1", "refund-once-1")
		if r.code() != string(toolplane.CodeUncertain) {
			t.Fatalf("a lost answer: %s, want uncertain", r.raw)
		}
		if e.api.requests.Load() != 1 || e.api.effects.Load() != 1 {
			t.Fatalf("the API saw %d requests and made %d refunds, want 1 and 1", e.api.requests.Load(), e.api.effects.Load())
		}
		for _, via := range []string{"REST", "MCP"} {
			if via == "REST" {
				r := e.call(t, e.agent, "shop.refund_once", args, "run-1", "refund-once-1")
				if r.OK {
					t.Errorf("the retry was answered as done: %s", r.raw)
				}
			} else {
				// Over MCP, with the run and the key the REST call had.
				cs := e.mcpSession(t, e.agent)
				text, isErr := mcpCallMeta(t, cs, "shop.refund_once", args, mcp.Meta{"toolplane/run_id": "run-1", "toolplane/idempotency_key": "refund-once-1"})
				if !isErr {
					t.Errorf("the MCP retry was answered as done: %s", text)
				}
			}
			if n := e.api.requests.Load(); n != 1 {
				t.Errorf("after a %s retry the API saw %d requests, want 1", via, n)
			}
		}
		_, held := e.do(t, "GET", "/v1/uncertain", e.admin, "")
		if !strings.Contains(held, "shop.refund_once") {
			t.Errorf("the uncertain list does not hold the write: %s", held)
		}
		if e.api.effects.Load() != 1 {
			t.Errorf("%d refunds made, want 1", e.api.effects.Load())
		}
	})
	t.Run("with an idempotency header", func(t *testing.T) {
		t.Parallel()
		e := startE2E(t)
		args := map[string]any{"id": "hangup", "amount_cents": 500}
		r := e.call(t, e.agent, "shop.refund", args, "run-1", "refund-1")
		if !r.OK {
			t.Fatalf("a lost answer retried with its key: %s", r.raw)
		}
		if e.api.requests.Load() != 2 || e.api.effects.Load() != 1 {
			t.Errorf("the API saw %d requests and made %d refunds, want 2 and 1", e.api.requests.Load(), e.api.effects.Load())
		}
		e.api.mu.Lock()
		keys := slices.Clone(e.api.keysSeen)
		e.api.mu.Unlock()
		if len(keys) != 2 || keys[0] == "" || keys[0] != keys[1] {
			t.Errorf("the attempts carried the keys %q, want one key twice", keys)
		}
		// The call's own retry is answered from the journal.
		again := e.call(t, e.agent, "shop.refund", args, "run-1", "refund-1")
		if !again.OK || again.Data["refund_id"] != r.Data["refund_id"] {
			t.Errorf("the retry answered %s, want the first answer %s", again.raw, r.raw)
		}
		if e.api.requests.Load() != 2 || e.api.effects.Load() != 1 {
			t.Errorf("after the retry the API saw %d requests and made %d refunds, want 2 and 1", e.api.requests.Load(), e.api.effects.Load())
		}
	})
}

// Every call the broker released a connection for is audited with the
// connection's ID, whatever its outcome; a call refused for want of a
// connection is audited too, naming none.
func TestEveryReleaseIsAudited(t *testing.T) {
	t.Parallel()
	e := startE2E(t)
	type call struct {
		tool string
		args map[string]any
		want string
		conn string // the connection released, "" for none
	}
	calls := []call{
		{"shop.get_order", map[string]any{"id": "ord_1"}, "ok", "orders"},
		{"shop.get_order", map[string]any{"id": "echo-500"}, "retryable_upstream", "orders"},
		{"shop.get_order", map[string]any{"id": "slow"}, "timeout", "orders"},
		{"shop.refund", map[string]any{"id": "ord_1", "amount_cents": 100}, "ok", "orders"},
		{"shop.refund_once", map[string]any{"id": "echo-500", "amount_cents": 100}, "uncertain", "orders"},
		{"shop.balance", map[string]any{"id": "echo-403"}, "unavailable", "ledger"},
		{"shop.find_orders", map[string]any{"status": "shipped"}, "ok", "shopdb"},
		{"shop.ship", map[string]any{"id": "ord_1"}, "connection_required", ""},
		{"shop.balance", map[string]any{"id": "acct_1", "connection_id": e.conns["orders"]}, "connection_required", ""},
		{"shop.metadata", map[string]any{"id": "iam"}, "denied", ""},
	}
	for i, c := range calls {
		run := "audit-run-" + string(rune('a'+i))
		if r := e.call(t, e.agent, c.tool, c.args, run, ""); r.code() != c.want {
			t.Errorf("%s %v: %s, want %s", c.tool, c.args, r.raw, c.want)
		}
	}
	runs := map[string]string{}
	for i, c := range calls {
		runs["audit-run-"+string(rune('a'+i))] = c.tool
	}
	events := e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool { return hasRuns(evs, runs) })
	for i, c := range calls {
		run := "audit-run-" + string(rune('a'+i))
		var mine []toolplane.AuditEvent
		for _, ev := range events {
			if ev.RunID == run && ev.Tool == c.tool {
				mine = append(mine, ev)
			}
		}
		if len(mine) == 0 {
			t.Errorf("%s %v: no audit event", c.tool, c.args)
			continue
		}
		ev := mine[0] // the newest: the call's outcome
		if ev.Outcome != c.want || ev.ConnectionID != e.conns[c.conn] {
			t.Errorf("%s %v: audited %s with connection %q, want %s with %q", c.tool, c.args, ev.Outcome, ev.ConnectionID, c.want, e.conns[c.conn])
		}
	}
}
