package egress_test

import (
	"testing"

	"github.com/toolplane/toolplane/egress"
)

func TestLoopbackHost(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		host string
		want bool
	}{
		{"localhost", true},
		{"127.0.0.1", true},
		{"127.8.9.10", true},
		{"::1", true},
		{"::ffff:127.0.0.1", true},
		// Only the host as written counts: no resolution, no other
		// spelling of a loopback address, no zone, no brackets.
		{"LOCALHOST", false},
		{"app.localhost", false},
		{"127.1", false},
		{"0x7f.0.0.1", false},
		{"::1%lo", false},
		{"[::1]", false},
		{"10.0.0.1", false},
		{"example.com", false},
		{"", false},
	} {
		if got := egress.LoopbackHost(tc.host); got != tc.want {
			t.Errorf("LoopbackHost(%q) = %t, want %t", tc.host, got, tc.want)
		}
	}
}
