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

// TestTryATool tries the demo's ticket search from its catalogue page, at
// a phone's width (390 px) and a desktop's (1280 px), as a person granted
// it: the Try link leads to a form generated from the tool's schema, the
// call answers the result a model reads (outside content labelled
// untrusted) beside the tool's declaration, a field typed wrong is
// refused in the form without a call, and neither page is wider than the
// screen or breaks its Content-Security-Policy. A screenshot of each
// result is kept in $TOOLPLANE_SCREENSHOTS (or $TOOLPLANE_TEST_SCREENSHOTS)
// when set.
func TestTryATool(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	person := s.mint(t, "person", "tryer", "approver")
	// The test agent and the person both granted: an agent acting for a
	// person does only what both may.
	s.must(t, "POST", "/v1/grants", s.admin, `{"agent_id":"console-test:tryer","pattern":"demo.*"}`, http.StatusCreated)
	s.must(t, "POST", "/v1/grants", s.admin, `{"user_id":"tryer","pattern":"demo.*"}`, http.StatusCreated)
	shots := os.Getenv("TOOLPLANE_SCREENSHOTS")
	if shots == "" {
		shots = os.Getenv("TOOLPLANE_TEST_SCREENSHOTS") // where TestConsoleOnAPhone keeps its own
	}
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprintf("%dpx", width), func(t *testing.T) {
			b := newBrowser(t)
			if width < 600 {
				b.do(t, "a phone's screen", chromedp.EmulateViewport(width, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
			} else {
				b.do(t, "a desktop's screen", chromedp.EmulateViewport(width, 900))
			}
			b.open(t, s.base+"/console/catalog", "#key")
			b.do(t, "paste the person's key", chromedp.SendKeys(chromedp.CSS("#key"), person))
			if got := b.submit(t, "form button[type=submit]"); got != http.StatusOK {
				t.Fatalf("signing in answered %d\n%s", got, b.describe())
			}
			b.open(t, s.base+"/console/catalog/demo.search_tickets/1.0.0", "main")
			b.do(t, "follow the Try link", chromedp.Click(chromedp.CSS(`a[href$="/catalog/demo.search_tickets/try"]`)))
			b.waitText(t, "main h1", "Try demo.search_tickets")
			b.checkCSP(t)
			fits(t, b, width, "the form")

			if n := eval[int](t, b, `document.querySelectorAll("main form input[required]").length`); n < 1 {
				t.Errorf("no required field is marked")
			}
			b.do(t, "type a query", chromedp.SendKeys(chromedp.CSS(`main form input[required]`), "cracked"))
			if got := b.submit(t, "main form button[type=submit]"); got != http.StatusOK {
				t.Fatalf("the call answered %d\n%s", got, b.describe())
			}
			b.waitText(t, "#outcome", "Exactly what a model reads")
			b.checkCSP(t)
			rendered := b.text(t, "pre.try-rendered")
			if !strings.HasPrefix(rendered, `{"ok":true`) || !strings.Contains(rendered, `"untrusted":true`) {
				t.Errorf("the result as a model reads it: %s", rendered)
			}
			if !strings.Contains(b.text(t, "#outcome"), "Labelled untrusted") {
				t.Errorf("the page does not say the result is labelled untrusted")
			}
			if decl := b.text(t, ".try-declaration pre"); !strings.Contains(decl, `"name": "demo_search_tickets"`) {
				t.Errorf("the declaration a model is shown: %s", decl)
			}
			if width >= 1280 {
				// Beside, not below: the result and the declaration sit
				// right of the form.
				if beside := eval[bool](t, b, `document.querySelector(".try-side").getBoundingClientRect().left > document.querySelector(".try-form").getBoundingClientRect().right - 1`); !beside {
					t.Errorf("at %d px the result is not beside the form", width)
				}
			}
			fits(t, b, width, "the result")
			shoot(t, b, shots, fmt.Sprintf("console-%d-try.png", width))

			// A refund: an amount typed in words is refused in the form,
			// which keeps what was typed; in cents, the call waits for an
			// approval the page links to.
			b.open(t, s.base+"/console/catalog/demo.refund_order/try", "form")
			fill(t, b, "order_id", "o-501")
			fill(t, b, "amount_cents", "ten")
			fill(t, b, "reason", "arrived broken")
			if got := b.submit(t, "main form button[type=submit]"); got != http.StatusBadRequest {
				t.Fatalf("an amount in words answered %d\n%s", got, b.describe())
			}
			b.waitText(t, "main", "amount_cents: a whole number is needed")
			if kept := eval[string](t, b, fieldJS("order_id")+".value"); kept != "o-501" {
				t.Errorf("the form kept %q of the order typed", kept)
			}
			fits(t, b, width, "the refused form")
			fill(t, b, "amount_cents", "1290")
			if got := b.submit(t, "main form button[type=submit]"); got != http.StatusOK {
				t.Fatalf("the refund answered %d\n%s", got, b.describe())
			}
			b.waitText(t, "#outcome", "Waiting for approval")
			if n := eval[int](t, b, `document.querySelectorAll("#outcome a[href*='/console/approvals/apr_']").length`); n != 1 {
				t.Errorf("the pending approval is not linked\n%s", b.describe())
			}
			b.checkCSP(t)
			fits(t, b, width, "the pending approval")
			shoot(t, b, shots, fmt.Sprintf("console-%d-try-approval.png", width))
		})
	}
}

// fieldJS answers the JavaScript expression of the Try form's input for
// the argument named name (its label's first word).
func fieldJS(name string) string {
	return fmt.Sprintf(`document.getElementById([...document.querySelectorAll("form label[for]")].find(l => l.textContent.trim().split(/\s/)[0] === %s).htmlFor)`, jsString(name))
}

// fill sets the Try form's field for the argument name to value.
func fill(t *testing.T, b *browser, name, value string) {
	t.Helper()
	if !eval[bool](t, b, fmt.Sprintf(`(() => { const e = %s; e.value = %s; return true })()`, fieldJS(name), jsString(value))) {
		t.Fatalf("no field %s", name)
	}
}

// shoot saves a screenshot of the whole page as name in dir, when set.
func shoot(t *testing.T, b *browser, dir, name string) {
	t.Helper()
	if dir == "" {
		return
	}
	shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name), shot, 0o644); err != nil {
		t.Fatal(err)
	}
}

// fits fails the test when the page in the tab is wider than width,
// naming what reaches past it.
func fits(t *testing.T, b *browser, width int64, what string) {
	t.Helper()
	if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
		wide := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("body *")]
			.filter(e => e.getBoundingClientRect().right > %[1]d.5 && ![...e.children].some(c => c.getBoundingClientRect().right > %[1]d.5))
			.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " + Math.round(e.getBoundingClientRect().right) + "px")`, width))
		t.Errorf("%s at %d px: the page is %d px wide; past the screen: %q", what, width, w, wide)
	}
}
