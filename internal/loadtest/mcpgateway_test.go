package loadtest

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/toolplane/toolplane/modelname"
)

// mcpGatewayEnvVar names the docker/mcp-gateway binary the tests that run
// it use; they skip without it (it is built from source, see
// MCPGatewayHint).
const mcpGatewayEnvVar = "TOOLPLANE_TEST_MCP_GATEWAY"

func TestMCPGatewayCatalog(t *testing.T) {
	t.Parallel()
	for _, upstream := range []string{"http://127.0.0.1:18556/mcp", "http://[::1]:1/mcp?a=b#c"} {
		var doc struct {
			Registry map[string]struct {
				Type   string
				Remote struct {
					URL       string `yaml:"url"`
					Transport string `yaml:"transport_type"`
				}
			}
		}
		if err := yaml.Unmarshal([]byte(MCPGatewayCatalog(upstream)), &doc); err != nil {
			t.Fatalf("catalog for %s is not YAML: %v", upstream, err)
		}
		s, ok := doc.Registry[mcpGatewayServer]
		if !ok || len(doc.Registry) != 1 {
			t.Fatalf("catalog for %s: servers %v, want only %s", upstream, doc.Registry, mcpGatewayServer)
		}
		if s.Type != "remote" || s.Remote.URL != upstream || s.Remote.Transport != "streamable-http" {
			t.Errorf("catalog for %s: server %+v", upstream, s)
		}
	}
}

func TestMCPGatewayArgs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		listen string
		extra  []string
		want   string // the flags after "gateway run", or the error
	}{
		{"127.0.0.1:8811", nil,
			"--transport streaming --host 127.0.0.1 --port 8811 --catalog /c.yaml --servers plain --secrets /s.env --static"},
		{"[::1]:9", []string{"--log-calls=false"},
			"--transport streaming --host ::1 --port 9 --catalog /c.yaml --servers plain --secrets /s.env --static --log-calls=false"},
		{"127.0.0.1", nil, "error"},
	}
	for _, tt := range tests {
		args, err := MCPGatewayArgs(tt.listen, "/c.yaml", "/s.env", tt.extra)
		got := "error"
		if err == nil {
			if !slices.Equal(args[:2], []string{"gateway", "run"}) {
				t.Errorf("MCPGatewayArgs(%s) = %q, not gateway run", tt.listen, args)
			}
			got = strings.Join(args[2:], " ")
		}
		if got != tt.want {
			t.Errorf("MCPGatewayArgs(%s, %q) = %s (%v), want %s", tt.listen, tt.extra, got, err, tt.want)
		}
	}
}

func TestFindMCPGateway(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "docker-mcp")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if got, err := FindMCPGateway(bin); err != nil || got != bin {
		t.Errorf("FindMCPGateway(%s) = %s, %v", bin, got, err)
	}
	for _, path := range []string{"", filepath.Join(dir, "absent")} {
		_, err := FindMCPGateway(path)
		if !errors.Is(err, ErrNoMCPGateway) || !strings.Contains(err.Error(), "go build") {
			t.Errorf("FindMCPGateway(%q) = %v, want ErrNoMCPGateway saying how to build it", path, err)
		}
	}
}

// TestMCPGatewayEndToEnd starts the gateway in front of a plain server
// and calls the tool through it, as the mcpgateway target does.
func TestMCPGatewayEndToEnd(t *testing.T) {
	bin := os.Getenv(mcpGatewayEnvVar)
	if bin == "" {
		t.Skipf("%s not set; %s", mcpGatewayEnvVar, MCPGatewayHint)
	}
	t.Parallel()
	up, err := StartUpstream(t.Context(), "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	gw, err := StartMCPGateway(t.Context(), bin, up.URL, nil)
	if err != nil {
		t.Fatal(err)
	}
	dir := gw.Dir
	defer func() {
		if err := gw.Close(); err != nil {
			t.Error(err)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the gateway's directory is left: %v", err)
		}
	}()

	// The token is required: a call without it is refused.
	resp, err := http.Post(gw.URL, "application/json", strings.NewReader(`{}`))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("POST without the token: %s, want 401", resp.Status)
	}

	target := &MCP{Label: TargetMCPGateway, Endpoint: gw.URL, Key: gw.Token, Tool: modelname.Derive(ReadTool),
		Arguments: []byte(`{"query":"cracked"}`), Expect: "t-1001"}
	res, err := Run(t.Context(), target, Options{Clients: 2, Duration: 300 * time.Millisecond,
		Processes: []Process{{Role: RoleMCPGateway, PID: gw.PID()}}})
	if err != nil || res.Calls == 0 || res.Errors != 0 {
		t.Fatalf("Run = %+v, %v (first error %v)", res, err, res.FirstError)
	}
	if d, ok := res.RoleCPU(RoleMCPGateway); !ok || d <= 0 {
		t.Errorf("the gateway's CPU per call was not measured: %+v", res)
	}
}

// TestMainMCPGateway runs the command with the mcpgateway target beside
// the plain server.
func TestMainMCPGateway(t *testing.T) {
	bin := os.Getenv(mcpGatewayEnvVar)
	if bin == "" {
		t.Skipf("%s not set; %s", mcpGatewayEnvVar, MCPGatewayHint)
	}
	t.Parallel()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), []string{"-upstream", "inprocess", "-target", "plain,mcpgateway", "-clients", "1,2",
		"-duration", "150ms", "-warmup", "30ms", "-mcp-gateway", bin, "-mcp-gateway-arg", "--log-calls=false"}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"docker/mcp-gateway (", "--static --log-calls=false", "| mcpgateway | 1 |", "| mcpgateway | 2 |"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "first error") {
		t.Errorf("calls failed:\n%s", out.String())
	}
}
