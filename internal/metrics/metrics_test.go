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
	var fail bool
	m := New(func(context.Context) (map[string]int, error) {
		if fail {
			return nil, errors.New("database down")
		}
		return map[string]int{"acme": 3, "globex": 1}, nil
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
		`toolplane_approvals_pending{organization="acme"} 3`,
		`toolplane_approvals_pending{organization="globex"} 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	// A failed count leaves the gauge out of the scrape, not the rest.
	fail = true
	out = scrape()
	if strings.Contains(out, "toolplane_approvals_pending{") || !strings.Contains(out, "toolplane_tool_calls_total") {
		t.Errorf("a failing count: %s", out)
	}
}
