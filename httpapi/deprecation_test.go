package httpapi_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// A deprecation through the API keeps its note (in the answer and the
// change log, not the last review's note), may name another tool as its
// replacement, and shows that replacement to agents listing the tools; a
// replacement that reaches nothing is refused naming it.
func TestDeprecationNoteAndReplacementReachTheAnswerTheLogAndAgents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withRegistry(t)
	admin := f.mintAdmin(t)
	owner := mint(t, f.store, toolplane.CredentialPerson, "olga", []string{"tool_owner:support"}, nil, false)
	agent := mint(t, f.store, toolplane.CredentialAgent, "bot", nil, nil, false)
	mustDo := func(method, path, key, body string, want int) map[string]any {
		t.Helper()
		status, out := f.do(t, method, path, key, body)
		if status != want {
			t.Fatalf("%s %s: %d %v, want %d", method, path, status, out, want)
		}
		return out
	}
	mustDo("POST", "/v1/registry/tools", owner, supportFind("1.0.0"), http.StatusCreated)
	mustDo("POST", "/v1/registry/tools/support.find/versions/1.0.0/approve", admin, `{"note":"ok"}`, http.StatusOK)
	lookup := strings.Replace(supportFind("1.0.0"), "support.find", "support.lookup", 1)
	if out := mustDo("POST", "/v1/registry/tools", owner, lookup, http.StatusCreated); out["state"] != "active" {
		t.Fatalf("support.lookup is %v", out["state"])
	}
	mustDo("POST", "/v1/grants", admin, `{"agent_id":"bot","pattern":"support.*"}`, http.StatusCreated)

	sunset := time.Now().Add(30 * 24 * time.Hour).UTC().Format(time.RFC3339)
	deprecate := func(replacement string) string {
		return toJSON(map[string]any{"sunset_at": sunset, "replacement": replacement, "note": "replaced by support.lookup"})
	}
	for _, missing := range []string{"support.nope", "support.lookup@^2.0.0", "9.9.9"} {
		status, out := f.do(t, "POST", "/v1/registry/tools/support.find/versions/1.0.0/deprecate", owner, deprecate(missing))
		msg, _ := out["error"].(map[string]any)["message"].(string)
		if status != http.StatusBadRequest || !strings.Contains(msg, "not found") || !strings.Contains(msg, strings.TrimPrefix(missing, "9.9.9")) {
			t.Errorf("replacement %s: %d %v", missing, status, out)
		}
	}
	out := mustDo("POST", "/v1/registry/tools/support.find/versions/1.0.0/deprecate", owner, deprecate("support.lookup"), http.StatusOK)
	if out["deprecation_note"] != "replaced by support.lookup" || out["replacement"] != "support.lookup" || out["review_note"] != "ok" {
		t.Errorf("deprecate answered %v", out)
	}
	changes := mustDo("GET", "/v1/changes?kind=version.deprecate", admin, "", http.StatusOK)["items"].([]any)
	if len(changes) != 1 {
		t.Fatalf("change log: %v", changes)
	}
	if d := changes[0].(map[string]any)["detail"].(map[string]any); d["note"] != "replaced by support.lookup" || d["replacement"] != "support.lookup" {
		t.Errorf("change log detail: %v", d)
	}

	// The agent is told, in the listing and in the tool's own page.
	var listed map[string]any
	for _, it := range mustDo("GET", "/v1/tools", agent, "", http.StatusOK)["items"].([]any) {
		if m := it.(map[string]any); m["name"] == "support.find" {
			listed = m
		}
	}
	dep, _ := listed["deprecated"].(map[string]any)
	if dep["replacement"] != "support.lookup" || dep["replacement_model_name"] != "support_lookup" || dep["sunset_at"] == nil ||
		!strings.HasSuffix(listed["description"].(string), "use support_lookup instead.") {
		t.Errorf("listed: %v", listed)
	}
	page := mustDo("GET", "/v1/tools/support.find", agent, "", http.StatusOK)
	if d, _ := page["mcp"].(map[string]any)["description"].(string); !strings.Contains(d, "use support_lookup instead") || strings.Contains(d, "replaced by") {
		t.Errorf("the MCP form's description: %q", d)
	}
}
