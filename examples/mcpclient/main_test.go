package main

import "testing"

func TestEndpointFollowsTOOLPLANE_SERVER(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ server, want string }{
		{"", "http://localhost:8080/mcp"},
		{"http://127.0.0.1:9090", "http://127.0.0.1:9090/mcp"},
		{"https://toolplane.example/", "https://toolplane.example/mcp"},
	} {
		if got := endpoint(tc.server); got != tc.want {
			t.Errorf("endpoint(%q) = %q, want %q", tc.server, got, tc.want)
		}
	}
}
