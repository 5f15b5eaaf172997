package cli

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// serveLogged runs serve --demo with flags on a loopback port and answers
// its base URL, the demo agent's key and what it writes to stderr.
func serveLogged(t *testing.T, flags ...string) (base, agent string, errOut *syncBuffer) {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out syncBuffer
	errOut = &syncBuffer{}
	done := make(chan int, 1)
	args := append([]string{"--demo", "--addr", "127.0.0.1:0", "--database", filepath.Join(dir, "toolplane.db")}, flags...)
	go func() { done <- serve(ctx, args, &out, errOut) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(40 * time.Second):
			t.Error("serve did not stop")
		}
	})
	addrRE := regexp.MustCompile(`on (http://127\.0\.0\.1:\d+) `)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if m := addrRE.FindStringSubmatch(out.String()); m != nil {
			base = m[1]
			break
		}
		select {
		case code := <-done:
			t.Fatalf("serve exited %d: %s %s", code, out.String(), errOut.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not start: %s %s", out.String(), errOut.String())
		}
	}
	creds, err := os.ReadFile(filepath.Join(dir, "credentials.env"))
	if err != nil {
		t.Fatal(err)
	}
	agent = regexp.MustCompile(`TOOLPLANE_DEMO_AGENT_KEY=(\S+)`).FindStringSubmatch(string(creds))[1]
	return base, agent, errOut
}

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
			base, agent, errOut := serveLogged(t, tt.flags...)
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
		var out, errOut syncBuffer
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
	base, _, _ := serveLogged(t, "--public-url", public)
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
