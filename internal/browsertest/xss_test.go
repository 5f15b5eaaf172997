package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Markup from outside — an agent's name, a tool's description, a call's
// arguments — shows in the console as the text it is, and runs nothing.
// The tab bypasses the pages' Content-Security-Policy, so the check is
// of the escaping alone: were a payload rendered as markup, its script
// would run and set the window flag (a control page shows the bypass
// lets an inline script run). The policy itself is checked on the
// answers' headers.
func TestConsoleShowsMarkupAsText(t *testing.T) {
	t.Parallel()
	payload := func(where string) string {
		return fmt.Sprintf(`<script>window.__xss=%q</script><img src=x onerror="window.__xss='%s img'"><svg onload="window.__xss='%s svg'">`, where, where, where)
	}
	description := "Wire money to a supplier. " + payload("description")
	s := startShop(t, description)
	agentName := `<img src=x onerror="window.__xss='agent'">`
	agent := s.mint(t, "agent", agentName)
	grant, _ := json.Marshal(map[string]string{"agent_id": agentName, "pattern": "shop.*"})
	s.must(t, "POST", "/v1/grants", s.admin, string(grant), http.StatusCreated)
	ada := s.mint(t, "person", "ada", "approver", "group:finance")

	memo := `</pre></details>` + payload("arguments")
	wire := s.call(t, agent, "shop.wire", "run-xss", map[string]any{"id": "sup-1", "amount_cents": 100, "memo": memo})
	if wire.code() != "approval" {
		t.Fatalf("the wire answered %d %s, want an approval", wire.status, wire.code())
	}
	if r := s.call(t, agent, "shop.refund", "run-xss", map[string]any{"id": "o-1", "memo": memo}); r.code() != "uncertain" {
		t.Fatalf("the refund answered %d %s, want uncertain", r.status, r.code())
	}

	b := newBrowser(t)
	ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
	_, err := chromedp.Call(ctx, page.SetBypassCSP, page.SetBypassCSPParams{Enabled: true})
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	// The control: under a policy that forbids every script, an inline
	// one runs in this tab.
	control := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'none'")
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>control</title><p id="p">control</p><script>window.__xss="control"</script>`)
	}))
	t.Cleanup(control.Close)
	b.open(t, control.URL, "#p")
	if got := eval[string](t, b, `String(window.__xss)`); got != "control" {
		t.Fatalf("the control page's inline script did not run (window.__xss = %s): the check below would prove nothing", got)
	}

	inbox := s.base + "/console/approvals"
	b.signIn(t, inbox, ada, "main")
	pages := []struct {
		name, url, sel string
		shows          []string
	}{
		{"the inbox", inbox, "article.card", []string{agentName, description}},
		{"the approval", s.base + "/console/approvals/" + wire.Approval.ID, "#reason", []string{agentName, description}},
		{"the uncertain actions", s.base + "/console/uncertain", "article.card", []string{agentName}},
	}
	for _, p := range pages {
		t.Run(p.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(b.ctx, stepTimeout)
			resp, err := chromedp.Run(ctx, chromedp.NavigateResponse(p.url))
			cancel()
			if err != nil {
				t.Fatal(err)
			}
			if csp, _ := resp.Headers["Content-Security-Policy"].(string); !strings.Contains(csp, "script-src 'self'") || strings.Contains(csp, "unsafe-inline") {
				t.Errorf("Content-Security-Policy %q: want scripts from the console alone", csp)
			}
			b.do(t, "wait for "+p.sel, chromedp.WaitVisible(chromedp.CSS(p.sel)))
			// Open every collapsed section, so its text is rendered.
			eval[bool](t, b, `(document.querySelectorAll("details").forEach(d => d.open = true), true)`)
			if got := eval[string](t, b, `String(window.__xss)`); got != "undefined" {
				t.Fatalf("a payload ran: window.__xss = %q", got)
			}
			if n := eval[int](t, b, `document.querySelectorAll("main img, main svg, main script, [onerror], [onload]").length`); n != 0 {
				html := eval[string](t, b, `document.querySelector("main").innerHTML`)
				t.Fatalf("%d elements of the payloads are in the page:\n%s", n, html)
			}
			text := b.text(t, "main")
			for _, want := range p.shows {
				if !strings.Contains(text, want) {
					t.Errorf("the page does not show %q as text:\n%s", want, text)
				}
			}
			// The arguments are shown as the JSON they are, the memo
			// in it whole.
			var args struct {
				Memo string `json:"memo"`
			}
			if err := json.Unmarshal([]byte(b.text(t, "main pre")), &args); err != nil || args.Memo != memo {
				t.Errorf("the arguments shown hold the memo %q (%v), want %q", args.Memo, err, memo)
			}
		})
	}
}
