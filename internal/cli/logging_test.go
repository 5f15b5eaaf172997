package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/internal/syncbuf"
)

// TestServeLogLevel checks --log-level and --log-format: an MCP session's
// routine lines (the SDK's "server session connected", at INFO) are
// written at DEBUG, so the default level leaves them out and debug shows
// them, in the format asked for.
func TestServeLogLevel(t *testing.T) {
	t.Parallel()
	const routine = "server session connected"
	tests := []struct {
		name  string
		flags []string
		// want matches the routine line when it must be written; empty:
		// it must not be.
		want *regexp.Regexp
	}{
		{"default", nil, nil},
		{"info", []string{"--log-level", "info"}, nil},
		{"debug json", []string{"--log-level", "debug"}, regexp.MustCompile(`"level":"DEBUG","msg":"` + routine + `"`)},
		{"debug text", []string{"--log-level=DEBUG", "--log-format", "text"}, regexp.MustCompile(`level=DEBUG msg="` + routine + `"`)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := startServe(t, tt.flags...)
			base, agent, errOut := r.base, r.agent, r.stderr
			req, _ := http.NewRequest("POST", base+"/mcp", strings.NewReader(
				`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
			req.Header.Set("Authorization", "Bearer "+agent)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK || resp.Header.Get("Mcp-Session-Id") == "" {
				t.Fatalf("initialize: %d %s", resp.StatusCode, body)
			}
			// The SDK logs the connection before it answers initialize.
			logged := errOut.String()
			switch {
			case tt.want == nil && strings.Contains(logged, routine):
				t.Errorf("the routine session line was written:\n%s", logged)
			case tt.want != nil && !tt.want.MatchString(logged):
				t.Errorf("no %s in the log:\n%s", tt.want, logged)
			}
		})
	}
}

// TestServeRefusesAnUnknownLogLevel checks a mistyped level or format
// stops serve with a usage error instead of logging at a guess.
func TestServeRefusesAnUnknownLogLevel(t *testing.T) {
	t.Parallel()
	for _, flags := range [][]string{{"--log-level", "verbose"}, {"--log-format", "xml"}} {
		var out, errOut syncbuf.Buffer
		dir := t.TempDir()
		code := serve(context.Background(), append([]string{"--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "t.db")}, flags...), &out, &errOut)
		if code != 2 || !strings.Contains(errOut.String(), flags[0]) {
			t.Errorf("%v: exit %d, stderr %q", flags, code, errOut.String())
		}
	}
}

// TestServedOpenAPINamesPublicURL checks serve hands --public-url to the
// OpenAPI document it serves.
func TestServedOpenAPINamesPublicURL(t *testing.T) {
	t.Parallel()
	// A loopback host, so the MCP door's Host check still admits the test.
	const public = "http://127.0.0.1:9/toolplane"
	base := startServe(t, "--public-url", public).base
	resp, err := http.Get(base + "/v1/openapi.json")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var doc struct {
		Servers []struct {
			URL string `json:"url"`
		} `json:"servers"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Servers) != 1 || doc.Servers[0].URL != public {
		t.Fatalf("servers = %+v, want %s", doc.Servers, public)
	}
}
