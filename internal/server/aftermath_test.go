package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/postgres/pgtest"
)

// An approval shows what happened after it. On a demo server (SQLite and
// PostgreSQL), a person approves a full refund of o-502 asked over REST,
// and then a second refund of the same order asked over MCP: the first is
// paid, the second is refused by the helpdesk (nothing is left to refund
// on o-502). Each approval read over REST says so, state, code and the
// message the agent read, and names the audit event of the call that ran,
// which the audit trail answers with the approval's id; an approval still
// waiting shows no outcome.
func TestAnApprovalShowsWhatHappenedAfterIt(t *testing.T) {
	t.Parallel()
	backends := map[string]func(t *testing.T, dir string) string{
		"sqlite": func(_ *testing.T, dir string) string { return filepath.Join(dir, "toolplane.db") },
	}
	if _, ok := pgtest.LookupDSN(); ok {
		backends["postgres"] = func(t *testing.T, _ string) string { return pgtest.SchemaDSN(t, pgtest.DSN(t)) }
	}
	for name, database := range backends {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true}
			e.start(t, dir)
			agent := readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]

			// outcome reads approval id over REST until its call has
			// ended, and answers the approval's outcome.
			outcome := func(id string) map[string]any {
				t.Helper()
				deadline := time.Now().Add(30 * time.Second)
				for {
					a := e.must(t, "GET", "/v1/approvals/"+id, e.admin, "", http.StatusOK)
					out, _ := a["outcome"].(map[string]any)
					state, _ := out["state"].(string)
					if out != nil && state != "not_run" && state != "running" && out["audit_event_id"] != nil || time.Now().After(deadline) {
						if a["status"] != "approved" {
							t.Fatalf("approval %s is %v", id, a["status"])
						}
						return out
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			// event checks the outcome's audit event: the trail answers
			// it where the outcome says, naming the approval, with the
			// outcome's code.
			event := func(out map[string]any, id, want string) {
				t.Helper()
				link, _ := out["audit_event"].(string)
				if link != "/v1/audit/events/"+out["audit_event_id"].(string) {
					t.Fatalf("audit_event = %q", link)
				}
				ev := e.must(t, "GET", link, e.admin, "", http.StatusOK)
				if ev["approval_id"] != id || ev["outcome"] != want || ev["tool"] != "demo.refund_order" {
					t.Fatalf("the outcome's audit event: %v; want approval %s, outcome %s", ev, id, want)
				}
			}

			// card answers the console's card of approval id, as the
			// admin, signed in once through the sign-in form.
			var b *pageBrowser
			card := func(id string) string {
				t.Helper()
				if b == nil {
					b = newPageBrowser(t, e.base)
					_, body, _, _ := b.get(e.base + "/signin?return=" + url.QueryEscape("/console/approvals"))
					m := formToken.FindStringSubmatch(body)
					if m == nil {
						t.Fatalf("sign-in page: %s", body)
					}
					form := url.Values{"csrf": {m[1]}, "key": {e.admin}, "return": {"/console/approvals"}}
					req, _ := http.NewRequest(http.MethodPost, e.base+"/signin/key", strings.NewReader(form.Encode()))
					req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
					req.Header.Set("Origin", e.base)
					if status, body, at, _ := b.open(req); status != http.StatusOK || !strings.HasSuffix(at, "/console/approvals") {
						t.Fatalf("sign-in: %d at %s: %s", status, at, body)
					}
				}
				status, body, _, _ := b.get(e.base + "/console/approvals/" + id)
				if status != http.StatusOK {
					t.Fatalf("the card of %s: %d %s", id, status, body)
				}
				return body
			}

			// Over REST: the whole order, approved, paid.
			full := map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}
			r := e.call(t, agent, "demo.refund_order", full, "run-after", "")
			var filed struct {
				Approval struct {
					ID string `json:"id"`
				} `json:"approval"`
			}
			if err := json.Unmarshal([]byte(r.raw), &filed); err != nil || r.status != http.StatusAccepted {
				t.Fatalf("the refund over REST: %d %s", r.status, r.raw)
			}
			paid := filed.Approval.ID
			if a := e.must(t, "GET", "/v1/approvals/"+paid, e.admin, "", http.StatusOK); a["outcome"] != nil {
				t.Fatalf("a pending approval shows an outcome: %v", a)
			}
			e.must(t, "POST", "/v1/approvals/"+paid+"/approve", e.admin, "", http.StatusOK)
			out := outcome(paid)
			if out["state"] != "ok" || out["code"] != nil || out["message"] != nil {
				t.Fatalf("the paid refund's outcome: %v", out)
			}
			event(out, paid, "ok")
			if page := card(paid); !strings.Contains(page, "Then: the approved call ran and answered ok") ||
				!strings.Contains(page, `href="/console/audit/`+out["audit_event_id"].(string)+`"`) {
				t.Fatalf("the paid refund's card does not say it was paid, with its audit event: %s", page)
			}

			// Over MCP: another refund of the same order, approved, and
			// refused by the helpdesk once it ran.
			cs := e.mcpSession(t, agent)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "demo_refund_order",
				Arguments: map[string]any{"order_id": "o-502", "amount_cents": 500, "reason": "goodwill"}, Meta: mcp.Meta{"toolplane/run_id": "run-after-mcp"}})
			cancel()
			if err != nil {
				t.Fatalf("MCP: %v", err)
			}
			again, _ := res.Meta["toolplane/approval_id"].(string)
			if !res.IsError || again == "" {
				raw, _ := json.Marshal(res)
				t.Fatalf("the second refund over MCP: %s; want an approval required", raw)
			}
			e.must(t, "POST", "/v1/approvals/"+again+"/approve", e.admin, `{"reason":"ok"}`, http.StatusOK)
			out = outcome(again)
			msg, _ := out["message"].(string)
			if out["state"] != "refused" || out["code"] != "invalid_input" || !strings.Contains(msg, "only 0 cents are left to refund on o-502") || out["untrusted"] != false {
				t.Fatalf("the refused refund's outcome: %v; want refused, invalid_input, with the helpdesk's message", out)
			}
			event(out, again, "invalid_input")
			if page := card(again); !strings.Contains(page, "Then: the approved call was refused: <strong>invalid_input</strong>: only 0 cents are left to refund on o-502") ||
				!strings.Contains(page, `href="/console/audit/`+out["audit_event_id"].(string)+`"`) {
				t.Fatalf("the refused refund's card does not say it was refused, with its audit event: %s", page)
			}
		})
	}
}
