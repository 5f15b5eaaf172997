package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestMetricsCountCallsAndPending(t *testing.T) {
	t.Parallel()
	pending := 3
	var fail bool
	m := New(func(context.Context) (int, error) {
		if fail {
			return 0, errors.New("database down")
		}
		return pending, nil
	}, nil)
	m.ObserveCall("demo.add_note", "ok", 3*time.Millisecond)
	m.ObserveCall("demo.add_note", "ok", 4*time.Millisecond)
	m.ObserveCall("demo.add_note", "invalid_input", time.Millisecond)
	scrape := func() string {
		rec := httptest.NewRecorder()
		m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
		b, _ := io.ReadAll(rec.Body)
		return string(b)
	}
	out := scrape()
	for _, want := range []string{
		`toolplane_tool_calls_total{outcome="ok",tool="demo.add_note"} 2`,
		`toolplane_tool_calls_total{outcome="invalid_input",tool="demo.add_note"} 1`,
		`toolplane_tool_call_seconds_count{tool="demo.add_note"} 3`,
		`toolplane_approvals_pending 3`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	fail = true
	if !strings.Contains(scrape(), "toolplane_approvals_pending -1") {
		t.Error("a failing count is not marked")
	}
}
