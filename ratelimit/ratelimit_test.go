package ratelimit

import (
	"net/http"
	"strconv"
	"testing"
	"time"
)

func TestFixedWindowPerKey(t *testing.T) {
	t.Parallel()
	l := New(3, time.Minute)
	now := time.Date(2026, 11, 29, 12, 0, 10, 0, time.UTC)
	for i, want := range []int{2, 1, 0} {
		d := l.Allow("a", now)
		if !d.Allowed || d.Remaining != want || d.Limit != 3 || !d.Reset.Equal(time.Date(2026, 11, 29, 12, 1, 0, 0, time.UTC)) {
			t.Fatalf("request %d: %+v", i, d)
		}
	}
	if d := l.Allow("a", now.Add(time.Second)); d.Allowed || d.Remaining != 0 {
		t.Fatalf("over the limit: %+v", d)
	}
	if d := l.Allow("b", now); !d.Allowed {
		t.Fatal("keys share a window")
	}
	if d := l.Allow("a", now.Add(50*time.Second)); !d.Allowed || d.Remaining != 2 {
		t.Fatalf("next window: %+v", d)
	}
}

func TestDecisionHeader(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_000, 0)
	tests := []struct {
		d         Decision
		remaining string
		retry     string
	}{
		{Decision{Allowed: true, Limit: 5, Remaining: 4, Reset: now.Add(30 * time.Second)}, "4", ""},
		{Decision{Allowed: false, Limit: 5, Remaining: 0, Reset: now.Add(2500 * time.Millisecond)}, "0", "3"},
		{Decision{Allowed: false, Limit: 5, Remaining: 0, Reset: now}, "0", "1"},
	}
	for _, tt := range tests {
		h := http.Header{}
		tt.d.Header(h, now)
		if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != tt.remaining ||
			h.Get("X-RateLimit-Reset") != strconv.FormatInt(tt.d.Reset.Unix(), 10) || h.Get("Retry-After") != tt.retry {
			t.Errorf("%+v: headers %v", tt.d, h)
		}
	}
}
