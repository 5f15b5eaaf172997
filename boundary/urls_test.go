package boundary_test

import (
	"slices"
	"testing"

	"github.com/toolplane/toolplane/boundary"
)

func TestRedactURL(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in, want string
		parts          []string
	}{
		{"nothing to hide", "https://mcp.example.com/mcp", "https://mcp.example.com/mcp", nil},
		{"ordinary paths", "https://h.example:8443/v1/tools/sse", "https://h.example:8443/v1/tools/sse", nil},
		{"query token", "https://mcp.example.com/mcp?token=abc123", "https://mcp.example.com/mcp?token=[redacted]", []string{"abc123"}},
		{"every query value", "https://h/mcp?key=k1&sig=s%2F2&v=2", "https://h/mcp?key=[redacted]&sig=[redacted]&v=[redacted]", []string{"k1", "s%2F2", "2"}},
		{"user and password", "https://user:pass@h/mcp", "https://[redacted]@h/mcp", []string{"user:pass"}},
		{"user name as token", "https://ghp_token@h/mcp?flag", "https://[redacted]@h/mcp?flag", []string{"ghp_token"}},
		{"fragment stays", "http://127.0.0.1:8080/a/b?code=zz#frag", "http://127.0.0.1:8080/a/b?code=[redacted]#frag", []string{"zz"}},
		{"token in the path", "https://actions.example.com/mcp/sk-ak-Zq9x7Hc2LmN4pQ8rT1vW/sse?x=1",
			"https://actions.example.com/mcp/[redacted]/sse?x=[redacted]", []string{"sk-ak-Zq9x7Hc2LmN4pQ8rT1vW", "1"}},
		{"known shape in the path", "https://h/k/xoxb-12345abcde/mcp", "https://h/k/[redacted]/mcp", []string{"xoxb-12345abcde"}},
		{"uuid in the path", "https://h/hooks/123e4567-e89b-12d3-a456-426614174000", "https://h/hooks/[redacted]", []string{"123e4567-e89b-12d3-a456-426614174000"}},
		{"long word stays", "https://h/mcp/internationalization", "https://h/mcp/internationalization", nil},
		{"long number stays", "https://h/mcp/12345678901234567890", "https://h/mcp/12345678901234567890", nil},
		{"a path byte text would stop at", "https://h/a;b/sk-ak-Zq9x7Hc2LmN4pQ8rT1vW?k=v", "https://h/a;b/[redacted]?k=[redacted]", []string{"sk-ak-Zq9x7Hc2LmN4pQ8rT1vW", "v"}},
		{"not a URL", "://not a url", "[redacted]", nil},
		{"no scheme", "h.example/mcp?token=x", "[redacted]", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := boundary.RedactURL(tt.in); got != tt.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if got := boundary.URLSecrets(tt.in); !slices.Equal(got, tt.parts) && (len(got) != 0 || len(tt.parts) != 0) {
				t.Errorf("URLSecrets(%q) = %q, want %q", tt.in, got, tt.parts)
			}
		})
	}
}
