package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// The configuration printed for each client reaches the server: the URL
// and header a client would send open an MCP session with the agent's
// key. Claude Desktop's runs mcp-remote, so its arguments and environment
// are checked instead of run.
func TestClientConfigReachesTheServer(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	initialize := `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	reach := func(t *testing.T, url string, headers map[string]string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url, strings.NewReader(initialize))
		for k, v := range headers {
			req.Header.Set(k, v)
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
			t.Fatalf("initialize at %s: %d %s", url, resp.StatusCode, b)
		}
	}
	type server struct {
		URL     string            `json:"url"`
		Type    string            `json:"type"`
		Headers map[string]string `json:"headers"`
		Command string            `json:"command"`
		Args    []string          `json:"args"`
		Env     map[string]string `json:"env"`
	}
	tests := []struct {
		client, top string
		check       func(t *testing.T, s server)
	}{
		{"cursor", "mcpServers", func(t *testing.T, s server) { reach(t, s.URL, s.Headers) }},
		{"vscode", "servers", func(t *testing.T, s server) {
			if s.Type != "http" {
				t.Errorf("type %q, want http", s.Type)
			}
			reach(t, s.URL, s.Headers)
		}},
		{"claude-desktop", "mcpServers", func(t *testing.T, s server) {
			if s.Command != "npx" || !slices.Contains(s.Args, "mcp-remote") || !slices.Contains(s.Args, r.base+"/mcp") || slices.Contains(s.Args, "--allow-http") {
				t.Fatalf("command %q args %q", s.Command, s.Args)
			}
			i := slices.Index(s.Args, "--header")
			if i < 0 || i+1 >= len(s.Args) || strings.Contains(s.Args[i+1], " ") {
				t.Fatalf("the header argument is missing or holds a space (Windows splits it): %q", s.Args)
			}
			name, ref, _ := strings.Cut(s.Args[i+1], ":")
			env := strings.TrimSuffix(strings.TrimPrefix(ref, "${"), "}")
			reach(t, s.Args[slices.Index(s.Args, "mcp-remote")+1], map[string]string{name: s.Env[env]})
		}},
	}
	for _, tt := range tests {
		t.Run(tt.client, func(t *testing.T) {
			t.Parallel()
			code, out, errOut := runIn(map[string]string{"TOOLPLANE_KEY": r.agent}, "client", "config", tt.client, "--server", r.base, "--name", "tp")
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			var doc map[string]map[string]server
			if err := json.Unmarshal([]byte(out), &doc); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			s, ok := doc[tt.top]["tp"]
			if !ok {
				t.Fatalf("no %s.tp in %s", tt.top, out)
			}
			tt.check(t, s)
		})
	}
	if code, _, errOut := runIn(nil, "client", "config", "emacs", "--key", r.agent); code != 2 || !strings.Contains(errOut, "claude-desktop, cursor or vscode") {
		t.Errorf("an unknown client: %d %s", code, errOut)
	}
}
