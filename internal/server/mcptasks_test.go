package server

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// TestMCPTasksOnEachStore makes a call as an MCP task through a whole
// server, on SQLite and PostgreSQL: the session is offered tasks, the call
// answers its task at once, the background worker runs it, and the task
// reads completed with a ttl and answers the write's result.
func TestMCPTasksOnEachStore(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			e := &e2e{log: &syncbuf.Buffer{}, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true}
			e.start(t, dir)
			agent := readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
			sid := ""
			post := func(body string) map[string]json.RawMessage {
				t.Helper()
				req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, e.base+"/mcp", strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+agent)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if sid != "" {
					req.Header.Set("Mcp-Session-Id", sid)
					req.Header.Set("Mcp-Protocol-Version", "2025-11-25")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				raw, _ := io.ReadAll(resp.Body)
				if sid == "" {
					sid = resp.Header.Get("Mcp-Session-Id")
				}
				var msg map[string]json.RawMessage
				if len(raw) > 0 {
					if err := json.Unmarshal(raw, &msg); err != nil || msg["error"] != nil {
						t.Fatalf("%s answered %d %s", body, resp.StatusCode, raw)
					}
				}
				return msg
			}
			init := post(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`)
			if !strings.Contains(string(init["result"]), `"tasks":{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`) || sid == "" {
				t.Fatalf("initialize: %s", init["result"])
			}
			post(`{"jsonrpc":"2.0","method":"notifications/initialized"}`)
			if list := post(`{"jsonrpc":"2.0","id":2,"method":"tools/list"}`); !strings.Contains(string(list["result"]), `"taskSupport":"optional"`) {
				t.Fatalf("tools/list: %s", list["result"])
			}
			var created struct {
				Task struct {
					TaskID string `json:"taskId"`
					Status string `json:"status"`
				} `json:"task"`
			}
			res := post(`{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"demo_add_note","arguments":{"ticket_id":"t-1001","text":"Shipped."},"task":{"ttl":60000}}}`)
			if err := json.Unmarshal(res["result"], &created); err != nil || !strings.HasPrefix(created.Task.TaskID, "inv_") || created.Task.Status != "working" {
				t.Fatalf("the call as a task: %s", res["result"])
			}
			id := created.Task.TaskID
			out := post(`{"jsonrpc":"2.0","id":4,"method":"tasks/result","params":{"taskId":"` + id + `"}}`)
			if r := string(out["result"]); strings.Contains(r, `"isError":true`) || !strings.Contains(r, `Shipped.`) || !strings.Contains(r, id) {
				t.Fatalf("tasks/result: %s", r)
			}
			var got struct {
				Status string `json:"status"`
				TTL    *int64 `json:"ttl"`
			}
			done := post(`{"jsonrpc":"2.0","id":5,"method":"tasks/get","params":{"taskId":"` + id + `"}}`)
			if err := json.Unmarshal(done["result"], &got); err != nil || got.Status != "completed" || got.TTL == nil {
				t.Fatalf("tasks/get: %s", done["result"])
			}
			// The same call read by its invocation id on REST.
			if inv := e.must(t, "GET", "/v1/invocations/"+id, agent, "", http.StatusOK); inv["status"] != "succeeded" {
				t.Fatalf("the task's invocation: %v", inv)
			}
		})
	}
}
