package server

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/registry"
)

// findTickets is a definition over the demo's search handler that
// declares the policy facts given.
func findTickets(facts string) string {
	return `{"name":"helpdesk.find_tickets","version":"1.0.0","kind":"internal","description":"Find helpdesk tickets by words in their subject.",
"binding":{"handler":{"key":"demo.search_tickets"}},"effect":"read","timeout":"5s","max_results":20,"policy_facts":` + facts + `,
"input_schema":{"type":"object","additionalProperties":false,"required":["query"],"properties":{"query":{"type":"string"},"status":{"type":"string"}}},
"output_schema":{"type":"array","items":{"type":"object"}}}`
}

// serve registers the built-in policy facts and the handlers' own (the
// demo's order_account): a tool declaring them registers; one declaring
// a fact nobody resolves is refused at start, naming the fact.
func TestServeRegistersPolicyFacts(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, facts, refused string
	}{
		{"built-in facts", `["org_time","run_spend_cents","agent_attributes","user_attributes","tool_tags","tool_classification","sensitive_arguments"]`, ""},
		{"a handler's fact", `["order_account"]`, ""},
		{"a fact nobody resolves", `["recipient_is_new"]`, `no resolver is registered for "recipient_is_new"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			tools := filepath.Join(dir, "tools")
			if err := os.Mkdir(tools, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(tools, "find.json"), []byte(findTickets(tt.facts)), 0o600); err != nil {
				t.Fatal(err)
			}
			var stderr bytes.Buffer
			s, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), Demo: true, ToolsDir: tools, Stderr: &stderr, TimeZone: "Europe/Paris"})
			if tt.refused == "" {
				if err != nil {
					t.Fatalf("New: %v\n%s", err, stderr.String())
				}
				s.Close()
				return
			}
			if err == nil {
				s.Close()
				t.Fatal("New accepted a tool declaring a fact nobody resolves")
			}
			var ce *registry.CheckError
			if !errors.As(err, &ce) || !strings.Contains(stderr.String(), tt.refused) {
				t.Fatalf("New: %v; stderr %q; want a CheckError naming %s", err, stderr.String(), tt.refused)
			}
		})
	}
}

func TestServeRefusesAnUnknownTimeZone(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, err := New(context.Background(), Config{Addr: "127.0.0.1:0", Database: filepath.Join(dir, "toolplane.db"), TimeZone: "Mars/Olympus_Mons"})
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.Field != "TimeZone" {
		t.Fatalf("New: %v, want a ConfigError on TimeZone", err)
	}
}
