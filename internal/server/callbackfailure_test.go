package server

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// TestAFailingCallbackIsSeen follows the README's callback_url example to
// a receiver that answers 500, on a whole server logging at info: after
// the first attempt the invocation reads one attempt, why it failed and
// when the next is due, and the log holds one Warn line for it, neither
// showing the token in the callback URL's query.
func TestAFailingCallbackIsSeen(t *testing.T) {
	t.Parallel()
	for name, database := range onePendingBackends() {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			logs := &syncbuf.Buffer{}
			e := &e2e{log: logs, seen: &traffic{}, ran: make(chan error, 1), conns: map[string]string{}}
			e.cfg = Config{Addr: "127.0.0.1:0", Database: database(t, dir), DataDir: dir, Demo: true, NotifyAllowCIDRs: []string{"127.0.0.1/32"},
				Logger: slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelInfo}))}
			e.start(t, dir)
			agent := readCreds(t, dir)["TOOLPLANE_DEMO_AGENT_KEY"]
			recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				http.Error(w, "down", http.StatusInternalServerError)
			}))
			defer recv.Close()

			raw, _ := json.Marshal(map[string]any{"arguments": map[string]any{"query": "cracked"}, "run_id": "run-4",
				"callback_url": recv.URL + "/toolplane?token=SECRET"})
			id, _ := e.must(t, "POST", "/v1/tools/demo.search_tickets/invoke", agent, string(raw), http.StatusAccepted)["id"].(string)
			var cb map[string]any
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				got := e.must(t, "GET", "/v1/invocations/"+id, agent, "", http.StatusOK)
				if cb, _ = got["callback"].(map[string]any); cb["attempts"] != 0.0 {
					break
				}
			}
			if cb["state"] != "pending" || cb["attempts"] != 1.0 || cb["last_error"] != "HTTP status 500" || cb["next_attempt_at"] == nil {
				t.Fatalf("after the first failed attempt the callback reads %v", cb)
			}
			if s := mustMarshal(t, cb); strings.Contains(s, "SECRET") {
				t.Errorf("the answer shows the URL's token: %s", s)
			}
			var warned int
			for _, line := range strings.Split(logs.String(), "\n") {
				if strings.Contains(line, "SECRET") {
					t.Errorf("the log shows the URL's token: %s", line)
				}
				var rec map[string]any
				if json.Unmarshal([]byte(line), &rec) == nil && rec["level"] == "WARN" && rec["msg"] == "callback attempt failed" &&
					rec["call"] == id && rec["attempt"] == 1.0 {
					warned++
					if rec["reason"] != "HTTP status 500" || rec["host"] != strings.TrimPrefix(recv.URL, "http://") || rec["organization"] == "" {
						t.Errorf("the warning: %s", line)
					}
				}
			}
			if warned != 1 {
				t.Errorf("%d warnings of the first attempt logged, want 1", warned)
			}
		})
	}
}

func mustMarshal(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
