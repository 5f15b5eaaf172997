package slack

import (
	"fmt"
	"testing"
	"time"
)

// TestAdmitBounds: within one second a channel is read for at most
// PerChannelPerSecond requests and the service for PerSecond in all; the
// next second starts afresh, and one channel's flood leaves another's
// presses their own room.
func TestAdmitBounds(t *testing.T) {
	t.Parallel()
	at := time.Unix(1_700_000_000, 0)
	s := &Service{cfg: Config{Now: func() time.Time { return at }}}
	for i := range PerChannelPerSecond {
		if !s.admit("org-1", "chn_a") {
			t.Fatalf("request %d of the second refused", i+1)
		}
	}
	if s.admit("org-1", "chn_a") {
		t.Error("a request past the channel's bound was admitted")
	}
	if !s.admit("org-1", "chn_b") || !s.admit("org-2", "chn_a") {
		t.Error("another channel was refused for the first one's flood")
	}
	at = at.Add(time.Second)
	if !s.admit("org-1", "chn_a") {
		t.Error("the next second's first request was refused")
	}
	// In all: PerSecond a second, across however many channels.
	at = at.Add(time.Second)
	admitted := 0
	for i := range PerSecond + 50 {
		if s.admit("org-1", fmt.Sprintf("chn_%d", i)) {
			admitted++
		}
	}
	if admitted != PerSecond {
		t.Errorf("%d requests admitted in one second across channels, want %d", admitted, PerSecond)
	}
}
