package httpapi_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// A call's callback reads where its delivery stands: the attempts made,
// why the last failed and when the next is due while it is retried, and
// no part of the callback URL past its path (a receiver may put a token
// in its query or credentials).
func TestAnInvocationShowsItsFailingCallback(t *testing.T) {
	t.Parallel()
	for name, store := range streamStores(t) {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newStreamFixture(t, store)
			now := time.Now().UTC().Truncate(time.Second)
			next := now.Add(20 * time.Second)
			c := &toolplane.AsyncCall{OrganizationID: "org-1", ID: toolplane.NewID("inv_"), Tool: "feed.rows", AgentID: "agent-feed",
				Arguments: []byte(`{}`), Invocation: []byte(`{}`), Status: toolplane.AsyncSucceeded, Result: []byte(`{"ok":true}`),
				CallbackURL: "https://user:pass@hooks.example.com/toolplane?token=SECRET", CallbackState: toolplane.CallbackPending,
				CreatedAt: now, UpdatedAt: now, StartedAt: now, EndedAt: now}
			if err := store.InsertAsyncCall(t.Context(), c); err != nil {
				t.Fatal(err)
			}
			if err := store.RecordCallback(t.Context(), "org-1", c.ID, toolplane.CallbackRecord{State: toolplane.CallbackPending,
				Attempts: 3, LastError: "DNS failure: no such host", NextAt: next, At: now}); err != nil {
				t.Fatal(err)
			}
			req, _ := http.NewRequestWithContext(t.Context(), "GET", f.srv.URL+"/v1/invocations/"+c.ID, nil)
			req.Header.Set("Authorization", "Bearer "+f.agent)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			raw, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			var v struct {
				Callback struct {
					URL           string     `json:"url"`
					State         string     `json:"state"`
					Attempts      int        `json:"attempts"`
					LastError     string     `json:"last_error"`
					NextAttemptAt *time.Time `json:"next_attempt_at"`
				} `json:"callback"`
			}
			if resp.StatusCode != http.StatusOK || json.Unmarshal(raw, &v) != nil {
				t.Fatalf("GET the invocation: %d %s", resp.StatusCode, raw)
			}
			cb := v.Callback
			if cb.URL != "https://hooks.example.com/toolplane" || cb.State != "pending" || cb.Attempts != 3 ||
				cb.LastError != "DNS failure: no such host" || cb.NextAttemptAt == nil || !cb.NextAttemptAt.Equal(next) {
				t.Errorf("the callback reads %s", raw)
			}
			for _, secret := range []string{"SECRET", "token", "pass", "user"} {
				if strings.Contains(string(raw), secret) {
					t.Errorf("the answer shows %q of the callback URL: %s", secret, raw)
				}
			}
		})
	}
}
