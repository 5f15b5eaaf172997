package httpapi_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/toolplane/toolplane/ratelimit"
)

// A client retrying a write after a crash (the same idempotency key, as it
// must) is answered the stored result every time without spending the
// budget its new work needs: repeats are charged to the retry budget.
func TestRetriesOfAnAnsweredWriteSpendTheRetryBudget(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.door.Limiter = ratelimit.New(3, 1000*time.Hour) // one window for the whole test
	call := `{"arguments":{"ticket_id":"t-1001","text":"Replacement shipped."},"idempotency_key":"note-1"}`
	if status, body := f.do(t, "POST", "/v1/tools/demo.add_note/invoke", f.agent, call); status != http.StatusOK {
		t.Fatalf("first call: %d %v", status, body)
	}
	// Three retries, each replayed: past the request budget (3) if each
	// cost a request.
	for i := range 3 {
		status, body := f.do(t, "POST", "/v1/tools/demo.add_note/invoke", f.agent, call)
		meta, _ := body["meta"].(map[string]any)
		if status != http.StatusOK || meta["replayed"] != true {
			t.Fatalf("retry %d: %d %v; want the stored result", i+1, status, body)
		}
	}
	// New work still has its budget: the first call and two more.
	for i, want := range []int{http.StatusOK, http.StatusOK, http.StatusTooManyRequests} {
		if status, body := f.do(t, "GET", "/v1/tools", f.agent, ""); status != want {
			t.Fatalf("request %d after the retries: %d %v, want %d", i+1, status, body, want)
		}
	}
}
