package browsertest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/chromedp"

	"github.com/toolplane/toolplane/policy"
)

// sweepPages are the console's pages the sweep visits, each with the
// element it waits for. A path may name what the sweep made before it
// visits: {approval} (a pending approval's ID), {event} (an audit
// event's page), {tool} (a tool version's page) and {longrun} (a run whose
// id is one long word). A new page is one
// line here.
var sweepPages = []struct{ name, path, sel string }{
	{"inbox", "/console/approvals", "main"},
	{"approvals-approved", "/console/approvals?status=approved", "main"},
	{"approval", "/console/approvals/{approval}", "#reason"},
	{"uncertain", "/console/uncertain", "main article"},
	{"audit", "/console/audit", "main table"},
	{"audit-event", "{event}", "main dl"},
	{"audit-purges", "/console/audit/purges", "main table"},
	{"audit-sinks", "/console/audit/sinks", "main table"},
	{"catalog", "/console/catalog", "main table"},
	{"catalog-search", "/console/catalog?q=refund+an+order", "main"},
	{"catalog-review", "/console/catalog?state=in_review", "main table"},
	{"tool", "{tool}", "main dl"},
	{"access", "/console/access", "main table"},
	{"explain", "/console/access/explain?agent=demo-agent", "main table"},
	{"keys", "/console/access/keys", "main table"},
	{"notifications", "/console/notifications", "main"},
	{"anomalies", "/console/anomalies", "main"},
	{"spend", "/console/spend", "main table"},
	{"overview", "/console/overview", "main svg"},
	{"overview-day", "/console/overview?window=day", "main svg"},
	{"inbox-filtered", "/console/approvals?q=refund&tool=demo.refund_order", "main"},
	{"run", "/console/runs/run-sweep", "main"},
	{"run-long", "/console/runs/{longrun}", "main"},
	{"try", "/console/catalog/demo.refund_order/try", "main form"},
	{"connections", "/console/connections", "main"},
	{"upstreams", "/console/upstreams", "main"},
	{"policy", "/console/policy", "main table"},
	{"policy-version", "/console/policy/2", "main .diff"},
	{"not-found", "/console/no-such-page", "main .error"},
}

// sweepScreens are the screens the sweep looks at each page on: a phone
// (390 px, as approvers open links from Slack or email) and a desktop
// (1280 px), light, and the desktop in the dark theme a browser asks for.
var sweepScreens = []screen{
	{"390", 390, 844, true, false},
	{"1280", 1280, 900, false, false},
	{"1280-dark", 1280, 900, false, true},
}

// screen is a screen the console is looked at on (sweepScreens).
type screen struct {
	name          string
	width, height int64
	phone, dark   bool
}

// useScreen makes the tab show pages as sc does: its size, a phone's
// touch and portrait when it is one, and its colour theme.
func (b *browser) useScreen(t *testing.T, sc screen) {
	t.Helper()
	var opts []chromedp.EmulateViewportOption
	if sc.phone {
		opts = append(opts, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch)
	}
	b.do(t, "the "+sc.name+" screen", chromedp.EmulateViewport(sc.width, sc.height, opts...))
	scheme := "light"
	if sc.dark {
		scheme = "dark"
	}
	b.do(t, "the "+scheme+" theme", chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
			Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}})
		return err
	}))
}

// TestConsoleSweep signs in as an administrator and opens every console
// page on each of sweepScreens: no page scrolls sideways, none breaks its
// Content-Security-Policy, axe-core finds nothing serious or critical on
// any, and the skip link is the keyboard's first stop. Each page's
// screenshot on each screen is saved (screenshotDir). A person whose
// roles open only the catalogue is offered only the catalogue.
func TestConsoleSweep(t *testing.T) {
	t.Parallel()
	axe := axeSource(t)
	s := startShop(t, "Wire money to a supplier.")
	shots := screenshotDir(t)

	// What the pages show: an approval waiting, a write whose answer was
	// lost (uncertain), and the audit events of both.
	filed := s.call(t, s.agent, "demo.refund_order", "run-sweep", map[string]any{"order_id": "o-1280", "amount_cents": 1290, "reason": "arrived broken"})
	if filed.Approval == nil {
		t.Fatalf("the refund answered %d %s, want an approval", filed.status, filed.code())
	}
	// Its run's id is one long word, as generated ids are: it wraps in
	// its cell rather than widening a table.
	longRun := "run-sweep-lost-" + strings.Repeat("9f8e7d6c5b4a", 16)
	if r := s.call(t, s.agent, "shop.refund", longRun, map[string]any{"id": "o-777", "amount_cents": 900}); r.code() != "uncertain" {
		t.Fatalf("the lost refund answered %d %s, want uncertain", r.status, r.code())
	}

	// Two versions of the example Cedar rules, the second with a line
	// added: the policy pages show a list, a diff and the tests.
	rules, err := policy.ReadBundleDir("../../examples/policy/cedar")
	if err != nil {
		t.Fatal(err)
	}
	for i, note := range []string{"the example rules", "a reviewed line added"} {
		if i == 1 {
			rules["refunds.cedar"] = "// Reviewed.\n" + rules["refunds.cedar"]
		}
		body, _ := json.Marshal(map[string]any{"files": rules, "note": note})
		s.must(t, "POST", "/v1/policy/bundles", s.admin, string(body), http.StatusCreated)
	}

	b := newBrowser(t)
	b.signIn(t, s.base+"/console/approvals", s.admin, "main")
	where := map[string]string{"{approval}": filed.Approval.ID, "{longrun}": longRun}
	b.open(t, s.base+"/console/audit", "main table a")
	where["{event}"] = eval[string](t, b, `document.querySelector("main table a[href*='/console/audit/']").getAttribute("href")`)
	b.open(t, s.base+"/console/catalog", "main table a")
	where["{tool}"] = eval[string](t, b, `document.querySelector("main table a[href*='/console/catalog/']").getAttribute("href")`)
	fill := func(p string) string {
		for k, v := range where {
			p = strings.ReplaceAll(p, k, v)
		}
		return p
	}

	for _, sc := range sweepScreens {
		b.useScreen(t, sc)
		for _, pg := range sweepPages {
			what := fmt.Sprintf("%s at %s", pg.name, sc.name)
			b.open(t, s.base+fill(pg.path), pg.sel)
			b.checkCSP(t)
			b.checkOverflow(t, what, sc.width)
			b.checkAxe(t, axe, what)
			b.screenshot(t, shots, "console-"+sc.name+"-"+pg.name)
		}
	}

	// The keyboard's first stop is the skip link, shown when focused, and
	// it leads to the page's content.
	b.open(t, s.base+"/console/audit", "main table")
	b.do(t, "tab", chromedp.KeyEvent("\t"))
	if got := eval[string](t, b, `document.activeElement.className + " " + (document.activeElement.getBoundingClientRect().left >= 0)`); got != "skip true" {
		t.Errorf("the first tab stops at %q, want the skip link, on the screen", got)
	}
	b.do(t, "follow the skip link", chromedp.KeyEvent("\r"))
	b.waitFor(t, "the content focused", `document.activeElement === document.querySelector("main")`)

	// Every action is reachable by the keyboard alone: on each page, at
	// 1280 px, Tab from the top stops at every link, button and field
	// shown (a radio group once), in a browser of its own so the walk
	// has its own time bound.
	kb := newBrowser(t)
	kb.signIn(t, s.base+"/console/approvals", s.admin, "main")
	for _, pg := range sweepPages {
		kb.open(t, s.base+fill(pg.path), pg.sel)
		kb.checkKeyboard(t, pg.name)
	}

	// A tool owner's roles open the catalogue, and every person their own
	// connections: the navigation offers nothing else.
	owner := s.mint(t, "person", "tess", "tool_owner:shop")
	lo := newBrowser(t)
	lo.signIn(t, s.base+"/console/catalog", owner, "main table")
	nav := eval[[]string](t, lo, `[...document.querySelectorAll("header nav a")].map(a => a.getAttribute("href"))`)
	if !slices.Equal(nav, []string{"/console/catalog", "/console/connections"}) {
		t.Errorf("a tool owner's navigation offers %v, want the catalogue and their connections alone", nav)
	}
	lo.open(t, s.base+"/console/audit", "main .error")
	if got := lo.text(t, "main .error .code"); got != "denied" {
		t.Errorf("a tool owner opening the audit trail: %q, want denied", got)
	}
	if resp, err := http.Get(s.base + "/console/assets/favicon.svg"); err != nil || resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" {
		t.Errorf("the favicon: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
}

// keyboardMarks marks each action the page shows (a link, a button, a
// field, a summary, anything else given a tab stop; a radio group as
// one) with the key the walk notes it by, starts noting every focus, and
// answers how many there are. Hidden ones (a closed details' content, a
// field of type hidden, a disabled one) are not actions a person has.
const keyboardMarks = `(() => {
	const sel = 'a[href], button, input:not([type=hidden]), select, textarea, summary, [tabindex]:not([tabindex="-1"])';
	const keys = new Set();
	for (const e of document.querySelectorAll(sel)) {
		if (e.disabled || e.getClientRects().length === 0 || getComputedStyle(e).visibility === 'hidden') continue;
		if (e.closest('details:not([open])') && e.tagName !== 'SUMMARY') continue;
		const k = e.type === 'radio' ? 'radio:' + e.name : 'kb' + keys.size;
		e.dataset.kb = k;
		keys.add(k);
	}
	window.__kbSeen = new Set();
	document.addEventListener('focusin', ev => { const k = ev.target.dataset && ev.target.dataset.kb; if (k) window.__kbSeen.add(k); });
	if (document.activeElement) document.activeElement.blur();
	window.scrollTo(0, 0);
	return keys.size;
})()`

// keyboardMissed answers the actions the walk never reached, each as the
// start of its HTML.
const keyboardMissed = `[...document.querySelectorAll('[data-kb]')].filter(e => !window.__kbSeen.has(e.dataset.kb)).map(e => e.outerHTML.slice(0, 120))`

// checkKeyboard presses Tab from the top of the page, ten at a time,
// until every action has been reached or the page has had three Tabs for
// each of its actions (a scrolled region is a stop of its own too), and
// fails the test for each action no Tab reached.
func (b *browser) checkKeyboard(t *testing.T, what string) {
	t.Helper()
	n := eval[int](t, b, keyboardMarks)
	tabs := make([]chromedp.Action[chromedp.Void], 10)
	for i := range tabs {
		tabs[i] = chromedp.KeyEvent("\t")
	}
	missed := eval[[]string](t, b, keyboardMissed)
	for pressed := 0; len(missed) > 0 && pressed < 3*n+20; pressed += len(tabs) {
		b.do(t, "tab through "+what, tabs...)
		missed = eval[[]string](t, b, keyboardMissed)
	}
	for _, m := range missed {
		t.Errorf("%s: the keyboard never reaches %s", what, m)
	}
}
