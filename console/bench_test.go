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
	"github.com/toolplane/toolplane/canonical"
)

// BenchmarkInbox measures the server time of an approver's inbox page
// (the session read, the approval service's inbox, the page rendered)
// with 10,000 approvals pending in the organization, a fifth of them
// routed to the approver's group and a fifth to no group, on the embedded
// store (a SQLite file), and on PostgreSQL when the test server is set. It
// reports the median and the 99th percentile of the page's time besides
// the mean.
func BenchmarkInbox(b *testing.B) {
	for _, backend := range backends() {
		b.Run(backend, func(b *testing.B) { benchInbox(b, newWorldOn(b, backend)) })
	}
}

func benchInbox(b *testing.B, w *world) {
	const pending = 10_000
	ctx := context.Background()
	groups := []string{"finance", "", "ops", "legal", "support"}
	args := fmt.Appendf(nil, `{"account":%q,"note":"refund of order 5521"}`, account)
	hash, err := canonical.HashJSON(args)
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now().Add(-time.Hour)
	for i := range pending {
		a := &toolplane.Approval{
			ID: fmt.Sprintf("apr_bench_%05d", i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i), StepPath: "agent",
			Tool: "xss.pay", ToolVersion: "1.2.0", Key: fmt.Sprintf("key-%d", i), ArgumentsHash: hash, Arguments: args,
			Invocation:  fmt.Appendf(nil, `{"OrganizationID":%q,"AgentID":"agent-billing","RunID":"run-%d"}`, org, i),
			PrincipalID: "agent-billing", Preview: "Pay to " + account, Status: toolplane.ApprovalPending, DefaultOnTimeout: "deny",
			ApproverGroup: groups[i%len(groups)], CreatedAt: start.Add(time.Duration(i) * time.Millisecond), ExpiresAt: start.Add(24 * time.Hour),
		}
		if err := w.store.InsertApproval(ctx, a); err != nil {
			b.Fatal(err)
		}
	}
	browser := w.browser()
	browser.signIn("fin")
	u, _ := url.Parse(w.base)
	cookies := browser.hc.Jar.Cookies(u)

	var took []time.Duration
	for b.Loop() {
		req := httptest.NewRequest("GET", "/console/approvals", nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		t0 := time.Now()
		w.handler.ServeHTTP(rec, req)
		took = append(took, time.Since(t0))
		if rec.Code != http.StatusOK || strings.Count(rec.Body.String(), `<article class="card">`) != 50 {
			b.Fatalf("inbox: %d, %d approvals", rec.Code, strings.Count(rec.Body.String(), `<article class="card">`))
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}
