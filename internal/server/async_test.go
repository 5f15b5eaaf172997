package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
	"github.com/toolplane/toolplane/webhook"
)

// TestAsyncCallsOnEachStore drives asynchronous calls through the REST
// door of a whole server, on SQLite and PostgreSQL: a write accepted 202
// and answered by its status URL once (its retry the same call, one
// effect), a call waiting for a person's approval that runs once the
// person approves, a callback URL on a private address refused, and a
// call nobody else may read.
func TestAsyncCallsOnEachStore(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true, NotifyAllowCIDRs: []string{"127.0.0.1/32"}}
			e.start(t, dir)
			agent := readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
			invoke := func(tool string, body map[string]any, want int) map[string]any {
				t.Helper()
				raw, _ := json.Marshal(body)
				return e.must(t, "POST", "/v1/tools/"+tool+"/invoke", agent, string(raw), want)
			}

			note := map[string]any{"mode": "async", "arguments": map[string]any{"ticket_id": "t-1001", "text": "Shipped."}, "idempotency_key": "async-note"}
			first := invoke("demo.add_note", note, http.StatusAccepted)
			id, _ := first["id"].(string)
			if !strings.HasPrefix(id, "inv_") || first["status"] != "queued" || !strings.HasSuffix(fmt.Sprint(first["status_url"]), "/v1/invocations/"+id) {
				t.Fatalf("accepted: %v", first)
			}
			if again := invoke("demo.add_note", note, http.StatusAccepted); again["id"] != id || again["existing"] != true {
				t.Fatalf("the retry: %v, first %v", again, first)
			}
			done := e.must(t, "GET", "/v1/invocations/"+id+"?wait=20s", agent, "", http.StatusOK)
			res, _ := done["result"].(map[string]any)
			if done["status"] != "succeeded" || res["ok"] != true || done["ended_at"] == nil || done["cancel_url"] != nil {
				t.Fatalf("after the wait: %v", done)
			}
			// The same write called in its request afterwards is the
			// journal's replay of the one effect.
			sync := invoke("demo.add_note", map[string]any{"arguments": note["arguments"], "idempotency_key": "async-note"}, http.StatusOK)
			if meta, _ := sync["meta"].(map[string]any); meta["replayed"] != true {
				t.Fatalf("the write called again in its request: %v", sync)
			}
			if ended := e.must(t, "POST", "/v1/invocations/"+id+"/cancel", agent, "", http.StatusOK); ended["status"] != "succeeded" {
				t.Fatalf("cancel of an ended call: %v", ended)
			}

			// A refund waits for a person; once approved, it runs.
			refund := map[string]any{"mode": "async", "arguments": map[string]any{"order_id": "o-502", "amount_cents": 1250, "reason": "charged twice"}, "run_id": "run-async"}
			accepted := invoke("demo.refund_order", refund, http.StatusAccepted)
			rid, _ := accepted["id"].(string)
			var approvalID string
			for range 40 {
				cur := e.must(t, "GET", "/v1/invocations/"+rid+"?wait=500ms", agent, "", http.StatusOK)
				if ap, _ := cur["approval"].(map[string]any); ap != nil && cur["status"] == "queued" {
					approvalID, _ = ap["id"].(string)
					break
				}
			}
			if approvalID == "" {
				t.Fatalf("the refund never waited for an approval: %v", e.must(t, "GET", "/v1/invocations/"+rid, agent, "", http.StatusOK))
			}
			e.must(t, "POST", "/v1/approvals/"+approvalID+"/approve", e.admin, "", http.StatusOK)
			paid := e.must(t, "GET", "/v1/invocations/"+rid+"?wait=30s", agent, "", http.StatusOK)
			if paid["status"] != "succeeded" {
				t.Fatalf("the approved refund: %v", paid)
			}

			// A callback on a private address is refused, nothing accepted.
			bad := map[string]any{"arguments": map[string]any{"text": "hello"}, "run_id": "run-async", "callback_url": "https://10.1.2.3/hook"}
			refused := invoke("demo.analyze_text", bad, http.StatusBadRequest)
			if er, _ := refused["error"].(map[string]any); er["field_path"] != "callback_url" {
				t.Fatalf("a private callback: %v", refused)
			}
			if got := invoke("demo.analyze_text", map[string]any{"arguments": map[string]any{"text": "hi"}, "mode": "later"}, http.StatusBadRequest); got["error"] == nil {
				t.Fatalf("an unknown mode: %v", got)
			}

			// A callback, signed with the organization's secret: the
			// receiver verifies it with the secret a rotation answered.
			rotated := e.must(t, "POST", "/v1/webhook-secret:rotate", e.admin, "", http.StatusOK)
			secret, _ := rotated["secret"].(string)
			verifier, err := webhook.NewVerifier(webhook.Config{Secrets: [][]byte{[]byte(secret)}})
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan string, 4)
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if err := verifier.Verify(r.Context(), r.Header, body); err != nil {
					got <- "refused: " + err.Error()
					http.Error(w, err.Error(), http.StatusUnauthorized)
					return
				}
				got <- string(body)
			}))
			defer recv.Close()
			hooked := invoke("demo.search_tickets", map[string]any{"arguments": map[string]any{"query": "cracked"}, "run_id": "run-async", "callback_url": recv.URL + "/hook"}, http.StatusAccepted)
			select {
			case body := <-got:
				if !strings.Contains(body, `"id":"`+hooked["id"].(string)+`"`) || !strings.Contains(body, `"status":"succeeded"`) {
					t.Fatalf("the callback: %s", body)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no callback in 30s")
			}
			for range 100 {
				if cb, _ := e.must(t, "GET", "/v1/invocations/"+hooked["id"].(string), agent, "", http.StatusOK)["callback"].(map[string]any); cb["state"] == "delivered" {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if cb, _ := e.must(t, "GET", "/v1/invocations/"+hooked["id"].(string), agent, "", http.StatusOK)["callback"].(map[string]any); cb["state"] != "delivered" || cb["attempts"] != 1.0 {
				t.Fatalf("the callback's state: %v", cb)
			}

			// Nobody else reads it: another agent, another organization.
			other := e.mintKey(t, e.admin, `{"kind":"agent","subject":"other-agent","tools":["demo.add_note"]}`)
			e.must(t, "GET", "/v1/invocations/"+id, other, "", http.StatusNotFound)
			e.must(t, "POST", "/v1/invocations/"+id+"/cancel", other, "", http.StatusNotFound)
			stranger := e.mintInOrg(t, "org-async-"+name, "agent-x")
			e.must(t, "GET", "/v1/invocations/"+id, stranger, "", http.StatusNotFound)
			if got := e.must(t, "GET", "/v1/invocations/"+id, e.admin, "", http.StatusOK); got["id"] != id {
				t.Fatalf("the administrator reads it: %v", got)
			}
			if status, body := e.do(t, "GET", "/v1/invocations/"+id+"?wait=2h", agent, ""); status != http.StatusBadRequest {
				t.Fatalf("a wait past the bound: %d %s", status, body)
			}
		})
	}
}
