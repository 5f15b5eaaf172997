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

// TestTrafficOverview opens the traffic overview and a tool's page with
// its traffic panel at a phone's width (390 px) and a desk's (1280 px),
// after the demo agent made calls that ran, were refused (invalid input)
// and were held for approval: the charts are drawn (SVG bars, no script
// needed), the window toggles by link, nothing reaches past the screen,
// and no CSP violation is reported. A screenshot of each is kept in
// $TOOLPLANE_SCREENSHOTS (or $TOOLPLANE_TEST_SCREENSHOTS) when set.
func TestTrafficOverview(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	for i := range 4 {
		s.must(t, "POST", "/v1/tools/demo.search_tickets/invoke", s.agent, fmt.Sprintf(`{"arguments":{"query":"cracked"},"run_id":"run-ov-%d"}`, i), http.StatusOK)
	}
	// A refusal is an answer too: invalid_input, counted among the calls.
	if _, v := s.api(t, "POST", "/v1/tools/demo.search_tickets/invoke", s.agent, `{"arguments":{"query":{"not":"a string"}},"run_id":"run-ov-bad"}`); v["ok"] != false {
		t.Fatalf("an object as the query answered %v, want a refusal", v)
	}
	s.call(t, s.agent, "demo.refund_order", "run-ov-refund", map[string]any{"order_id": "o-1280", "amount_cents": 990, "reason": "late"})
	shots := os.Getenv("TOOLPLANE_SCREENSHOTS")
	if shots == "" {
		shots = os.Getenv("TOOLPLANE_TEST_SCREENSHOTS")
	}
	if shots == "" {
		shots = t.TempDir()
	}
	pages := []struct{ name, path, sel string }{
		{"overview", "/console/overview", "main .traffic-chart svg"},
		{"overview-day", "/console/overview?window=day", "main .traffic-chart svg"},
		{"tool", "/console/catalog/demo.search_tickets/1.0.0", "main .traffic-chart svg"},
	}
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprintf("%dpx", width), func(t *testing.T) {
			b := newBrowser(t)
			if width < 600 {
				b.do(t, "a phone's screen", chromedp.EmulateViewport(width, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
			} else {
				b.do(t, "a desk's screen", chromedp.EmulateViewport(width, 900))
			}
			b.open(t, s.base+"/", "#key")
			b.do(t, "paste the admin's key", chromedp.SendKeys(chromedp.CSS("#key"), s.admin))
			if got := b.submit(t, "form button[type=submit]"); got != http.StatusOK {
				t.Fatalf("signing in answered %d\n%s", got, b.describe())
			}
			b.waitFor(t, "in the console", `location.pathname.startsWith("/console/")`)
			for _, pg := range pages {
				b.open(t, s.base+pg.path, pg.sel)
				b.checkCSP(t)
				if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
					wide := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("body *")]
						.filter(e => e.getBoundingClientRect().right > %[1]d.5 && ![...e.children].some(c => c.getBoundingClientRect().right > %[1]d.5))
						.slice(0, 5).map(e => e.tagName.toLowerCase() + " " + Math.round(e.getBoundingClientRect().right) + "px")`, width))
					t.Errorf("%s at %d px: the page is %d px wide; past the screen: %q", pg.name, width, w, wide)
				}
				// The chart is drawn, at the page's width, with a bar for
				// the calls made.
				if n := eval[int64](t, b, `document.querySelectorAll("main .traffic-chart svg rect").length`); n == 0 {
					t.Errorf("%s at %d px: the chart has no bars", pg.name, width)
				}
				if cw := eval[float64](t, b, `document.querySelector("main .traffic-chart svg").getBoundingClientRect().width`); cw < float64(width)/2 || cw > float64(width) {
					t.Errorf("%s at %d px: the chart is %.0f px wide", pg.name, width, cw)
				}
				calls := eval[string](t, b, `document.querySelector(".traffic-figures dd").innerText`)
				if !strings.HasPrefix(calls, "5") {
					t.Errorf("%s at %d px: calls %q, want the 5 the agent made (4 ran, 1 refused)", pg.name, width, calls)
				}
				shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(string(shot), "\x89PNG") {
					t.Errorf("%s: the screenshot is not a PNG", pg.name)
				}
				file := filepath.Join(shots, fmt.Sprintf("console-%d-%s.png", width, pg.name))
				if err := os.WriteFile(file, shot, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The window toggles by link, without a script.
			b.open(t, s.base+"/console/overview", ".traffic-windows")
			b.do(t, "follow the day's link", chromedp.Click(chromedp.CSS(`.traffic-windows a[href$="window=day"]`)))
			b.waitFor(t, "the day", `location.search === "?window=day" && document.querySelector('.traffic-windows a[aria-current]').innerText === "Last day"`)
		})
	}
}
