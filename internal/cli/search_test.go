package cli

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/toolplane/toolplane/discovery"
)

// table runs the command line against the server with key, printing the
// answer as people read it.
func (r running) table(t *testing.T, key string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(append(args, "--server", r.base, "--key", key), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestSearchThroughTheCommandLine(t *testing.T) {
	t.Parallel()
	r := startServe(t)
	ex := func(f string) string { return filepath.Join("..", "..", "examples", "registry", f) }
	owner := mintPerson(t, r, "sam", "tool_owner:support")
	for _, args := range [][]string{
		{"tools", "publish", ex("find_tickets-1.0.0.yaml")},
		{"tools", "approve", "support.find_tickets", "1.0.0"},
		// 1.1.0 is commonly paired with demo.add_note.
		{"tools", "publish", ex("find_tickets-1.1.0.yaml")},
	} {
		key := owner
		if args[1] == "approve" {
			key = r.admin
		}
		if code, out, errOut := r.run(t, key, args...); code != 0 {
			t.Fatalf("%v: exit %d\n%s%s", args, code, out, errOut)
		}
	}
	search := []string{"tools", "search", "tickets", "by", "the", "customer's", "name"}

	// Not granted yet: the demo agent's search never finds the tool.
	code, out, errOut := r.table(t, r.agent, search...)
	if code != 0 || strings.Contains(out, "support.find_tickets") {
		t.Fatalf("before the grant: exit %d\n%s%s", code, out, errOut)
	}
	if code, out, errOut := r.table(t, r.agent, "tools", "dependencies", "support.find_tickets"); code != 1 || !strings.Contains(errOut, "not_found") || out != "" {
		t.Fatalf("the graph of an ungranted tool: exit %d\n%s%s", code, out, errOut)
	}
	if code, _, errOut := r.run(t, r.admin, "grants", "add", "demo-agent", "--pattern", "support.*"); code != 0 {
		t.Fatal(errOut)
	}

	code, out, errOut = r.table(t, r.agent, search...)
	lines := strings.Split(strings.TrimSpace(out), "\n")
	var found string
	for _, l := range lines[1:] {
		if strings.HasPrefix(l, "support.find_tickets ") {
			found = l
		}
	}
	if code != 0 || !strings.HasPrefix(lines[0], "NAME") || !strings.Contains(lines[0], "SUMMARY") ||
		!strings.Contains(found, " 1.1.0 ") || !strings.Contains(found, "Find support tickets") {
		t.Fatalf("after the grant: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = r.table(t, r.agent, "tools", "search", "launch", "a", "rocket", "into", "orbit")
	if code != 0 || !strings.HasPrefix(out, "no good match") {
		t.Fatalf("an unanswerable query: exit %d\n%s%s", code, out, errOut)
	}
	// --json is the API's answer; the filters reach the API.
	code, out, errOut = r.table(t, r.agent, "tools", "search", "--json", "--effect", "write", "--limit", "5")
	var res discovery.Results
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res.Matches) == 0 {
		t.Fatalf("--json: exit %d\n%s%s", code, out, errOut)
	}
	for _, m := range res.Matches {
		if m.Effect != "write" {
			t.Errorf("--effect write answered %s (%s)", m.Name, m.Effect)
		}
	}

	code, out, errOut = r.table(t, r.agent, "tools", "dependencies", "support.find_tickets")
	if code != 0 || !strings.HasPrefix(out, "support.find_tickets") || !strings.Contains(out, "paired with") || !strings.Contains(out, "demo.add_note") {
		t.Fatalf("dependencies: exit %d\n%s%s", code, out, errOut)
	}
	code, out, errOut = r.table(t, r.agent, "tools", "dependencies", "demo.analyze_text")
	if code != 0 || !strings.Contains(out, "no dependencies") {
		t.Fatalf("a tool with none: exit %d\n%s%s", code, out, errOut)
	}

	// Bad input: the command line's own refusal exits 2, the server's 1
	// with its words.
	for _, tt := range []struct {
		args []string
		code int
		says string
	}{
		{[]string{"--limit", "0"}, 2, "--limit"},
		{[]string{"--limit", "ten"}, 2, "--limit"},
		{[]string{"--effect", "delete"}, 1, "effect"},
		{[]string{"--state", "retired"}, 1, "state"},
		{[]string{"--version", "^^1"}, 1, "version range"},
		{[]string{"-o", "xml"}, 2, `-o "xml"`},
	} {
		code, _, errOut := r.table(t, r.agent, append([]string{"tools", "search", "tickets"}, tt.args...)...)
		if code != tt.code || !strings.Contains(errOut, tt.says) {
			t.Errorf("%v: exit %d, want %d and %q in %s", tt.args, code, tt.code, tt.says, errOut)
		}
	}
}

func TestPrintMatches(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		res  discovery.Results
		want []string
	}{
		{"no good match", discovery.Results{NoGoodMatch: true}, []string{`no good match: no tool you may call fits "refund" well enough; try other words, or fewer filters`}},
		{"nothing passes the filters", discovery.Results{}, []string{"no tool you may call passes these filters"}},
		{"deprecated, with what replaces it", discovery.Results{Total: 3, Matches: []discovery.Match{
			{Name: "crm.find_people", Version: "1.2.0", Effect: "read", State: "active", Score: 2.5, Summary: "Find people.", Why: []string{"name", "description"}},
			{Name: "crm.search_customers", Version: "1.0.0", Effect: "read", State: "deprecated", Score: 1.25, Summary: "Search customers.", Replacement: "crm.find_people@^1.0.0"},
		}}, []string{
			"NAME                  VERSION  EFFECT  SCORE  MATCHED           SUMMARY",
			"crm.find_people       1.2.0    read    2.50   name,description  Find people.",
			"crm.search_customers  1.0.0    read    1.25   -                 [deprecated: use crm.find_people@^1.0.0] Search customers.",
			"(2 of 3 matches: --limit to see more)",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var b bytes.Buffer
			if err := printMatches(&b, "refund", &tt.res); err != nil {
				t.Fatal(err)
			}
			if got := strings.TrimRight(b.String(), "\n"); got != strings.Join(tt.want, "\n") {
				t.Errorf("got\n%s\nwant\n%s", got, strings.Join(tt.want, "\n"))
			}
		})
	}
}
