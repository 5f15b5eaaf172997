package ratelimit

import (
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
