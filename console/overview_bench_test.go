package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchEvents is how many audit events BenchmarkOverview's store holds
// (TOOLPLANE_BENCH_EVENTS overrides it, for a quicker run).
func benchEvents(b *testing.B) int {
	if v := os.Getenv("TOOLPLANE_BENCH_EVENTS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			b.Fatalf("TOOLPLANE_BENCH_EVENTS=%q: a positive number", v)
		}
		return n
	}
	return 1_000_000
}

// BenchmarkOverview measures the server time of an auditor's traffic
// overview page (the session read, the two traffic reads, the figures,
// the SVG charts, the page rendered) over a store holding 1,000,000
// audit events: nine in ten of the organization's, one in ten another
// organization's, spread over the last 30 days (about 30,000 of the
// organization's calls in the last day, 1,250 in the last hour), of 40
// tools and 12 agents, with refusals, failures, calls held for approval
// and costs among them. The events are written in bulk by SQL, as the
// audit writer would have stored them over a month. It runs on the
// embedded store (a SQLite file), and on PostgreSQL when the test server
// is set, for the last hour and the last day, and reports the median and
// the 95th and 99th percentiles besides the mean, and the first view's
// time (the day's first view on a node counts the steps the next views
// find kept).
func BenchmarkOverview(b *testing.B) {
	for _, backend := range backends() {
		b.Run(backend, func(b *testing.B) {
			w := newWorldOn(b, backend)
			seedTraffic(b, w, benchEvents(b), 30*24*time.Hour)
			browser := w.browser()
			browser.signIn("grace")
			u, _ := url.Parse(w.base)
			cookies := browser.hc.Jar.Cookies(u)
			for _, window := range []string{"hour", "day"} {
				b.Run(window, func(b *testing.B) {
					var took []time.Duration
					for b.Loop() {
						req := httptest.NewRequest("GET", "/console/overview?window="+window, nil)
						for _, c := range cookies {
							req.AddCookie(c)
						}
						rec := httptest.NewRecorder()
						t0 := time.Now()
						w.handler.ServeHTTP(rec, req)
						took = append(took, time.Since(t0))
						if rec.Code != http.StatusOK || !strings.Contains(rec.Body.String(), "tool.") || strings.Contains(rec.Body.String(), "theirs.tool") {
							b.Fatalf("overview: %d\n%.2000s", rec.Code, rec.Body.String())
						}
					}
					// The first view of the day counts each of its steps
					// that are over; the views after count only the steps
					// since (traffic.Service.read).
					b.ReportMetric(float64(took[0].Microseconds())/1000, "first-ms")
					slices.Sort(took)
					b.ReportMetric(float64(took[len(took)/2].Microseconds())/1000, "p50-ms")
					b.ReportMetric(float64(took[len(took)*95/100].Microseconds())/1000, "p95-ms")
					b.ReportMetric(float64(took[len(took)*99/100].Microseconds())/1000, "p99-ms")
				})
			}
		})
	}
}

// seedTraffic stores n call events in bulk, one every span/n back from
// now: nine in ten of the organization's, one in ten the other's.
func seedTraffic(b *testing.B, w *world, n int, span time.Duration) {
	b.Helper()
	ctx := context.Background()
	now := time.Now().UnixMicro()
	every := span.Microseconds() / int64(n)
	// The columns every event has, the rest left to their defaults. The
	// trail refuses an event without its place in the chain: these carry
	// sequence numbers far past any the store assigns, and placeholder
	// hashes (the overview never reads the chain; a verification of this
	// store would fail, as it should).
	cols := `organization_id, id, run_id, agent_id, principal_id, user_id, tool, tool_version, source, outcome,
		arguments_hash, approval_id, authorized_by, replayed, latency_micros, cost_cents, created_at, seq, prev_hash, hash`
	values := func(i, hash, blob, no string) string {
		return `CASE WHEN ` + i + ` % 10 = 0 THEN '` + other + `' ELSE '` + org + `' END,
		'aud_bench_' || ` + i + `, 'run-' || (` + i + ` / 5), 'agent-' || (` + i + ` % 12), 'principal', '',
		CASE WHEN ` + i + ` % 10 = 0 THEN 'theirs.tool' ELSE 'tool.' || (` + i + ` % 40) END, '1.0.0',
		CASE WHEN ` + i + ` % 3 = 0 THEN 'mcp' ELSE 'rest' END,
		CASE WHEN ` + i + ` % 97 = 0 THEN 'timeout' WHEN ` + i + ` % 31 = 0 THEN 'denied' WHEN ` + i + ` % 53 = 0 THEN 'approval_required'
			WHEN ` + i + ` % 41 = 0 THEN 'invalid_input' ELSE 'ok' END,
		` + hash + `, '', '', ` + no + `, (` + i + ` * 7919) % 400000 + 300, ` + i + ` % 7, ` + fmt.Sprint(now) + ` - ` + i + ` * ` + fmt.Sprint(every) + `,
		1000000000 + ` + i + `, ` + blob + `, ` + blob
	}
	t0 := time.Now()
	switch {
	case w.db != nil:
		// In chunks: one statement of a million rows holds the write
		// lock, and the page's session writes, for its whole length.
		const chunk = 100_000
		for from := 0; from < n; from += chunk {
			q := `INSERT INTO audit_events (` + cols + `)
				WITH RECURSIVE k(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM k WHERE i + 1 < ?)
				SELECT ` + values("i", "'sha256:0f3a'", "X'0f3a'", "0") + ` FROM k`
			if _, err := w.db.ExecContext(ctx, q, from, min(from+chunk, n)); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := w.db.ExecContext(ctx, `ANALYZE`); err != nil {
			b.Fatal(err)
		}
	case w.pool != nil:
		q := `INSERT INTO audit_events (` + cols + `)
			SELECT ` + values("i", `'\x0f3a'::bytea`, `'\x0f3a'::bytea`, "false") + ` FROM generate_series(0, $1::bigint - 1) AS i`
		if _, err := w.pool.Exec(ctx, q, n); err != nil {
			b.Fatal(err)
		}
		// What autovacuum does in time: the statistics, and the
		// visibility map an index-only scan reads.
		if _, err := w.pool.Exec(ctx, `VACUUM ANALYZE audit_events`); err != nil {
			b.Fatal(err)
		}
	default:
		b.Fatal("the world has neither database")
	}
	b.Logf("%d events stored in %s", n, time.Since(t0).Round(time.Millisecond))
}
