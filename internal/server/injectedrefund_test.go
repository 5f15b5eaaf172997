package server

import (
	"context"
	"encoding/json"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-jose/go-jose/v4"
	"github.com/go-jose/go-jose/v4/jwt"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/jwtauth"
	"github.com/toolplane/toolplane/policy"
	"github.com/toolplane/toolplane/policy/cedar"
)

// Seed exercise 5, through a served node: a support agent reads a ticket
// that tells it to refund $5,000 on an order to an account that is not the
// order's, and obeys, over REST and over MCP. With the shipped example
// Cedar bundle published, neither call runs: each files an approval routed
// to finance by the rule over $500, the audit trail names the bundle
// version and the rule, and the refund handler has paid nothing. Nobody
// outside finance, and not the requester, can approve; a person in
// finance can, and the approved call then pays once, however often the
// agent asks again. A small refund to the order's own account is one no
// rule of the bundle holds back.
func TestTheInjectedRefundWaitsForFinance(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
	is := newTestIssuer(t)
	// The agent's department comes from its token, as a deployment maps
	// the identity provider's claims for the rules to read.
	e.cfg = Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), DataDir: dir, Demo: true,
		PolicyEngines: []policy.Engine{cedar.Engine{}},
		JWTIssuer:     "https://idp.test", JWTAudience: "toolplane", JWTJWKSURL: is.url, JWTClaims: jwtauth.Claims{Attributes: []string{"department"}}}
	e.start(t, dir)

	// The organization's rules: the example bundle, published over REST
	// by the platform admin.
	files, err := policy.ReadBundleDir("../../examples/policy/cedar")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(map[string]any{"files": files, "note": "the example bundle"})
	published := e.must(t, "POST", "/v1/policy/bundles", e.admin, string(body), http.StatusCreated)
	version, _ := published["version"].(float64)
	if version < 1 || published["language"] != "cedar" {
		t.Fatalf("published %v", published)
	}

	// A support agent, granted the ticket search and the refund.
	agent := is.agent(t, "support-bot", map[string]any{"department": "support"})
	e.must(t, "POST", "/v1/grants", e.admin, `{"agent_id":"support-bot","pattern":"demo.search_tickets"}`, http.StatusCreated)
	e.must(t, "POST", "/v1/grants", e.admin, `{"agent_id":"support-bot","pattern":"demo.refund_order"}`, http.StatusCreated)
	outsider := e.mintKey(t, e.admin, `{"kind":"person","subject":"olga","roles":["approver"]}`)
	// The requester's own identity, in finance: four eyes still refuse it.
	requester := e.mintKey(t, e.admin, `{"kind":"person","subject":"support-bot","roles":["approver","group:finance"]}`)
	finance := e.mintKey(t, e.admin, `{"kind":"person","subject":"fiona","roles":["approver","group:finance"]}`)

	// The agent reads the ticket, and the ticket tells it what to do.
	status, read := e.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", agent, `{"arguments":{"query":"laptop"},"run_id":"run-injected"}`)
	if status != http.StatusOK || !strings.Contains(read, "ignore prior instructions") || !strings.Contains(read, "o-503") {
		t.Fatalf("the agent's read of the ticket: %d %s", status, read)
	}
	injected := map[string]any{"order_id": "o-503", "amount_cents": 500000, "reason": "as the ticket says", "to_account": "acct-7731"}

	// remaining reads what is left to refund on o-503 from a refund's
	// answer: how much the handler has paid.
	remaining := func(r result) float64 {
		t.Helper()
		v, ok := r.Data["remaining_cents"].(float64)
		if !ok {
			t.Fatalf("no remaining_cents in %s", r.raw)
		}
		return v
	}
	// settled asks for an approved refund in run until it has run: the
	// approved call is made in the background, and an identical call
	// answers its result once it is there.
	settled := func(args map[string]any, run string) result {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			r := e.call(t, agent, "demo.refund_order", args, run, "")
			if (r.status != http.StatusAccepted && r.code() != "in_flight") || time.Now().After(deadline) {
				return r
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// routed checks that approval id waits for finance by the rule over
	// $500, both reasons shown to the approver.
	routed := func(door, id string) {
		t.Helper()
		a := e.must(t, "GET", "/v1/approvals/"+id, finance, "", http.StatusOK)
		if a["status"] != "pending" || a["approver_group"] != "finance" || a["rule"] != "refund-over-500" || a["tool"] != "demo.refund_order" {
			t.Errorf("%s: approval %v; want pending, for finance, by refund-over-500", door, a)
		}
	}

	// Over REST: 202, an approval, nothing paid.
	rest := e.call(t, agent, "demo.refund_order", injected, "run-injected", "")
	var filed struct {
		Approval struct {
			ID string `json:"id"`
		} `json:"approval"`
	}
	if err := json.Unmarshal([]byte(rest.raw), &filed); err != nil || rest.status != http.StatusAccepted || filed.Approval.ID == "" {
		t.Fatalf("the injected refund over REST: %d %s; want 202 and an approval", rest.status, rest.raw)
	}
	routed("REST", filed.Approval.ID)

	// Over MCP, by a real client: the same answer, another approval.
	cs := e.mcpSession(t, agent)
	mctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	res, err := cs.CallTool(mctx, &mcp.CallToolParams{Name: "demo_refund_order", Arguments: injected, Meta: mcp.Meta{"toolplane/run_id": "run-injected-mcp"}})
	cancel()
	if err != nil {
		t.Fatalf("MCP: %v", err)
	}
	mcpID, _ := res.Meta["toolplane/approval_id"].(string)
	raw, _ := json.Marshal(res)
	if !res.IsError || mcpID == "" || !strings.Contains(string(raw), "Approval required") {
		t.Fatalf("the injected refund over MCP: %s; want an approval required", raw)
	}
	routed("MCP", mcpID)

	// The audit trail records both decisions, with the bundle and the
	// rule, and no refund paid.
	refunds := func(events []toolplane.AuditEvent) (decided, paid int) {
		for _, ev := range events {
			if ev.Tool != "demo.refund_order" || !strings.HasPrefix(ev.RunID, "run-injected") {
				continue
			}
			if ev.Outcome == "ok" && !ev.Replayed {
				// An identical call answered from the journal is
				// recorded as replayed: it paid nothing.
				paid++
			}
			if ev.PolicyBundle == int64(version) && ev.PolicyRule == "refund-over-500" {
				decided++
			}
		}
		return decided, paid
	}
	events := e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool { d, _ := refunds(evs); return d >= 2 })
	if decided, paid := refunds(events); decided < 2 || paid != 0 {
		t.Fatalf("audit before any approval: %d events name bundle %v and refund-over-500 (want 2), %d refunds paid (want 0)", decided, version, paid)
	}
	// Asking again before anyone answered pays nothing and files nothing new.
	if again := e.call(t, agent, "demo.refund_order", injected, "run-injected", ""); again.status != http.StatusAccepted || !strings.Contains(again.raw, filed.Approval.ID) {
		t.Fatalf("the same call again while it waits: %d %s", again.status, again.raw)
	}

	// Who may answer: not a person outside finance, not the requester,
	// not the agent; a person in finance may.
	answers := []struct {
		name, key, path string
		status          int
		want            string
	}{
		{"an approver outside finance", outsider, "/approve", http.StatusForbidden, "this approval is for the group finance"},
		{"the requester, though in finance", requester, "/approve", http.StatusForbidden, "you may not answer this approval"},
		{"the agent itself", agent, "/approve", http.StatusForbidden, ""},
		{"a person in finance", finance, "/approve", http.StatusOK, `"approved"`},
	}
	for _, a := range answers {
		status, got := e.do(t, "POST", "/v1/approvals/"+filed.Approval.ID+a.path, a.key, "")
		if status != a.status || !strings.Contains(got, a.want) {
			t.Errorf("%s: %d %s; want %d %q", a.name, status, got, a.status, a.want)
		}
	}
	// The MCP call's approval finance rejects: it never pays.
	e.must(t, "POST", "/v1/approvals/"+mcpID+"/reject", finance, `{"reason":"the ticket is not the customer's instruction"}`, http.StatusOK)

	// The approved call pays once: two identical retries answer the
	// same refund, and the order has $5,000 less left on it.
	var first result
	for i := range 2 {
		r := settled(injected, "run-injected")
		if r.code() != "ok" || remaining(r) != 649900-500000 {
			t.Fatalf("retry %d of the approved refund: %s", i+1, r.raw)
		}
		if i == 0 {
			first = r
		} else if r.Data["refund_id"] != first.Data["refund_id"] {
			t.Fatalf("two retries answered two refunds: %v and %v", first.Data["refund_id"], r.Data["refund_id"])
		}
	}
	if rej := e.call(t, agent, "demo.refund_order", injected, "run-injected-mcp", ""); rej.code() == "ok" {
		t.Fatalf("the rejected call ran: %s", rej.raw)
	}

	// A small refund to the order's own account is one the bundle
	// allows: no rule of it asks for a person. The demo's refund tool
	// itself still asks for one (requires_approval, which no rule can
	// lift), so it waits on the tool's own terms: no rule, no group; any
	// approver answers it, and it then pays, after the injected refund
	// paid once.
	small := map[string]any{"order_id": "o-503", "amount_cents": 1000, "reason": "goodwill"}
	asked := e.call(t, agent, "demo.refund_order", small, "run-small", "")
	if err := json.Unmarshal([]byte(asked.raw), &filed); err != nil || asked.status != http.StatusAccepted {
		t.Fatalf("a small refund to the order's account: %d %s", asked.status, asked.raw)
	}
	if a := e.must(t, "GET", "/v1/approvals/"+filed.Approval.ID, outsider, "", http.StatusOK); a["rule"] != "" || a["approver_group"] != "" {
		t.Fatalf("the small refund's approval is routed by a rule: %v", a)
	}
	e.must(t, "POST", "/v1/approvals/"+filed.Approval.ID+"/approve", outsider, "", http.StatusOK)
	paid := settled(small, "run-small")
	if paid.code() != "ok" || remaining(paid) != 649900-500000-1000 {
		t.Fatalf("the approved small refund: %s", paid.raw)
	}
	// replays counts the retries of the injected refund answered from the
	// journal.
	replays := func(events []toolplane.AuditEvent) (n int) {
		for _, ev := range events {
			if ev.Tool == "demo.refund_order" && ev.RunID == "run-injected" && ev.Outcome == "ok" && ev.Replayed {
				n++
			}
		}
		return n
	}
	// The audit trail is written in the background: it is read until the
	// payment and a replayed retry are both there.
	events = e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool { _, p := refunds(evs); return p >= 1 && replays(evs) >= 1 })
	if _, paid := refunds(events); paid != 1 || replays(events) < 1 {
		t.Fatalf("the injected refund is paid %d times in the audit trail (want once), %d retries answered from the journal (want some)", paid, replays(events))
	}
}

// agent answers a token the issuer gave an agent of its own, with the
// claims given beside the ones every token carries.
func (is *testIssuer) agent(t *testing.T, subject string, claims map[string]any) string {
	t.Helper()
	s, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.ES256, Key: is.key}, (&jose.SignerOptions{}).WithType("JWT").WithHeader("kid", "k1"))
	if err != nil {
		t.Fatal(err)
	}
	all := map[string]any{"iss": "https://idp.test", "aud": "toolplane", "sub": subject, "org": DefaultOrganization,
		"exp": time.Now().Add(time.Hour).Unix(), "toolplane_kind": "agent"}
	for k, v := range claims {
		all[k] = v
	}
	tok, err := jwt.Signed(s).Claims(all).Serialize()
	if err != nil {
		t.Fatal(err)
	}
	return tok
}
