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
	"github.com/toolplane/toolplane/audit"
	"github.com/toolplane/toolplane/canonical"
)

// BenchmarkInbox measures the server time of an approver's inbox page
// (the session read, the approval service's inbox, the page rendered)
// with 10,000 approvals pending in the organization, a fifth of them
// routed to the approver's group and a fifth to no group, half of them
// calls of a metered tool (each card then shows the tool's cost estimate
// and its own run's spend, read from 2,000 usage rows), on the embedded
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
	const used = 2_000
	for i := range used {
		u := &toolplane.Usage{ID: fmt.Sprintf("use_bench_%05d", i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i*5),
			RootRunID: fmt.Sprintf("run-%d", i*5), Tool: "xss.meter", CostCents: int64(i % 40), Units: 1, CreatedAt: start.Add(time.Duration(i) * time.Millisecond)}
		if err := w.store.InsertUsage(ctx, u); err != nil {
			b.Fatal(err)
		}
	}
	for i := range pending {
		tool, version := "xss.pay", "1.2.0"
		if i%2 == 1 {
			tool, version = "xss.meter", "1.0.0"
		}
		a := &toolplane.Approval{
			ID: fmt.Sprintf("apr_bench_%05d", i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i), StepPath: "agent",
			Tool: tool, ToolVersion: version, Key: fmt.Sprintf("key-%d", i), ArgumentsHash: hash, Arguments: args,
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

// BenchmarkAuditSearch measures the server time of an auditor's audit
// search (the session read, the trail's query, the page rendered) among
// 10,000 events of the organization on the embedded store (a SQLite
// file): one person's failed calls within the last day, a page of 50. It
// reports the median and the 99th percentile besides the mean.
func BenchmarkAuditSearch(b *testing.B) {
	w := newWorld(b)
	const events = 10_000
	ctx := context.Background()
	users := []string{"user-ada", "user-bob", "user-cy", "user-dee", ""}
	outcomes := []string{"ok", "ok", "denied", "approval_required", "invalid_input", "ok", "timeout"}
	start := time.Now().Add(-2 * time.Hour)
	batch := make([]*toolplane.AuditEvent, 0, 500)
	for i := range events {
		batch = append(batch, &toolplane.AuditEvent{ID: fmt.Sprintf("aud_bench_%05d", i), OrganizationID: org, RunID: fmt.Sprintf("run-%d", i),
			AgentID: "agent-billing", UserID: users[i%len(users)], Tool: "xss.pay", ToolVersion: "1.2.0", Source: toolplane.SourceMCP,
			Outcome: outcomes[i%len(outcomes)], ArgumentsHash: "sha256:0f3a", LatencyMicros: 900,
			PolicyInput: []byte(`{"arguments":{"account":"[redacted]"},"tool":{"name":"xss.pay"}}`), CreatedAt: start.Add(time.Duration(i) * 500 * time.Millisecond)})
		if len(batch) == cap(batch) {
			if err := w.store.(audit.Batcher).AppendAuditBatch(ctx, batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	browser := w.browser()
	browser.signIn("grace")
	u, _ := url.Parse(w.base)
	cookies := browser.hc.Jar.Cookies(u)
	search := "/console/audit?" + url.Values{"user": {"user-bob"}, "outcome": {"error"},
		"since": {time.Now().Add(-24 * time.Hour).UTC().Format("2006-01-02T15:04")}}.Encode()

	var took []time.Duration
	for b.Loop() {
		req := httptest.NewRequest("GET", search, nil)
		for _, c := range cookies {
			req.AddCookie(c)
		}
		rec := httptest.NewRecorder()
		t0 := time.Now()
		w.handler.ServeHTTP(rec, req)
		took = append(took, time.Since(t0))
		if rows := strings.Count(rec.Body.String(), `<tr><td><a href=`); rec.Code != http.StatusOK || rows != 50 {
			b.Fatalf("search: %d, %d events", rec.Code, rows)
		}
	}
	slices.Sort(took)
	b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
}
