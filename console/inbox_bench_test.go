package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// BenchmarkInboxFiltered measures the server time of an approver's
// filtered inbox page with 10,000 approvals pending in the organization,
// two fifths of them the approver's to answer: narrowed by tool and
// agent (a full page), by words matching ten approvals among the oldest
// (the query walks the person's groups to the end), and by amount (judged
// by the service in its bounded reads). It reports the median and the
// 99th percentile besides the mean, on the embedded store and on
// PostgreSQL when the test server is set.
func BenchmarkInboxFiltered(b *testing.B) {
	for _, backend := range backends() {
		b.Run(backend, func(b *testing.B) {
			w := newWorldOn(b, backend)
			seedFilteredInbox(b, w, 10_000)
			browser := w.browser()
			browser.signIn("fin")
			u, _ := url.Parse(w.base)
			cookies := browser.hc.Jar.Cookies(u)
			for _, q := range []struct {
				name, query string
				cards       int // -1: some, fewer than a page
			}{
				{"tool-agent", "tool=xss.meter&agent=agent-billing", 50},
				{"rare-words", "q=apr_inb_0099", 4},
				// Five in a hundred of the person's name $95 or more: the
				// service's four reads end the page short.
				{"amount", "min=95", -1},
			} {
				b.Run(q.name, func(b *testing.B) {
					var took []time.Duration
					for b.Loop() {
						req := httptest.NewRequest("GET", "/console/approvals?"+q.query, nil)
						for _, c := range cookies {
							req.AddCookie(c)
						}
						rec := httptest.NewRecorder()
						t0 := time.Now()
						w.handler.ServeHTTP(rec, req)
						took = append(took, time.Since(t0))
						if n := strings.Count(rec.Body.String(), `<article class="card">`); rec.Code != http.StatusOK || n != q.cards && (q.cards >= 0 || n == 0) {
							b.Fatalf("%s: %d, %d approvals, want %d", q.query, rec.Code, n, q.cards)
						}
					}
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}

// seedFilteredInbox stores n pending approvals, routed in turn to
// finance, no group, ops, legal and support, of xss.pay and xss.meter in
// turn, whose previews name $0.00 to $99.99 in turn.
func seedFilteredInbox(b *testing.B, w *world, n int) {
	ctx := context.Background()
	groups := []string{"finance", "", "ops", "legal", "support"}
	start := time.Now().Add(-time.Hour)
	for i := range n {
		tool := []string{"xss.pay", "xss.meter"}[i%2]
		a := &toolplane.Approval{
			ID: fmt.Sprintf("apr_inb_%05d", i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i), StepPath: "agent",
			Tool: tool, ToolVersion: "1.0.0", Key: fmt.Sprintf("key-%d", i), ArgumentsHash: "sha256:x", Arguments: []byte(`{}`),
			Invocation:  fmt.Appendf(nil, `{"OrganizationID":%q,"AgentID":"agent-billing","RunID":"run-%d"}`, org, i),
			PrincipalID: "agent-billing", Preview: fmt.Sprintf("Refund $%d.%02d", i%100, i%97), Status: toolplane.ApprovalPending, DefaultOnTimeout: "deny",
			ApproverGroup: groups[i%len(groups)], CreatedAt: start.Add(time.Duration(i) * time.Millisecond), ExpiresAt: start.Add(24 * time.Hour),
		}
		if err := w.store.InsertApproval(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
}
