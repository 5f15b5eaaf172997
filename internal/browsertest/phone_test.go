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

// TestConsoleOnAPhone opens every console page at phone widths (360, 390
// and 430 px, portrait, as a phone reports them) the way an approver
// reaching it from a Slack or email link does: from the server's own
// address, sent to sign in, landing in the console. No page is wider than
// the screen, every link of the navigation bar is on it, and the
// approval card's decision buttons can be reached. A screenshot of each
// page at 390 px is kept with the test's files (in
// $TOOLPLANE_TEST_SCREENSHOTS when set, to look at).
func TestConsoleOnAPhone(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	filed := s.call(t, s.agent, "demo.refund_order", "run-phone", map[string]any{"order_id": "o-390", "amount_cents": 1290, "reason": "arrived broken"})
	if filed.Approval == nil {
		t.Fatalf("the refund answered %d %s, want an approval", filed.status, filed.code())
	}
	shots := os.Getenv("TOOLPLANE_TEST_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	pages := []struct{ name, path, sel string }{
		{"inbox", "/console/approvals", "main"},
		{"approval", "/console/approvals/" + filed.Approval.ID, "#reason"},
		{"audit", "/console/audit", "main table"},
		{"uncertain", "/console/uncertain", "main"},
		{"catalog", "/console/catalog", "main table"},
		{"access", "/console/access", "main"},
		{"keys", "/console/access/keys", "main"},
		{"notifications", "/console/notifications", "main"},
	}
	for _, width := range []int64{360, 390, 430} {
		t.Run(fmt.Sprintf("%dpx", width), func(t *testing.T) {
			b := newBrowser(t)
			b.do(t, "a phone's screen", chromedp.EmulateViewport(width, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
			// From the server's own address, as a person types it.
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
					// The innermost elements reaching past the screen,
					// to say what to fix.
					wide := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("body *")]
						.filter(e => e.getBoundingClientRect().right > %[1]d.5 && ![...e.children].some(c => c.getBoundingClientRect().right > %[1]d.5))
						.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " + Math.round(e.getBoundingClientRect().right) + "px: " + (e.innerText || "").slice(0, 40))`, width))
					t.Errorf("%s at %d px: the page is %d px wide; past the screen: %q", pg.name, width, w, wide)
				}
				// Against the screen's width, not innerWidth: a phone shows a
				// page wider than its screen zoomed out, and innerWidth grows
				// with it.
				off := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("header a, header button")]
					.filter(e => { const r = e.getBoundingClientRect(); return r.left < 0 || r.right > %d.5; })
					.map(e => e.innerText)`, width))
				if len(off) > 0 {
					t.Errorf("%s at %d px: %v run off the screen", pg.name, width, off)
				}
				if pg.name == "approval" {
					hidden := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("main button")]
						.filter(e => { const r = e.getBoundingClientRect(); return r.width === 0 || r.left < 0 || r.right > %d.5; })
						.map(e => e.innerText)`, width))
					if len(hidden) > 0 {
						t.Errorf("the approval's buttons %v are off the screen at %d px", hidden, width)
					}
				}
				if width == 390 {
					shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
					if err != nil {
						t.Fatal(err)
					}
					file := filepath.Join(shots, "console-390-"+pg.name+".png")
					if err := os.WriteFile(file, shot, 0o644); err != nil {
						t.Fatal(err)
					}
					if !strings.HasPrefix(string(shot), "\x89PNG") {
						t.Errorf("%s: the screenshot is not a PNG", file)
					}
				}
			}
		})
	}
}
