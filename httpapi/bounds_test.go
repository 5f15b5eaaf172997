package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/authz"
	"github.com/toolplane/toolplane/catalog"
	"github.com/toolplane/toolplane/registry"
)

// Identifiers past their bounds are refused as bad requests, naming the
// field, before anything is written: the audit trail stays empty.
func TestOverlongIdentifiersAreRefusedBeforeTheAuditTrail(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	admin := f.mintAdmin(t)
	long := func(n int) string { return strings.Repeat("x", n) }
	body := func(extra map[string]any) string {
		m := map[string]any{"arguments": map[string]any{"ticket_id": "t-1001", "text": "hi"}, "run_id": "run-1"}
		for k, v := range extra {
			m[k] = v
		}
		return toJSON(m)
	}
	invoke := "/v1/tools/demo.add_note/invoke"
	tests := []struct {
		name, method, path, key, body, field string
	}{
		{"a 100 KB run id", "POST", invoke, f.agent, body(map[string]any{"run_id": long(100 << 10)}), "run_id"},
		{"a 900 KB idempotency key", "POST", invoke, f.agent, body(map[string]any{"idempotency_key": long(900 << 10)}), "idempotency_key"},
		{"a long step path", "POST", invoke, f.agent, body(map[string]any{"step_path": long(toolplane.MaxRunLen + 1)}), "step_path"},
		{"a long authorized_by", "POST", invoke, f.agent, body(map[string]any{"authorized_by": long(toolplane.MaxRefLen + 1)}), "authorized_by"},
		{"a long tenant", "POST", invoke, f.agent, body(map[string]any{"tenant_id": long(toolplane.MaxRefLen + 1)}), "tenant_id"},
		{"a long contract", "POST", invoke, f.agent, body(map[string]any{"contracts": map[string]string{long(toolplane.MaxNameLen + 1): "h"}}), "contracts"},
		{"a 100 KB tool name", "POST", "/v1/tools/demo." + long(100<<10) + "/invoke", f.agent, body(nil), "tool"},
		{"a long approval id", "POST", "/v1/approvals/" + long(toolplane.MaxRefLen+1) + "/approve", f.person, "", "approval id"},
		{"a long key id", "POST", "/v1/keys/" + long(toolplane.MaxRefLen+1) + "/revoke", admin, "", "key id"},
		{"a long key subject", "POST", "/v1/keys", admin, toJSON(map[string]any{"kind": "agent", "subject": long(toolplane.MaxRefLen + 1)}), "subject"},
		{"a long reconciled key", "POST", "/v1/uncertain/reconcile", f.person, toJSON(map[string]any{"tool": "demo.add_note", "key": long(toolplane.MaxRunLen + 1), "unconfirmed": "x"}), "key"},
	}
	for _, tt := range tests {
		status, got := f.do(t, tt.method, tt.path, tt.key, tt.body)
		e, _ := got["error"].(map[string]any)
		if status != http.StatusBadRequest || errCode(got) != "invalid_request" || e["field_path"] != tt.field {
			t.Errorf("%s: %d %v; want 400 invalid_request at %s", tt.name, status, got, tt.field)
		}
		if raw, _ := json.Marshal(got); len(raw) > 1000 {
			t.Errorf("%s: the refusal is %d bytes; it quotes what it refuses", tt.name, len(raw))
		}
	}
	evs, _, err := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 100)
	if err != nil || len(evs) != 0 {
		t.Errorf("the audit trail holds %d events (%v); want none", len(evs), err)
	}
	// Within the bounds, the same call is recorded.
	if status, got := f.do(t, "POST", invoke, f.agent, body(map[string]any{"run_id": long(toolplane.MaxRunLen)})); status != http.StatusOK {
		t.Fatalf("a call within the bounds: %d %v", status, got)
	}
	if evs, _, _ := f.store.ListAudit(context.Background(), "org-1", toolplane.AuditFilter{}, "", 100); len(evs) != 1 {
		t.Errorf("the audit trail holds %d events after one call; want 1", len(evs))
	}
}

// Grants, denies and bundles are bounded by the grant service; the REST
// door answers its refusal as a bad request naming the field, without
// quoting the value.
func TestOverlongGrantsAreRefusedAsBadRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.api.Catalog = catalog.New(catalog.Config{Store: f.store, Registry: f.door.Registry, Options: registry.Options{}})
	f.door.Authz = authz.New(authz.Config{Store: f.store, Registry: f.door.Registry})
	admin := f.mintAdmin(t)
	long := strings.Repeat("x", 100<<10)
	tests := []struct {
		name, method, path, body, field string
	}{
		{"a 100 KB grant pattern", "POST", "/v1/grants", toJSON(map[string]any{"agent_id": "bot", "pattern": "demo." + long}), "pattern"},
		{"a 100 KB grant pattern beside a bundle", "POST", "/v1/grants", toJSON(map[string]any{"agent_id": "bot", "pattern": long, "bundle": long}), "pattern"},
		{"a 100 KB tenant", "POST", "/v1/grants", toJSON(map[string]any{"agent_id": "bot", "pattern": "demo.*", "tenant_scope": []string{long}}), "tenant_scope[0]"},
		{"a 100 KB deny reason", "POST", "/v1/denies", toJSON(map[string]any{"agent_id": "*", "pattern": "demo.*", "reason": long}), "reason"},
		{"a 100 KB bundle ref", "PUT", "/v1/bundles/b", toJSON(map[string]any{"refs": []string{long}}), "refs[0]"},
	}
	for _, tt := range tests {
		status, got := f.do(t, tt.method, tt.path, admin, tt.body)
		e, _ := got["error"].(map[string]any)
		if status != http.StatusBadRequest || errCode(got) != "invalid_request" || e["field_path"] != tt.field {
			t.Errorf("%s: %d %v; want 400 invalid_request at %s", tt.name, status, got, tt.field)
		}
		if raw, _ := json.Marshal(got); len(raw) > 1000 {
			t.Errorf("%s: the refusal is %d bytes; it quotes what it refuses", tt.name, len(raw))
		}
	}
}

// A refused publish never quotes what it refuses back whole: an over-long
// name is refused before the registration checks, and every value a
// registration problem quotes is cut short.
func TestRefusedPublishesDoNotQuoteTheValue(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withRegistry(t)
	owner := mint(t, f.store, toolplane.CredentialPerson, "olga", []string{"tool_owner:support"}, nil, false)
	long := strings.Repeat("x", 100<<10)
	def := func(edit func(m map[string]any)) string {
		m := map[string]any{"name": "support.find", "version": "1.0.0", "kind": "internal", "owner": "support",
			"description": "Find tickets.", "effect": "read", "binding": map[string]any{"handler": map[string]any{"key": "demo.search_tickets"}},
			"input_schema": map[string]any{"type": "object"}, "output_schema": map[string]any{"type": "object"}}
		edit(m)
		return toJSON(m)
	}
	tests := []struct {
		name, body, field string
	}{
		{"a 100 KB name", def(func(m map[string]any) { m["name"] = "support." + long }), "name"},
		{"a name over the registration limit", def(func(m map[string]any) { m["name"] = "support." + long[:200] }), "name"},
		{"a 100 KB version", def(func(m map[string]any) { m["version"] = "1.0.0-" + long }), "version"},
		{"a 100 KB handler key", def(func(m map[string]any) { m["binding"] = map[string]any{"handler": map[string]any{"key": long}} }), "binding.handler.key"},
		{"a 100 KB kind", def(func(m map[string]any) { m["kind"] = long }), "kind"},
	}
	for _, tt := range tests {
		status, got := f.do(t, "POST", "/v1/registry/tools", owner, tt.body)
		e, _ := got["error"].(map[string]any)
		if status != http.StatusBadRequest || errCode(got) != "invalid_request" || e["field_path"] != tt.field {
			t.Errorf("%s: %d %.300v; want 400 invalid_request at %s", tt.name, status, got, tt.field)
		}
		if raw, _ := json.Marshal(got); len(raw) > 2000 {
			t.Errorf("%s: the refusal is %d bytes; it quotes what it refuses", tt.name, len(raw))
		}
	}
}
