package server

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// A served node keeps an organization's daily spend ceiling on each
// store: an administrator sets it over REST, metered calls are refused
// with budget_exhausted naming it once the day reached it, the report by
// tool and by agent matches the usage, and an agent reads none of it.
func TestDailySpendCeilingOnAServedNode(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true}
			e.start(t, dir)
			agent := readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]

			e.must(t, "PUT", "/v1/spend/ceiling", e.admin, `{"daily_cents":0}`, http.StatusBadRequest)
			e.must(t, "PUT", "/v1/spend/ceiling", agent, `{"daily_cents":5}`, http.StatusForbidden)
			e.must(t, "GET", "/v1/spend?by=agent", agent, "", http.StatusForbidden)
			set := e.must(t, "PUT", "/v1/spend/ceiling", e.admin, `{"daily_cents":3}`, http.StatusOK)
			if c, _ := set["ceiling"].(map[string]any); c["daily_cents"] != 3.0 || set["exhausted"] != false {
				t.Fatalf("set: %v", set)
			}
			text := strings.Repeat("a", 1500) // 2 cents a call
			var codes []string
			for i := range 3 {
				r := e.call(t, agent, "demo.analyze_text", map[string]any{"text": text}, fmt.Sprint("run-spend-", i), "")
				codes = append(codes, r.code())
				if i == 2 && (r.Error == nil || !strings.Contains(r.Error.Message, "daily spend ceiling of 3 cents") || !strings.Contains(r.Error.Message, "4 cents spent")) {
					t.Fatalf("the refusal: %s", r.raw)
				}
			}
			if strings.Join(codes, ",") != "ok,ok,budget_exhausted" {
				t.Fatalf("codes %v, want two calls and a refusal", codes)
			}
			status := e.must(t, "GET", "/v1/spend/ceiling", e.admin, "", http.StatusOK)
			if status["spent_cents"] != 4.0 || status["calls"] != 2.0 || status["exhausted"] != true {
				t.Fatalf("status: %v", status)
			}
			for by, key := range map[string]string{"tool": "demo.analyze_text", "agent": "demo-agent"} {
				rep := e.must(t, "GET", "/v1/spend?by="+by, e.admin, "", http.StatusOK)
				lines, _ := rep["lines"].([]any)
				if rep["total_cents"] != 4.0 || len(lines) != 1 || lines[0].(map[string]any)["key"] != key || lines[0].(map[string]any)["cost_cents"] != 4.0 {
					t.Fatalf("report by %s: %v", by, rep)
				}
			}
			e.must(t, "GET", "/v1/spend?by=person", e.admin, "", http.StatusBadRequest)
			e.must(t, "GET", "/v1/spend?from=yesterday", e.admin, "", http.StatusBadRequest)
			e.must(t, "DELETE", "/v1/spend/ceiling", e.admin, "", http.StatusOK)
			e.must(t, "DELETE", "/v1/spend/ceiling", e.admin, "", http.StatusNotFound)
			if r := e.call(t, agent, "demo.analyze_text", map[string]any{"text": text}, "run-spend-after", ""); r.code() != "ok" {
				t.Fatalf("after the ceiling was lifted: %s", r.raw)
			}
		})
	}
}
