package browsertest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestConnectionsAndUpstreamsFitTheScreen opens the connections' and the
// upstream servers' pages (the lists and one page of each) at a phone's
// width (390 px) and a desktop's (1280 px), signed in as the operator, on
// a server fronting one upstream MCP server and holding one connection:
// no page is wider than the screen, none breaks its
// Content-Security-Policy, and a list's rows keep their column's name
// (data-label) for when they collapse to cards. Screenshots are kept in
// $TOOLPLANE_SCREENSHOTS (or $TOOLPLANE_TEST_SCREENSHOTS) when set.
func TestConnectionsAndUpstreamsFitTheScreen(t *testing.T) {
	t.Parallel()
	up := mcp.NewServer(&mcp.Implementation{Name: "tickets", Version: "1"}, nil)
	mcp.AddTool(up, &mcp.Tool{Name: "find_ticket_by_customer_reference_and_status", Description: "Finds a ticket."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			Reference string `json:"reference"`
			Status    string `json:"status"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.Reference}}}, nil, nil
		})
	mcp.AddTool(up, &mcp.Tool{Name: "close", Description: "Closes a ticket."},
		func(_ context.Context, _ *mcp.CallToolRequest, in struct {
			ID string `json:"id"`
		}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: in.ID}}}, nil, nil
		})
	ups := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return up }, nil))
	t.Cleanup(ups.Close)
	s := startServer(t, "--upstream", "tickets="+ups.URL)
	created := s.must(t, "POST", "/v1/connections", s.admin, `{"name":"orders-api-with-a-rather-long-name","provider":"orders","kind":"static",
		"config":{"base_url":"https://api.orders.example/v2/accounts/primary","egress":{"hosts":["api.orders.example"]}},
		"scope":{"tools":["orders.*"],"max_amount_cents_per_call":50000},"secrets":{"token":"tok-browser-secret-91ab"}}`, http.StatusCreated)
	conn := created["connection"].(map[string]any)["id"].(string)

	shots := os.Getenv("TOOLPLANE_SCREENSHOTS")
	if shots == "" {
		shots = os.Getenv("TOOLPLANE_TEST_SCREENSHOTS")
	}
	if shots == "" {
		shots = t.TempDir()
	}
	pages := []struct{ name, path, sel, holds string }{
		{"connections", "/console/connections", "main table", "orders-api-with-a-rather-long-name"},
		{"connection", "/console/connections/" + conn, "main .card", "api.orders.example"},
		{"upstreams", "/console/upstreams", "main table", "tickets"},
		{"upstream", "/console/upstreams/tickets", "main table.upstream-tools", "find_ticket_by_customer_reference_and_status"},
	}
	for _, width := range []int64{390, 1280} {
		t.Run(fmt.Sprintf("%dpx", width), func(t *testing.T) {
			b := newBrowser(t)
			if width < 1000 {
				b.do(t, "a phone's screen", chromedp.EmulateViewport(width, 844, chromedp.EmulatePortrait, chromedp.EmulateMobile, chromedp.EmulateTouch))
			} else {
				b.do(t, "a desktop's screen", chromedp.EmulateViewport(width, 900))
			}
			b.open(t, s.base+"/console/connections", "#key")
			b.do(t, "paste the admin's key", chromedp.SendKeys(chromedp.CSS("#key"), s.admin))
			if got := b.submit(t, "form button[type=submit]"); got != http.StatusOK {
				t.Fatalf("signing in answered %d\n%s", got, b.describe())
			}
			b.waitFor(t, "in the console", `location.pathname.startsWith("/console/")`)
			for _, pg := range pages {
				b.open(t, s.base+pg.path, pg.sel)
				b.checkCSP(t)
				if text := b.text(t, "main"); !strings.Contains(text, pg.holds) {
					t.Errorf("%s at %d px does not show %q:\n%s", pg.name, width, pg.holds, text)
				}
				if strings.Contains(eval[string](t, b, "document.documentElement.outerHTML"), "tok-browser-secret-91ab") {
					t.Errorf("%s shows the connection's secret", pg.name)
				}
				if w := eval[int64](t, b, "document.documentElement.scrollWidth"); w > width {
					wide := eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll("body *")]
						.filter(e => e.getBoundingClientRect().right > %[1]d.5 && ![...e.children].some(c => c.getBoundingClientRect().right > %[1]d.5))
						.slice(0, 5).map(e => e.tagName.toLowerCase() + (e.className ? "." + e.className : "") + " " + Math.round(e.getBoundingClientRect().right) + "px: " + (e.innerText || "").slice(0, 40))`, width))
					t.Errorf("%s at %d px: the page is %d px wide; past the screen: %q", pg.name, width, w, wide)
				}
				if unlabelled := eval[int64](t, b, `document.querySelectorAll("main td:not([data-label])").length`); unlabelled > 0 {
					t.Errorf("%s: %d cells have no data-label to show beside them as a card", pg.name, unlabelled)
				}
				shot, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
				if err != nil {
					t.Fatal(err)
				}
				if !strings.HasPrefix(string(shot), "\x89PNG") {
					t.Errorf("%s: the screenshot is not a PNG", pg.name)
				}
				if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("console-%d-%s.png", width, pg.name)), shot, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}
