package httpapi

import (
	"net/http/httptest"
	"testing"
)

// A client asks for events by listing their media type; one that lists
// it with a quality of zero refuses them and gets a plain answer.
func TestAcceptsEvents(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		accept string
		want   bool
	}{
		{"", false},
		{"application/json", false},
		{"text/event-stream", true},
		{"Text/Event-Stream", true},
		{"application/json, text/event-stream", true},
		{"application/json,,text/event-stream", true},
		{" text/event-stream ;charset=utf-8", true},
		{"text/event-stream;q=0.5", true},
		{"text/event-stream; Q=1", true},
		{"text/event-stream;q=0", false},
		{"text/event-stream; q=0.000", false},
		{"text/event-stream;q=0, application/json", false},
		{"text/event-stream;q=0, text/event-stream", true},
		{"text/event-stream;q=nonsense", true},
	} {
		r := httptest.NewRequest("POST", "/v1/tools/x/invoke", nil)
		if tc.accept != "" {
			r.Header.Set("Accept", tc.accept)
		}
		if got := acceptsEvents(r); got != tc.want {
			t.Errorf("Accept %q: acceptsEvents = %v, want %v", tc.accept, got, tc.want)
		}
	}
}
