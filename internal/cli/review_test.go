package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A set of versions in review is decided in one command: by publisher,
// or listed; each version is decided on its own, a reviewer's own
// version is refused to them, and the command says so per version and
// exits 1. A deprecation's note and another tool as its replacement
// reach the answer.
func TestToolsReviewASetAndDeprecateToAnotherTool(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	owner := mintPerson(t, r, "sam", "tool_owner:support")
	dir := t.TempDir()
	publish := func(key, name string) {
		t.Helper()
		file := filepath.Join(dir, name+".yaml")
		def := "name: " + name + "\nversion: 1.0.0\nkind: internal\nowner: support\ndescription: Find tickets.\neffect: read\n" +
			"binding:\n  handler: {key: demo.search_tickets}\ninput_schema: {type: object, properties: {query: {type: string}}}\noutput_schema: {type: array}\n"
		if err := os.WriteFile(file, []byte(def), 0o600); err != nil {
			t.Fatal(err)
		}
		if c, out, e := r.run(t, key, "tools", "publish", file); c != 0 || !strings.Contains(out, `"state": "in_review"`) {
			t.Fatalf("publish %s: %d %s %s", name, c, out, e)
		}
	}
	for _, name := range []string{"support.t0", "support.t1", "support.t2"} {
		publish(owner, name)
	}
	publish(r.admin, "support.mine")

	decided := func(out string) map[string]string {
		t.Helper()
		var answer struct {
			Items []struct {
				Name, Outcome string
				Error         struct{ Code string }
			}
		}
		if err := json.Unmarshal([]byte(out), &answer); err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		got := map[string]string{}
		for _, it := range answer.Items {
			got[it.Name] = it.Outcome + " " + it.Error.Code
		}
		return got
	}
	c, out, e := r.run(t, r.admin, "tools", "approve", "--published-by", "sam", "--note", "reviewed as a set")
	if got := decided(out); c != 0 || len(got) != 3 || got["support.t0"] != "approved " || got["support.t2"] != "approved " {
		t.Fatalf("approve --published-by: %d %v %s", c, got, e)
	}
	c, out, e = r.run(t, r.admin, "tools", "approve", "support.mine@1.0.0", "support.t1@1.0.0", "support.nope@1.0.0")
	if got := decided(out); c != 1 || got["support.mine"] != "refused denied" || got["support.t1"] != "refused invalid_transition" ||
		got["support.nope"] != "refused not_found" {
		t.Fatalf("approve a list: %d %v %s", c, got, e)
	}
	if c, _, e := r.run(t, r.admin, "tools", "approve", "support.t0@1.0.0", "--published-by", "sam"); c != 2 || !strings.Contains(e, "not both") {
		t.Errorf("versions and a filter: %d %s", c, e)
	}
	// One version as before.
	if c, out, e := r.run(t, r.admin, "tools", "approve", "support.t1", "1.0.0"); c != 1 || !strings.Contains(e, "invalid_transition") {
		t.Errorf("approve one: %d %s %s", c, out, e)
	}

	c, out, e = r.run(t, owner, "tools", "deprecate", "support.t0", "1.0.0", "--sunset", "2027-12-03", "--note", "replaced by support.t1", "--replacement", "support.t1")
	if c != 0 || !strings.Contains(out, `"deprecation_note": "replaced by support.t1"`) || !strings.Contains(out, `"replacement": "support.t1"`) {
		t.Fatalf("deprecate: %d %s %s", c, out, e)
	}
	if c, _, e := r.run(t, owner, "tools", "deprecate", "support.t2", "1.0.0", "--sunset", "2027-12-03", "--replacement", "support.gone"); c != 1 ||
		!strings.Contains(e, "replacement support.gone not found") {
		t.Errorf("a replacement that is not there: %d %s", c, e)
	}
}
