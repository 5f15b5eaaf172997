package browsertest

import (
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// TestInboxInABrowser drives the inbox as an approver does, at a phone's
// 390 px and a desktop's 1280 px, in a browser set to Tokyo's time zone:
// the page is no wider than the screen and breaks none of its
// Content-Security-Policy; every time on it is rewritten from the
// server's UTC to Tokyo's clock and how long ago it was, the UTC kept in
// its title; j and k move between the cards, a asks the browser's
// confirmation to approve the current one (dismissed, nothing is
// decided; accepted, it is), and / goes to the search, whose form
// narrows the list without the script. A screenshot of each width is
// kept in $TOOLPLANE_SCREENSHOTS (or $TOOLPLANE_TEST_SCREENSHOTS) when
// set.
func TestInboxInABrowser(t *testing.T) {
	t.Parallel()
	s := startServer(t)
	shots := os.Getenv("TOOLPLANE_SCREENSHOTS")
	if shots == "" {
		shots = os.Getenv("TOOLPLANE_TEST_SCREENSHOTS")
	}
	if shots == "" {
		shots = t.TempDir()
	}
	if err := os.MkdirAll(shots, 0o755); err != nil {
		t.Fatal(err)
	}
	tokyo := time.FixedZone("JST", 9*60*60) // Tokyo keeps no summer time
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprintf("%dpx", width), func(t *testing.T) {
			run := fmt.Sprintf("run-inbox-%d", width)
			var ids []string
			for i, cents := range []int{1290, 45000, 700} {
				filed := s.call(t, s.agent, "demo.refund_order", run, map[string]any{"order_id": fmt.Sprintf("o-%d-%d", width, i), "amount_cents": cents, "reason": "arrived broken"})
				if filed.Approval == nil {
					t.Fatalf("the refund answered %d %s, want an approval", filed.status, filed.code())
				}
				ids = append(ids, filed.Approval.ID)
			}
			b := newBrowser(t)
			// The browser's dialogs are answered as the test says: each
			// one opened is recorded, then accepted or dismissed.
			dialogs := make(chan string, 8)
			accept := make(chan bool, 8)
			if err := chromedp.Listen(b.ctx, func(ev any) {
				if e, ok := ev.(*page.EventJavascriptDialogOpening); ok {
					dialogs <- e.Message
				}
			}); err != nil {
				t.Fatal(err)
			}
			answer := func(what string, yes bool) string {
				t.Helper()
				select {
				case msg := <-dialogs:
					accept <- yes
					if _, err := chromedp.Call(b.ctx, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: yes}); err != nil {
						t.Fatalf("%s: answering the dialog: %v", what, err)
					}
					return msg
				case <-time.After(stepTimeout):
					t.Fatalf("%s: no confirmation opened\n%s", what, b.describe())
				}
				return ""
			}
			if width < 1000 {
				b.do(t, "a phone's screen", chromedp.EmulateViewport(width, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
			} else {
				b.do(t, "a desktop's screen", chromedp.EmulateViewport(width, 900))
			}
			if _, err := chromedp.Call(b.ctx, emulation.SetTimezoneOverride, emulation.SetTimezoneOverrideParams{TimezoneID: "Asia/Tokyo"}); err != nil {
				t.Fatal(err)
			}
			inbox := s.base + "/console/approvals?q=" + run
			b.signIn(t, inbox, s.admin, "main")
			b.waitFor(t, "the three refunds listed", `document.querySelectorAll("main article.card [data-open]").length === 3`)
			b.checkCSP(t)
			if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
				t.Errorf("the inbox at %d px is %d px wide", width, w)
			}

			// Times: Tokyo's clock and how long ago, UTC in the title.
			if tz := eval[string](t, b, `Intl.DateTimeFormat().resolvedOptions().timeZone`); tz != "Asia/Tokyo" {
				t.Fatalf("the browser's time zone is %q", tz)
			}
			b.waitFor(t, "the times rewritten", `[...document.querySelectorAll("main time[datetime]")].every(e => e.hasAttribute("data-local"))`)
			type shown struct {
				Datetime, Text, Title string
			}
			times := eval[[]shown](t, b, `[...document.querySelectorAll("main time[datetime]")].map(e => ({Datetime: e.getAttribute("datetime"), Text: e.textContent, Title: e.title}))`)
			if len(times) < 3 {
				t.Fatalf("%d times on the inbox", len(times))
			}
			for _, tm := range times {
				at, err := time.Parse(time.RFC3339, tm.Datetime)
				if err != nil {
					t.Fatalf("datetime %q: %v", tm.Datetime, err)
				}
				local := at.In(tokyo).Format("3:04 PM")
				utc := at.UTC().Format("2006-01-02 15:04:05 UTC")
				if !strings.Contains(tm.Text, local) || strings.Contains(tm.Text, "UTC") || !strings.Contains(tm.Title, utc) || !strings.Contains(tm.Title, "GMT+9") {
					t.Errorf("the time %s shows %q (title %q), want Tokyo's %s and the UTC %s in the title", tm.Datetime, tm.Text, tm.Title, local, utc)
				}
			}
			filed := eval[string](t, b, `document.querySelector("main article.card dd time").textContent`)
			if !strings.Contains(filed, "ago") && !strings.Contains(filed, "now") {
				t.Errorf("the filing time %q does not say how long ago", filed)
			}

			// Keyboard: j, j, k land on the second card; a asks to approve it.
			current := `(() => { const cs = [...document.querySelectorAll("main article.card")].filter(c => c.querySelector("[data-open]")); return cs.findIndex(c => c === document.activeElement && c.hasAttribute("data-current")); })()`
			b.do(t, "j", chromedp.KeyEvent("j"))
			if i := eval[int](t, b, current); i != 0 {
				t.Fatalf("after j the current card is %d, want 0", i)
			}
			b.do(t, "j j k", chromedp.KeyEvent("j"), chromedp.KeyEvent("j"), chromedp.KeyEvent("k"))
			if i := eval[int](t, b, current); i != 1 {
				t.Fatalf("after j j j k the current card is %d, want 1", i)
			}
			second := eval[string](t, b, `document.querySelectorAll("main article.card [data-open]")[1].getAttribute("href").split("/").pop()`)
			go func() { _ = chromedp.Do(b.ctx, chromedp.KeyEvent("a")) }()
			if msg := answer("a, dismissed", false); !strings.HasPrefix(msg, "Approve demo.refund_order ("+second+")") {
				t.Errorf("the confirmation says %q", msg)
			}
			<-accept
			status := s.must(t, "GET", "/v1/approvals/"+second, s.admin, "", http.StatusOK)
			if status["status"] != "pending" {
				t.Fatalf("a dismissed confirmation decided: %v", status["status"])
			}
			if width == 1280 {
				// The shortcuts' list opens with ?, as the page says.
				b.do(t, "?", chromedp.KeyEvent("?"))
				b.waitFor(t, "the shortcuts shown", `document.getElementById("shortcuts").open`)
			}
			shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("inbox-%d.png", width)), shot, 0o644); err != nil {
				t.Fatal(err)
			}
			b.do(t, "back to the second card", chromedp.Focus(chromedp.CSS("main article.card:nth-of-type(2)")))
			if i := eval[int](t, b, current); i != 1 {
				b.do(t, "j j", chromedp.KeyEvent("j"), chromedp.KeyEvent("j"))
			}
			go func() { _ = chromedp.Do(b.ctx, chromedp.KeyEvent("a")) }()
			answer("a, accepted", true)
			<-accept
			b.waitText(t, "p.notice", "Your answer to "+second+" was recorded.")
			pollREST(t, "the approval approved", func() bool {
				return s.must(t, "GET", "/v1/approvals/"+second, s.admin, "", http.StatusOK)["status"] == "approved"
			})
			if where := eval[string](t, b, "location.search"); !strings.Contains(where, "q="+run) {
				t.Errorf("after the answer the list is %s, not the one answered from", where)
			}
			b.checkCSP(t)

			// / goes to the search, once the new page's script runs (it
			// has when its times are rewritten); the form narrows the list.
			b.waitFor(t, "the script running", `document.querySelector("main time[data-local]")`)
			b.do(t, "/", chromedp.KeyEvent("/"))
			if f := eval[string](t, b, `document.activeElement.id`); f != "q" {
				t.Fatalf("after / the focus is on %q", f)
			}
			// DevTools sends a key's character apart from its keydown,
			// which a person's browser does not: the field is emptied of
			// the slash it may have received.
			b.do(t, "search one order", chromedp.Evaluate[chromedp.Void](`document.getElementById("q").value = ""`), chromedp.KeyEvent(fmt.Sprintf("o-%d-2", width)))
			if got := b.submit(t, "form.filters button[type=submit]"); got != http.StatusOK {
				t.Fatalf("searching answered %d", got)
			}
			b.waitFor(t, "one refund listed", `document.querySelectorAll("main article.card [data-open]").length === 1`)
			if got := eval[string](t, b, `document.querySelector("main article.card [data-open]").getAttribute("href")`); !strings.HasSuffix(got, ids[2]) {
				t.Errorf("the search lists %s, want %s", got, ids[2])
			}
			if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
				t.Errorf("the searched inbox at %d px is %d px wide", width, w)
			}
			b.checkCSP(t)
		})
	}
}
