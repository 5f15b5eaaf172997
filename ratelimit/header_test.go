package ratelimit

import (
	"net/http"
	"reflect"
	"strconv"
	"testing"
	"time"
)

// TestDecisionHeaderAsSetWrites checks that Header leaves the header as
// http.Header.Set would, names and values, and that adding to one of its
// values leaves the others alone (they share one array).
func TestDecisionHeaderAsSetWrites(t *testing.T) {
	t.Parallel()
	now := time.Unix(1_700_000_000, 0)
	for _, d := range []Decision{
		{Allowed: true, Limit: 600, Remaining: 599, Reset: now.Add(time.Minute)},
		{Allowed: false, Limit: 1 << 40, Remaining: 0, Reset: now.Add(-time.Hour)},
		{Allowed: true, Limit: -1, Remaining: -7, Reset: time.Unix(-5, 0)},
	} {
		want := http.Header{}
		want.Set("X-RateLimit-Limit", strconv.Itoa(d.Limit))
		want.Set("X-RateLimit-Remaining", strconv.Itoa(d.Remaining))
		want.Set("X-RateLimit-Reset", strconv.FormatInt(d.Reset.Unix(), 10))
		if !d.Allowed {
			want.Set("Retry-After", strconv.Itoa(max(1, int(d.Reset.Sub(now).Seconds()+0.999))))
		}
		got := http.Header{}
		d.Header(got, now)
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%+v: Header wrote %v, Set would write %v", d, got, want)
		}
		got.Add("X-RateLimit-Limit", "extra")
		if got.Get("X-RateLimit-Remaining") != want.Get("X-RateLimit-Remaining") || got.Get("X-RateLimit-Reset") != want.Get("X-RateLimit-Reset") {
			t.Fatalf("%+v: adding a value changed another: %v", d, got)
		}
	}
}

func BenchmarkDecisionHeader(b *testing.B) {
	now := time.Unix(1_700_000_000, 0)
	d := Decision{Allowed: true, Limit: 600, Remaining: 599, Reset: now.Add(time.Minute)}
	b.ReportAllocs()
	for b.Loop() {
		d.Header(http.Header{}, now)
	}
}
