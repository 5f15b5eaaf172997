package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane/internal/policytoy"
)

// The tests' servers and the offline policy test know the test rule
// language as well as the deployment's.
func init() { policyEngines = append(policyEngines, policytoy.Toy{}) }

// writeBundle writes files into a fresh directory and answers it.
func writeBundle(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// searchOnly permits the demo agent's ticket search and nothing else.
var searchOnly = map[string]string{
	"search.toy": `[{"id": "search", "effect": "permit", "tool": "demo.search_tickets"}]`,
	"search.tests.json": `[
		{"name": "search is allowed", "expect": "allow", "rule": "search", "request": {"tool": {"name": "demo.search_tickets"}}},
		{"name": "notes are not", "expect": "deny", "request": {"tool": {"name": "demo.add_note"}}}
	]`,
}

// TestPolicyThroughTheCommandLine: a bundle tested offline, refused by
// the shadow run until --yes, published, deciding the agent's next calls
// with the rule recorded in the audit trail and named by explain; a
// failing bundle refused with its failing test named; an operator refused
// the break-glass, a platform_admin not.
func TestPolicyThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	good := writeBundle(t, searchOnly)
	failing := map[string]string{}
	for k, v := range searchOnly {
		failing[k] = strings.Replace(v, `"expect": "deny"`, `"expect": "allow"`, 1)
	}
	bad := writeBundle(t, failing)
	operator := mintPerson(t, r, "opal", "agent_operator")

	// Calls decided by the grants alone, for the shadow run to replay.
	if v := r.call(t, "demo.add_note", `{"ticket_id":"t-1001","text":"hello"},"run_id":"run-1"`); code(v) != "ok" {
		t.Fatalf("a note before any bundle: %v", v)
	}
	if v := r.call(t, "demo.search_tickets", `{"query":"late"}`); code(v) != "ok" {
		t.Fatalf("a search before any bundle: %v", v)
	}

	var out, errOut strings.Builder
	if c := Main([]string{"policy", "test", good}, &out, &errOut); c != 0 || !strings.Contains(out.String(), "ok: 2 tests pass") {
		t.Fatalf("policy test of a good bundle: exit %d\n%s%s", c, out.String(), errOut.String())
	}
	out.Reset()
	errOut.Reset()
	if c := Main([]string{"policy", "test", bad}, &out, &errOut); c != 1 || !strings.Contains(out.String(), "FAIL  notes are not") {
		t.Fatalf("policy test of a failing bundle: exit %d\n%s%s", c, out.String(), errOut.String())
	}

	steps := []struct {
		name     string
		key      string
		args     []string
		wantCode int
		want     string
	}{
		{"a failing bundle is not published", r.admin, []string{"policy", "publish", bad, "--shadow-days", "0"}, 1, "notes are not"},
		{"an operator may not publish", operator, []string{"policy", "publish", good, "--shadow-days", "0"}, 1, "platform_admin"},
		{"the shadow run shows the note would now be denied, and stops the publish", r.admin, []string{"policy", "publish", good}, 1, "would be decided differently"},
		{"with --yes it publishes", r.admin, []string{"policy", "publish", good, "--yes", "--note", "search only"}, 0, `"version": 1`},
		{"list shows it", operator, []string{"policy", "list"}, 0, `"note": "search only"`},
		{"show has its files", operator, []string{"policy", "show", "1"}, 0, `"search.toy"`},
		{"explain names the rule", operator, []string{"policy", "explain", "demo-agent", "demo.search_tickets", "--args", `{"query":"x"}`}, 0, `"rule": "search"`},
		{"explain of a call no rule permits", operator, []string{"policy", "explain", "demo-agent", "demo.add_note", "--args", `{"ticket_id":"t-1001","text":"again"}`}, 0, `"effect": "deny"`},
		{"explain of arguments a call would refuse", operator, []string{"policy", "explain", "demo-agent", "demo.add_note"}, 1, "arguments"},
	}
	for _, st := range steps {
		c, o, e := r.run(t, st.key, st.args...)
		text := o
		if st.wantCode != 0 {
			text = e
		}
		if c != st.wantCode || !strings.Contains(text+o, st.want) {
			t.Fatalf("%s: exit %d\nstdout: %s\nstderr: %s", st.name, c, o, e)
		}
	}
	if v := r.call(t, "demo.add_note", `{"ticket_id":"t-1001","text":"again"},"run_id":"run-1"`); code(v) != "denied" {
		t.Fatalf("a note under the bundle: %v", v)
	}
	if v := r.call(t, "demo.search_tickets", `{"query":"late"}`); code(v) != "ok" {
		t.Fatalf("a search under the bundle: %v", v)
	}
	// The audit trail is written in the background: it is read until the
	// call's event is there.
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		c, o, e := r.run(t, r.admin, "audit", "list", "--tool", "demo.search_tickets")
		if c == 0 && strings.Contains(o, `"policy_bundle": 1`) && strings.Contains(o, `"policy_rule": "search"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the audit trail does not name the bundle and rule: exit %d\n%s%s", c, o, e)
		}
	}
	if c, _, e := r.run(t, operator, "policy", "disable", "--note", "incident"); c != 1 || !strings.Contains(e, "platform_admin") {
		t.Fatalf("an operator's break-glass: exit %d %s", c, e)
	}
	if c, o, e := r.run(t, r.admin, "policy", "disable", "--note", "incident"); c != 0 || !strings.Contains(o, `"disabled": true`) {
		t.Fatalf("the break-glass: exit %d %s %s", c, o, e)
	}
	if v := r.call(t, "demo.add_note", `{"ticket_id":"t-1001","text":"after the break-glass"},"run_id":"run-1"`); code(v) != "ok" {
		t.Fatalf("a note after the break-glass: %v", v)
	}
}
