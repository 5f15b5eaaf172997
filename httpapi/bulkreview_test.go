package httpapi_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/toolplane/toolplane"
)

// POST /v1/registry/reviews decides a set of versions, each on its own:
// the answer lists every outcome (a refusal by the code the
// single-version route would answer), each decision is in the change
// log, and a request no version can be decided by is refused whole.
func TestBulkReviewAnswersEachVersionsOutcome(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withRegistry(t)
	admin := f.mintAdmin(t)
	owner := mint(t, f.store, toolplane.CredentialPerson, "olga", []string{"tool_owner:support"}, nil, false)
	for _, name := range []string{"support.find", "support.lookup"} {
		if status, out := f.do(t, "POST", "/v1/registry/tools", owner, strings.Replace(supportFind("1.0.0"), "support.find", name, 1)); status != http.StatusCreated {
			t.Fatalf("publish %s: %d %v", name, status, out)
		}
	}
	if status, out := f.do(t, "POST", "/v1/registry/tools", admin, strings.Replace(supportFind("1.0.0"), "support.find", "support.mine", 1)); status != http.StatusCreated {
		t.Fatalf("publish: %d %v", status, out)
	}
	refusals := []struct{ name, key, body, code string }{
		{"an owner", owner, `{"decision":"approve","published_by":"olga"}`, "denied"},
		{"no decision", admin, `{"published_by":"olga"}`, "invalid_request"},
		{"nothing selected", admin, `{"decision":"approve"}`, "invalid_request"},
		{"a rejection without a note", admin, `{"decision":"reject","published_by":"olga"}`, "invalid_request"},
	}
	for _, tt := range refusals {
		if status, out := f.do(t, "POST", "/v1/registry/reviews", tt.key, tt.body); errCode(out) != tt.code || status < 400 {
			t.Errorf("%s: %d %v", tt.name, status, out)
		}
	}
	status, out := f.do(t, "POST", "/v1/registry/reviews", admin,
		`{"decision":"approve","note":"one review","versions":[{"name":"support.find","version":"1.0.0"},{"name":"support.mine","version":"1.0.0"},{"name":"support.lookup","version":"1.0.0"}]}`)
	if status != http.StatusOK || out["decided"] != float64(2) || out["refused"] != float64(1) {
		t.Fatalf("bulk approve: %d %v", status, out)
	}
	for _, it := range out["items"].([]any) {
		item := it.(map[string]any)
		want := "approved"
		if item["name"] == "support.mine" {
			want = "refused"
			if e, _ := item["error"].(map[string]any); e["code"] != "denied" || !strings.Contains(e["message"].(string), "support.mine") {
				t.Errorf("own version: %v", item)
			}
		}
		if item["outcome"] != want {
			t.Errorf("%v, want %s", item, want)
		}
		// The version named, as the request named it, and nothing else of
		// the stored record.
		if item["version"] != "1.0.0" {
			t.Errorf("%v: version is %v, want 1.0.0", item["name"], item["version"])
		}
	}
	changes := f.mustChanges(t, admin, "version.approve")
	if len(changes) != 2 {
		t.Errorf("change log: %v", changes)
	}
}

// mustChanges answers the change log's items of one kind.
func (f *fixture) mustChanges(t *testing.T, key, kind string) []any {
	t.Helper()
	status, out := f.do(t, "GET", "/v1/changes?kind="+kind, key, "")
	if status != http.StatusOK {
		t.Fatalf("changes: %d %v", status, out)
	}
	return out["items"].([]any)
}
