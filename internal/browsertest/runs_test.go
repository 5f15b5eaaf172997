package browsertest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestRunPageFitsEveryScreen opens a run's page, against the real binary,
// at a phone's width (390 px) and a laptop's (1280 px), reached the way a
// person does: from the run id the approval card links. The run holds a
// call that answered, a refund a person rejected, and a call with a bad
// argument. At both widths the page is no wider than the screen, runs no
// script the policy refuses, shows the timeline in order, and a
// screenshot of it is kept (in $TOOLPLANE_SCREENSHOTS when set).
func TestRunPageFitsEveryScreen(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	const run = "run-page-browser"
	s.must(t, "POST", "/v1/tools/demo.search_tickets/invoke", s.agent, `{"arguments":{"query":"cracked screen"},"run_id":"`+run+`"}`, http.StatusOK)
	filed := s.call(t, s.agent, "demo.refund_order", run, map[string]any{"order_id": "o-1280", "amount_cents": 1290, "reason": "arrived broken, and the long reason a customer writes runs on past any phone's width"})
	if filed.Approval == nil {
		t.Fatalf("the refund answered %s, want an approval", filed.code())
	}
	s.must(t, "POST", "/v1/approvals/"+filed.Approval.ID+"/reject", s.admin, `{"reason":"not without the photos"}`, http.StatusOK)
	if r := s.call(t, s.agent, "demo.add_note", run, map[string]any{"ticket_id": "t-1001"}); r.code() != "invalid_input" {
		t.Fatalf("a note without its text answered %s, want invalid_input", r.code())
	}
	shots := os.Getenv("TOOLPLANE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	} else if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprintf("%dpx", width), func(t *testing.T) {
			b := newBrowser(t)
			if width < 600 {
				b.do(t, "a phone's screen", chromedp.EmulateViewport(width, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
			} else {
				b.do(t, "a laptop's screen", chromedp.EmulateViewport(width, 800))
			}
			card := s.base + "/console/approvals/" + filed.Approval.ID
			b.signIn(t, card, s.admin, "main")
			b.do(t, "follow the card's run link", chromedp.Click(chromedp.CSS(`main a[href="/console/runs/`+run+`"]`)))
			b.waitFor(t, "on the run page", `location.pathname === "/console/runs/`+run+`" && !!document.querySelector("ol.timeline")`)
			b.checkCSP(t)
			if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
				wide := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("body *")]
					.filter(e => e.getBoundingClientRect().right > %[1]d.5 && ![...e.children].some(c => c.getBoundingClientRect().right > %[1]d.5))
					.slice(0, 5).map(e => e.tagName.toLowerCase() + " " + Math.round(e.getBoundingClientRect().right) + "px: " + (e.innerText || "").slice(0, 40))`, width))
				t.Errorf("the run page at %d px is %d px wide; past the screen: %q", width, w, wide)
			}
			steps := eval[[]string](t, b, `[...document.querySelectorAll("ol.timeline > li .what")].map(e => e.innerText)`)
			want := []string{"Call of demo.search_tickets", "Call of demo.refund_order", "Approval of demo.refund_order", "Call of demo.add_note"}
			if len(steps) != len(want) {
				t.Fatalf("timeline %q, want %d entries", steps, len(want))
			}
			for i, w := range want {
				if !strings.HasPrefix(steps[i], w) {
					t.Errorf("timeline entry %d is %q, want %q…", i, steps[i], w)
				}
			}
			if got := eval[string](t, b, `document.querySelector(".run-summary").innerText`); !strings.Contains(got, "Its last call failed") {
				t.Errorf("the summary says %q", got)
			}
			shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.HasPrefix(string(shot), "\x89PNG") {
				t.Fatal("the screenshot is not a PNG")
			}
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("console-%d-run.png", width)), shot, 0o644); err != nil {
				t.Fatal(err)
			}
		})
	}
}
