package main_test

import (
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestUpstreamToolSettingsOverREST tightens, reads and resets an upstream
// tool's settings through the API of a started server: the operator's
// admin key may, an agent's key may not, and the next call is decided
// under what was stored.
func TestUpstreamToolSettingsOverREST(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "upstreams.yaml")
	cfg := `upstreams:
  - slug: hostile
    url: ` + hostileUpstream(t) + `
    tools:
      forge: {effect: read, requires_approval: false}
`
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	s := start(t, "--upstreams", file)
	key := s.newAgentKey(t, "e2e-settings", "mcp.hostile.*")
	const path = "/v1/upstreams/hostile/tools/forge/settings"

	if status, raw := s.do(t, "PUT", path, key, `{"requires_approval":true}`); status != http.StatusForbidden {
		t.Errorf("an agent's key changed a setting: %d %s", status, raw)
	}
	if status, raw := s.do(t, "PUT", path, s.admin, `{"effect":"read","destructive":true}`); status != http.StatusBadRequest {
		t.Errorf("a destructive read: %d %s", status, raw)
	}
	if status, raw := s.do(t, "PUT", "/v1/upstreams/hostile/tools/nope/settings", s.admin, `{}`); status != http.StatusNotFound {
		t.Errorf("an unknown tool: %d %s", status, raw)
	}
	if _, res, raw := s.invoke(t, key, "mcp.hostile.forge", `{"arguments":{}}`); !res.ok() {
		t.Fatalf("forge before: %s", raw)
	}

	// Tightened: the next call waits for a person.
	status, raw := s.do(t, "PUT", path, s.admin, `{"requires_approval":true}`)
	if status != http.StatusOK || !strings.Contains(string(raw), `"requires_approval":true`) || !strings.Contains(string(raw), `"effect":"write"`) {
		t.Fatalf("tighten: %d %s", status, raw)
	}
	if status, res, raw := s.invoke(t, key, "mcp.hostile.forge", `{"arguments":{},"run_id":"run-settings"}`); res.ok() || status != http.StatusAccepted {
		t.Errorf("a tightened tool answered without approval: %d %s", status, raw)
	}
	if status, raw := s.do(t, "GET", path, s.admin, ""); status != http.StatusOK || !strings.Contains(string(raw), `"stored":{"requires_approval":true}`) {
		t.Errorf("get: %d %s", status, raw)
	}
	if status, raw := s.do(t, "GET", "/v1/changes?kind=upstream.tool_settings.put", s.admin, ""); status != http.StatusOK || !strings.Contains(string(raw), "mcp.hostile.forge") {
		t.Errorf("the change log: %d %s", status, raw)
	}

	// Reset: the file's relaxation again.
	if status, raw := s.do(t, "DELETE", path, s.admin, ""); status != http.StatusOK || !strings.Contains(string(raw), `"requires_approval":false`) {
		t.Fatalf("reset: %d %s", status, raw)
	}
	if _, res, raw := s.invoke(t, key, "mcp.hostile.forge", `{"arguments":{}}`); !res.ok() {
		t.Errorf("forge after reset: %s", raw)
	}

	// The command line does the same through the same routes.
	bin, err := build()
	if err != nil {
		t.Fatal(err)
	}
	cli := func(args ...string) (string, error) {
		cmd := exec.Command(bin, append(args, "--server", s.base, "--key", s.admin, "-o", "json")...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := cli("upstreams", "settings", "set", "hostile", "forge", "--requires-approval"); err != nil || !strings.Contains(out, `"stored": {`) || !strings.Contains(out, `"requires_approval": true`) {
		t.Errorf("toolplane upstreams settings set: %v %s", err, out)
	}
	if status, res, raw := s.invoke(t, key, "mcp.hostile.forge", `{"arguments":{},"run_id":"run-settings-cli"}`); res.ok() || status != http.StatusAccepted {
		t.Errorf("tightened from the command line, the tool answered without approval: %d %s", status, raw)
	}
	if out, err := cli("upstreams", "settings", "reset", "hostile", "forge"); err != nil || strings.Contains(out, `"stored"`) {
		t.Errorf("toolplane upstreams settings reset: %v %s", err, out)
	}
	if out, err := cli("upstreams", "settings", "set", "hostile", "forge"); err == nil || !strings.Contains(out, "name at least one setting") {
		t.Errorf("a set naming no setting: %v %s", err, out)
	}
}
