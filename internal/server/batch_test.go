package server

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/internal/syncbuf"
)

// Batches on a demo server, on SQLite and PostgreSQL, whose limit is set
// by Config.MaxBatchCalls. Seed 000: "An oversized batch has zero effects
// and reaches nothing": one call past the limit refuses the batch whole,
// and none of its calls leaves an audit event or files an approval. Seed
// 000: "A denial does not stop the call beside it": a call the
// organization's deny refuses answers denied while the write beside it
// runs; the write repeated in a second batch under its idempotency key
// replays its first answer; a refund in a batch answers its approval.
func TestBatchesOnEachStore(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true, MaxBatchCalls: 2}
			e.start(t, dir)
			agent := readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
			batch := func(calls ...map[string]any) string {
				raw, _ := json.Marshal(map[string]any{"calls": calls})
				return string(raw)
			}
			results := func(m map[string]any) []map[string]any {
				list, _ := m["results"].([]any)
				out := make([]map[string]any, len(list))
				for i, r := range list {
					out[i], _ = r.(map[string]any)
				}
				return out
			}
			note := map[string]any{"tool": "demo.add_note", "arguments": map[string]any{"ticket_id": "t-1001", "text": "Shipped."}, "idempotency_key": "batch-note"}
			refund := func(run string) map[string]any {
				return map[string]any{"tool": "demo.refund_order", "arguments": map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}, "run_id": run}
			}
			analyze := map[string]any{"tool": "demo.analyze_text", "arguments": map[string]any{"text": "hello"}, "run_id": "run-batch"}

			// One call past the limit: refused whole.
			tooMany := e.must(t, "POST", "/v1/invoke:batch", agent, batch(refund("run-oversized"), note, analyze), http.StatusBadRequest)
			if e, _ := tooMany["error"].(map[string]any); e["code"] != "invalid_request" || e["field_path"] != "calls" {
				t.Fatalf("a batch past the limit: %v", tooMany)
			}

			// The organization denies the analysis to the demo agent.
			e.must(t, "POST", "/v1/denies", e.admin, `{"agent_id":"demo-agent","pattern":"demo.analyze_text","reason":"no analysis in this test"}`, http.StatusCreated)
			got := results(e.must(t, "POST", "/v1/invoke:batch", agent, batch(analyze, note), http.StatusOK))
			if len(got) != 2 {
				t.Fatalf("the batch answered %v", got)
			}
			denied, _ := got[0]["body"].(map[string]any)
			if de, _ := denied["error"].(map[string]any); got[0]["status"] != 200.0 || denied["ok"] != false || de["code"] != "denied" {
				t.Errorf("the denied call: %v", got[0])
			}
			wrote, _ := got[1]["body"].(map[string]any)
			if got[1]["status"] != 200.0 || wrote["ok"] != true {
				t.Errorf("the write beside the denial: %v", got[1])
			}
			data, _ := wrote["data"].(map[string]any)

			// The write again, in a second batch beside a refund.
			got = results(e.must(t, "POST", "/v1/invoke:batch", agent, batch(note, refund("run-batch")), http.StatusOK))
			again, _ := got[0]["body"].(map[string]any)
			meta, _ := again["meta"].(map[string]any)
			dataAgain, _ := again["data"].(map[string]any)
			if len(got) != 2 || meta["replayed"] != true || dataAgain["note_id"] == nil || dataAgain["note_id"] != data["note_id"] {
				t.Errorf("the write repeated in a second batch: %v; first %v", got, data)
			}
			filed, _ := got[1]["body"].(map[string]any)
			if ap, _ := filed["approval"].(map[string]any); got[1]["status"] != 202.0 || ap["id"] == nil {
				t.Errorf("the refund in a batch: %v", got[1])
			}

			// The trail holds the three calls that ran and none of the
			// refused batch's; one approval was filed, for run-batch.
			// (The control-plane events of the keys and grants the setup
			// made are beside them: only calls are counted.)
			events := e.waitAudit(t, e.admin, func(evs []toolplane.AuditEvent) bool {
				calls := 0
				for _, ev := range evs {
					if ev.Kind == toolplane.AuditCall {
						calls++
					}
				}
				return calls >= 4
			})
			outcomes := map[string]int{}
			for _, ev := range events {
				if ev.RunID == "run-oversized" {
					t.Errorf("the refused batch left an audit event: %+v", ev)
				}
				outcomes[ev.Tool+" "+ev.Outcome]++
			}
			want := map[string]int{"demo.analyze_text denied": 1, "demo.add_note ok": 2, "demo.refund_order approval_required": 1}
			for k, n := range want {
				if outcomes[k] != n {
					t.Errorf("the trail holds %d of %s; want %d (all: %v)", outcomes[k], k, n, outcomes)
				}
			}
			pending := e.must(t, "GET", "/v1/approvals", e.admin, "", http.StatusOK)
			items, _ := pending["items"].([]any)
			if len(items) != 1 || items[0].(map[string]any)["run_id"] != "run-batch" {
				t.Errorf("pending approvals: %v; want the one of run-batch", items)
			}
		})
	}
}
