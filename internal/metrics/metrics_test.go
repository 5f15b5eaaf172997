package metrics

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"sync"
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

// Calls recorded at once, first ones of a series among them, are each
// counted once.
func TestObserveCallConcurrently(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 100 {
				m.ObserveCall("demo.add_note", []string{"ok", "fault"}[i%2], time.Millisecond)
			}
		})
	}
	wg.Wait()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	out := rec.Body.String()
	for _, want := range []string{
		`toolplane_tool_calls_total{outcome="ok",tool="demo.add_note"} 400`,
		`toolplane_tool_calls_total{outcome="fault",tool="demo.add_note"} 400`,
		`toolplane_tool_call_seconds_count{tool="demo.add_note"} 800`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
}

// BenchmarkObserveCall is what every call records.
func BenchmarkObserveCall(b *testing.B) {
	m := New(nil, nil)
	b.ReportAllocs()
	for b.Loop() {
		m.ObserveCall("load.get_item", "ok", 2*time.Millisecond)
	}
}

// Each rate-limit decision a node took alone, its shared store silent, is
// counted under the store's name.
func TestRateLimitFallbacksCounted(t *testing.T) {
	t.Parallel()
	m := New(nil, nil)
	fellBack := m.RateLimitFallback("redis")
	fellBack()
	fellBack()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if want := `toolplane_ratelimit_fallbacks_total{store="redis"} 2`; !strings.Contains(rec.Body.String(), want) {
		t.Errorf("scrape lacks %s", want)
	}
}
