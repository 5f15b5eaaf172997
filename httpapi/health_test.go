package httpapi_test

import (
	"testing"
)

func TestToolShowsItsBreakers(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	status, body := f.do(t, "GET", "/v1/tools/demo.search_tickets", f.agent, "")
	h, _ := body["health"].(map[string]any)
	if status != 200 || h == nil || h["in_flight"] != float64(0) || len(h["breakers"].([]any)) != 0 {
		t.Fatalf("before any call: %d %v", status, body)
	}
	if status, body := f.do(t, "POST", "/v1/tools/demo.search_tickets/invoke", f.agent, `{"arguments":{"query":"cracked"},"run_id":"run-1"}`); status != 200 || body["ok"] != true {
		t.Fatalf("invoke: %d %v", status, body)
	}
	_, body = f.do(t, "GET", "/v1/tools/demo.search_tickets", f.agent, "")
	bs := body["health"].(map[string]any)["breakers"].([]any)
	if len(bs) != 1 {
		t.Fatalf("breakers: %v", bs)
	}
	b := bs[0].(map[string]any)
	if b["state"] != "closed" || b["samples"] != float64(1) || b["failures"] != float64(0) || b["target"] == "" || b["opened_at"] != nil {
		t.Fatalf("breaker: %v", b)
	}
}
