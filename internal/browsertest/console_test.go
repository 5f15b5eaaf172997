package browsertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// shop is a toolplane serving the demo and two tools of the test's own
// over HTTP, bound to a downstream orders API whose refunds fail after
// they are sent: a refund through it is an uncertain action.
type shop struct {
	*server
	// refunds counts the refund requests the downstream received.
	refunds *atomic.Int32
}

// startShop starts the downstream, writes the tools, starts toolplane
// with them, connects it to the downstream and grants the demo agent the
// shop's tools. wireDescription is the description of shop.wire, a tool
// that waits for the finance group's approval.
func startShop(t *testing.T, wireDescription string) *shop {
	t.Helper()
	return startShopEnv(t, wireDescription, nil)
}

// startShopEnv is startShop with env added to toolplane's environment
// and extra flags given to it (startServerEnv).
func startShopEnv(t *testing.T, wireDescription string, env []string, extra ...string) *shop {
	t.Helper()
	chromium(t) // skip before starting anything
	refunds := &atomic.Int32{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /orders/{id}/refunds", func(w http.ResponseWriter, r *http.Request) {
		// The request reached the ledger; its answer is lost.
		refunds.Add(1)
		http.Error(w, "ledger timed out", http.StatusInternalServerError)
	})
	mux.HandleFunc("POST /wires", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"wire_id":"w-1"}`)
	})
	down := httptest.NewServer(mux)
	t.Cleanup(down.Close)

	tools := filepath.Join(t.TempDir(), "tools")
	if err := os.MkdirAll(tools, 0o700); err != nil {
		t.Fatal(err)
	}
	schema := map[string]any{"type": "object", "additionalProperties": false, "required": []string{"id"},
		"properties": map[string]any{"id": map[string]any{"type": "string"}, "amount_cents": map[string]any{"type": "integer"}, "memo": map[string]any{"type": "string"}}}
	writeTool(t, tools, map[string]any{
		"name": "shop.refund", "version": "1.0.0", "description": "Refund an order through the shop's ledger.",
		"kind": "internal", "effect": "write", "repeatable": false, "connection": "orders", "timeout": "5s", "owner": "shop",
		"binding":      map[string]any{"http": map[string]any{"method": "POST", "url": down.URL + "/orders/{id}/refunds"}},
		"input_schema": schema, "output_schema": map[string]any{"type": "object"},
	})
	writeTool(t, tools, map[string]any{
		"name": "shop.wire", "version": "1.0.0", "description": wireDescription,
		"kind": "internal", "effect": "write", "repeatable": false, "connection": "orders", "timeout": "5s", "owner": "shop",
		"annotations":  map[string]any{"destructive": true, "requires_approval": true},
		"approval":     map[string]any{"chain": []string{"finance"}},
		"binding":      map[string]any{"http": map[string]any{"method": "POST", "url": down.URL + "/wires"}},
		"input_schema": schema, "output_schema": map[string]any{"type": "object"},
	})
	s := &shop{server: startServerEnv(t, env, append([]string{"--tools", tools, "--sweep-every", "1s"}, extra...)...), refunds: refunds}
	conn, _ := json.Marshal(map[string]any{"name": "orders-main", "provider": "orders", "kind": "static",
		"config":  map[string]any{"auth": "bearer", "egress": map[string]any{"hosts": []string{"127.0.0.1"}, "allow_cidrs": []string{"127.0.0.0/8"}}},
		"secrets": map[string]any{"token": "orders-token"}})
	s.must(t, "POST", "/v1/connections", s.admin, string(conn), http.StatusCreated)
	s.must(t, "POST", "/v1/grants", s.admin, `{"agent_id":"demo-agent","pattern":"shop.*"}`, http.StatusCreated)
	return s
}

// writeTool writes one tool definition file.
func writeTool(t *testing.T, dir string, def map[string]any) {
	t.Helper()
	raw, err := json.Marshal(def)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, def["name"].(string)+".json"), raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// callResult is an invoke answer as the envelope reads.
type callResult struct {
	status   int
	OK       bool           `json:"ok"`
	Data     map[string]any `json:"data"`
	Replayed bool           `json:"replayed"`
	Error    *struct {
		Code string `json:"code"`
	} `json:"error"`
	Approval *struct {
		ID string `json:"id"`
	} `json:"approval"`
}

func (r callResult) code() string {
	switch {
	case r.OK:
		return "ok"
	case r.Error != nil:
		return r.Error.Code
	case r.Approval != nil:
		return "approval"
	}
	return fmt.Sprintf("http %d", r.status)
}

// call invokes tool over REST with key, in run.
func (s *server) call(t *testing.T, key, tool, run string, args map[string]any) callResult {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"arguments": args, "run_id": run})
	status, v := s.api(t, "POST", "/v1/tools/"+tool+"/invoke", key, string(body))
	raw, _ := json.Marshal(v)
	r := callResult{status: status}
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatalf("%s: %v in %s", tool, err, raw)
	}
	return r
}

// signIn opens page in the console, is sent to sign in, pastes key, and
// lands back on page showing sel.
func (b *browser) signIn(t *testing.T, page, key, sel string) {
	t.Helper()
	b.open(t, page, "#key")
	b.do(t, "paste the key", chromedp.SendKeys(chromedp.CSS("#key"), key))
	if got := b.submit(t, "form button[type=submit]"); got != http.StatusOK {
		t.Fatalf("signing in answered %d\n%s", got, b.describe())
	}
	b.do(t, "back on "+page, chromedp.WaitVisible(chromedp.CSS(sel)))
	if where := eval[string](t, b, "location.href"); where != page {
		t.Fatalf("signed in at %s, want back on %s", where, page)
	}
}

// The console's round trip in a browser, against the real binary: an
// agent's refund waits for a person; the approver signs in, finds it in
// the inbox with its exact arguments, opens it and approves it with a
// reason; the approved call then runs in the background and the test
// sees it complete over REST. A write whose answer was lost is then
// reconciled through the console, and the agent's identical call answers
// what the person recorded, the downstream never asked twice. An
// approver outside the group a wire waits for neither sees it in their
// inbox nor is offered a decision on its page.
func TestConsoleApprovesARefundAndReconcilesAnUncertainAction(t *testing.T) {
	t.Parallel()
	s := startShop(t, "Wire money to a supplier.")
	ada := s.mint(t, "person", "ada", "approver", "group:finance")

	// The agent asks for a wire, which waits for the finance group, and
	// a refund, which waits for any approver.
	wire := s.call(t, s.agent, "shop.wire", "run-console", map[string]any{"id": "sup-7", "amount_cents": 250000, "memo": "invoice 2026-114"})
	if wire.Approval == nil {
		t.Fatalf("the wire answered %d %s, want an approval", wire.status, wire.code())
	}
	args := map[string]any{"order_id": "o-502", "amount_cents": float64(1250), "reason": "charged twice"}
	filed := s.call(t, s.agent, "demo.refund_order", "run-console", args)
	if filed.status != http.StatusAccepted || filed.Approval == nil || filed.Approval.ID == "" {
		t.Fatalf("the refund answered %d %s, want 202 with an approval", filed.status, filed.code())
	}
	id := filed.Approval.ID

	b := newBrowser(t)
	inbox := s.base + "/console/approvals"
	b.signIn(t, inbox, ada, "main")
	card := fmt.Sprintf(`article.card:has(a[href$=%s])`, jsString("/approvals/"+id))
	b.waitFor(t, "the refund in the inbox", fmt.Sprintf(`document.querySelector(%s)`, jsString(card)))
	b.checkCSP(t)
	if got := b.text(t, "main h1"); got != "Approvals waiting for you" {
		t.Errorf("the inbox's title is %q", got)
	}
	b.do(t, "show the arguments", chromedp.Click(chromedp.CSS(card+" details summary")), chromedp.WaitVisible(chromedp.CSS(card+" details pre")))
	var shown map[string]any
	if err := json.Unmarshal([]byte(b.text(t, card+" details pre")), &shown); err != nil || !reflect.DeepEqual(shown, args) {
		t.Fatalf("the inbox shows the arguments %v (%v), want exactly %v", shown, err, args)
	}
	facts := b.text(t, card)
	for _, want := range []string{"demo.refund_order", "demo-agent", "run-console", "Time left"} {
		if !strings.Contains(facts, want) {
			t.Errorf("the inbox's card lacks %q:\n%s", want, facts)
		}
	}
	if os.Getenv("TOOLPLANE_WRITE_SCREENSHOT") == "1" {
		shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "console.png"), shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/console.png (%d bytes)", len(shot))
	}

	// Open it and approve it with a reason.
	b.do(t, "open the refund", chromedp.Click(chromedp.CSS(card+" h2 a")), chromedp.WaitVisible(chromedp.CSS("#reason")))
	b.do(t, "give a reason", chromedp.SendKeys(chromedp.CSS("#reason"), "confirmed with the customer by phone"))
	if got := b.submit(t, `button[name=decision][value=approve]`); got != http.StatusOK {
		t.Fatalf("approving answered %d\n%s", got, b.describe())
	}
	b.waitText(t, "p.notice", "Your answer was recorded.")
	b.waitText(t, "p.decision", "approved by ada")
	b.waitText(t, "p.decision", "confirmed with the customer by phone")
	b.checkCSP(t)

	// The approved call runs in the background, without the agent asking
	// again: its audit event appears.
	pollREST(t, "the approved refund to run", func() bool {
		v := s.must(t, "GET", "/v1/audit/events?run_id=run-console&tool=demo.refund_order&outcome=ok", s.admin, "", http.StatusOK)
		items, _ := v["items"].([]any)
		return len(items) > 0
	})
	a := s.must(t, "GET", "/v1/approvals/"+id, s.admin, "", http.StatusOK)
	if a["status"] != "approved" {
		t.Errorf("the approval over REST: %v", a)
	}
	// The agent's identical call answers the refund's stored result.
	if again := s.call(t, s.agent, "demo.refund_order", "run-console", args); !again.OK || again.Data["refund_id"] == nil {
		t.Errorf("the agent's identical call after approval: %d %s %v", again.status, again.code(), again.Data)
	}

	// A refund whose answer the ledger lost is uncertain: it holds its key.
	lost := map[string]any{"id": "o-777", "amount_cents": float64(900)}
	if r := s.call(t, s.agent, "shop.refund", "run-uncertain", lost); r.code() != "uncertain" {
		t.Fatalf("the lost refund answered %d %s, want uncertain", r.status, r.code())
	}
	b.open(t, s.base+"/console/uncertain", "main")
	action := `article.card:has(input[name=tool][value="shop.refund"])`
	b.waitFor(t, "the uncertain refund listed", fmt.Sprintf(`document.querySelector(%s)`, jsString(action)))
	if got := b.text(t, action); !strings.Contains(got, "run-uncertain") || !strings.Contains(got, "demo-agent") {
		t.Errorf("the uncertain action's card lacks its run or agent:\n%s", got)
	}
	// The person checked the ledger: the refund went through.
	b.do(t, "record the output",
		chromedp.Click(chromedp.CSS(action+` input[name=outcome][value=output]`)),
		chromedp.SendKeys(chromedp.CSS(action+` textarea[name=output]`), `{"refund_id":"re-by-phone"}`))
	if got := b.submit(t, action+` button[type=submit]`); got != http.StatusOK {
		t.Fatalf("reconciling answered %d\n%s", got, b.describe())
	}
	b.waitText(t, "p.notice", "The action was reconciled")
	b.checkCSP(t)
	if still := eval[bool](t, b, fmt.Sprintf(`!!document.querySelector(%s)`, jsString(action))); still {
		t.Error("the reconciled action is still listed")
	}
	r := s.call(t, s.agent, "shop.refund", "run-uncertain", lost)
	if !r.OK || r.Data["refund_id"] != "re-by-phone" {
		t.Errorf("the identical call after reconciling: %d %s %v, want the recorded output", r.status, r.code(), r.Data)
	}
	if n := s.refunds.Load(); n != 1 {
		t.Errorf("the ledger was asked %d times, want once", n)
	}
	if v := s.must(t, "GET", "/v1/uncertain", ada, "", http.StatusOK); len(v["items"].([]any)) != 0 {
		t.Errorf("uncertain actions left over REST: %v", v["items"])
	}

	// An approver outside the finance group, signed in after ada signs
	// out, is not shown the wire, and its page offers no decision.
	bob := s.mint(t, "person", "bob", "approver")
	if got := b.submit(t, "form.who button[type=submit]"); got != http.StatusOK {
		t.Fatalf("signing out answered %d", got)
	}
	b.waitText(t, "main", "You are signed out.")
	b.signIn(t, inbox, bob, "main")
	if got := b.text(t, "main"); !strings.Contains(got, "Nothing waits for you.") || strings.Contains(got, wire.Approval.ID) {
		t.Errorf("bob's inbox:\n%s", got)
	}
	b.open(t, s.base+"/console/approvals/"+wire.Approval.ID, "main article")
	if got := b.text(t, "main"); !strings.Contains(got, "You cannot answer this approval") || !strings.Contains(got, "finance") {
		t.Errorf("the wire's page for bob does not say why he may not answer:\n%s", got)
	}
	if eval[bool](t, b, `!!document.querySelector("#reason, button[name=decision]")`) {
		t.Error("the wire's page offers bob a decision")
	}
	b.checkCSP(t)
}

// pollREST waits until done answers true, within stepTimeout.
func pollREST(t *testing.T, what string, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(stepTimeout)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, stepTimeout)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
