package registry

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"github.com/toolplane/toolplane"
)

// remote answers an ingested definition of a tool on connection conn-1.
func remote(name, version, inputSchema string) toolplane.Definition {
	no := false
	return toolplane.Definition{
		Name: "mcp.conn-1." + name, Version: version, Description: "A remote tool.", Kind: toolplane.KindMCP,
		InputSchema: json.RawMessage(inputSchema), OutputSchema: json.RawMessage(`{"type":"object"}`),
		Binding: toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: name}},
		Effect:  toolplane.EffectWrite, Repeatable: &no,
	}
}

func TestSetGroupReplacesOnlyItsOwnTools(t *testing.T) {
	t.Parallel()
	r, _, err := Build([]toolplane.Definition{base(), readDef()}, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	stop := r.Watch(func() { changes.Add(1) })
	defer stop()

	obj := `{"type":"object"}`
	tests := []struct {
		name     string
		defs     []toolplane.Definition
		want     []string // tools of the group afterwards
		problems int
		changed  bool
	}{
		{"first sync", []toolplane.Definition{remote("a", "1.0.0", obj), remote("b", "1.0.0", obj)}, []string{"mcp.conn-1.a", "mcp.conn-1.b"}, 0, true},
		{"same again", []toolplane.Definition{remote("a", "1.0.0", obj), remote("b", "1.0.0", obj)}, []string{"mcp.conn-1.a", "mcp.conn-1.b"}, 0, false},
		{"one dropped", []toolplane.Definition{remote("a", "1.0.0", obj)}, []string{"mcp.conn-1.a"}, 0, true},
		{"contract changed", []toolplane.Definition{remote("a", "2.0.0", `{"type":"object","required":["x"]}`)}, []string{"mcp.conn-1.a"}, 0, true},
		{"a bad one left out, the rest kept", []toolplane.Definition{remote("a", "2.0.0", `{"type":"object","required":["x"]}`), remote("c", "1.0.0", `{"type":"string"}`)}, []string{"mcp.conn-1.a"}, 1, false},
	}
	for _, tt := range tests {
		before := changes.Load()
		ps := r.SetGroup("conn-1", tt.defs)
		if len(ps) != tt.problems {
			t.Errorf("%s: problems %v", tt.name, ps)
		}
		var got []string
		for _, tool := range r.Tools("") {
			if r.GroupOf("", tool.Def.Name) == "conn-1" {
				got = append(got, tool.Def.Name)
			}
		}
		if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) || (len(got) > 1 && got[1] != tt.want[1]) {
			t.Errorf("%s: group %v, want %v", tt.name, got, tt.want)
		}
		if changed := changes.Load() != before; changed != tt.changed {
			t.Errorf("%s: watchers told %v, want %v", tt.name, changed, tt.changed)
		}
		if _, ok := r.Get("", base().Name); !ok {
			t.Fatalf("%s: the built-in catalogue lost a tool", tt.name)
		}
	}
	if len(r.Tools("")) != 3 {
		t.Errorf("%d tools, want 3", len(r.Tools("")))
	}
}

func TestSetGroupRefusesCollisions(t *testing.T) {
	t.Parallel()
	r, _, err := Build([]toolplane.Definition{base()}, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	obj := `{"type":"object"}`
	if ps := r.SetGroup("", nil); len(ps) != 1 {
		t.Errorf("replacing the built-in catalogue: %v", ps)
	}
	if ps := r.SetGroup("conn-1", []toolplane.Definition{remote("a", "1.0.0", obj)}); len(ps) != 0 {
		t.Fatal(ps)
	}
	// Another group may not take a name the first holds.
	if ps := r.SetGroup("other", []toolplane.Definition{remote("a", "9.0.0", obj)}); len(ps) != 1 {
		t.Errorf("collision across groups: %v", ps)
	}
	if tool, _ := r.Get("", "mcp.conn-1.a"); tool.Def.Version != "1.0.0" {
		t.Errorf("a colliding group shadowed the tool: version %s", tool.Def.Version)
	}
	if tool, ok := r.ByModelName("", "mcp_conn-1_a"); !ok || tool.Def.Name != "mcp.conn-1.a" {
		t.Errorf("model-facing name lookup: %v %v", tool, ok)
	}
}

func TestVersionsResolveByRange(t *testing.T) {
	t.Parallel()
	r, _, err := Build(nil, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	obj := `{"type":"object"}`
	v := func(version string, state toolplane.VersionState) Version {
		return Version{Def: remote("a", version, obj), State: state}
	}
	ps := r.SetVersions("published", []Version{
		v("1.0.0", toolplane.StateDeprecated), v("1.2.0", toolplane.StateActive), v("1.3.0", toolplane.StateDeprecated),
		v("2.0.0", toolplane.StateActive), v("2.1.0", toolplane.StateActive), v("3.0.0", toolplane.StateInReview),
		v("2.2.0", toolplane.StateRetired),
	})
	if len(ps) != 0 {
		t.Fatal(ps)
	}
	tests := []struct{ rng, want string }{
		{"", "2.1.0"}, // the newest active
		{"*", "2.1.0"},
		{"^1.0.0", "1.2.0"}, // active beats a newer deprecated
		{"~1.3.0", "1.3.0"}, // only a deprecated one is in range
		{"1.0.0", "1.0.0"},
		{"^2.0.0", "2.1.0"},
		{"^3.0.0", ""}, // in review: not callable
		{"2.2.0", ""},  // retired
		{"not a range", ""},
	}
	for _, tt := range tests {
		got, ok := r.Resolve("", "mcp.conn-1.a", tt.rng)
		switch {
		case tt.want == "" && ok:
			t.Errorf("Resolve(%q) = %s, want none", tt.rng, got.Def.Version)
		case tt.want != "" && (!ok || got.Def.Version != tt.want):
			t.Errorf("Resolve(%q) = %v, want %s", tt.rng, got, tt.want)
		}
	}
	if n := len(r.Versions("", "mcp.conn-1.a")); n != 5 {
		t.Errorf("%d callable versions, want 5", n)
	}
	if tool, _ := r.Get("", "mcp.conn-1.a"); tool.State != toolplane.StateActive || tool.Def.Version != "2.1.0" {
		t.Errorf("default version %s (%s)", tool.Def.Version, tool.State)
	}
	// The same version twice is refused, the rest kept.
	if ps := r.SetVersions("published", []Version{v("1.0.0", toolplane.StateActive), v("1.0.0", toolplane.StateActive)}); len(ps) != 1 {
		t.Errorf("duplicate version: %v", ps)
	}
}

func TestDependencyEdgesAreChecked(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		deps []toolplane.Dependency
		want int
	}{
		{"valid edges", []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "crm.search_people@^1.0.0"}, {Relation: toolplane.CommonlyPairedWith, Tool: "email.send"}}, 0},
		{"unknown relation", []toolplane.Dependency{{Relation: "calls", Tool: "crm.search_people"}}, 1},
		{"not a name", []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "Search People"}}, 1},
		{"bad range", []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "crm.search_people@>=1"}}, 1},
		{"itself", []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "crm.update_company"}}, 1},
		{"twice", []toolplane.Dependency{{Relation: toolplane.RequiresOutputOf, Tool: "email.send"}, {Relation: toolplane.RequiresOutputOf, Tool: "email.send"}}, 1},
	}
	for _, tt := range tests {
		d := base()
		d.Dependencies = tt.deps
		if got := problems(t, []toolplane.Definition{d}, Options{Bindings: deployment}); len(got) != tt.want {
			t.Errorf("%s: %v", tt.name, got)
		}
	}
}

// A published version is served to its organization alone: two
// organizations hold one name independently, a third (and the platform's
// view) sees neither, and every organization is served the platform's
// tools.
func TestPublishedVersionsAreServedToTheirOrganizationOnly(t *testing.T) {
	t.Parallel()
	r, _, err := Build([]toolplane.Definition{base()}, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	obj := `{"type":"object"}`
	a, b := remote("a", "1.0.0", obj), remote("a", "2.0.0", obj)
	b.Description = "Organization b's own."
	if ps := r.SetVersions("published", []Version{
		{Organization: "org-a", Def: a, State: toolplane.StateActive},
		{Organization: "org-b", Def: b, State: toolplane.StateActive},
	}); len(ps) != 0 {
		t.Fatal(ps)
	}
	tests := []struct {
		org, want string // want is the version served, "" for none
	}{
		{"org-a", "1.0.0"},
		{"org-b", "2.0.0"},
		{"org-c", ""},
		{"", ""},
	}
	for _, tt := range tests {
		t.Run(tt.org, func(t *testing.T) {
			got, ok := r.Get(tt.org, a.Name)
			if tt.want == "" {
				if ok {
					t.Fatalf("Get(%q) = %s, want none", tt.org, got.Def.Version)
				}
			} else if !ok || got.Def.Version != tt.want {
				t.Fatalf("Get(%q) = %v, %v; want %s", tt.org, got, ok, tt.want)
			}
			if rs, ok := r.Resolve(tt.org, a.Name, "*"); ok != (tt.want != "") || ok && rs.Def.Version != tt.want {
				t.Errorf("Resolve(%q) = %v, %v", tt.org, rs, ok)
			}
			if _, ok := r.Resolve(tt.org, a.Name, "^1.0.0"); ok != (tt.org == "org-a") {
				t.Errorf("Resolve(%q, ^1.0.0) found = %v", tt.org, ok)
			}
			if n := len(r.Versions(tt.org, a.Name)); n != min(len(tt.want), 1) {
				t.Errorf("Versions(%q) = %d versions", tt.org, n)
			}
			if _, ok := r.ByModelName(tt.org, "mcp_conn-1_a"); ok != (tt.want != "") {
				t.Errorf("ByModelName(%q) found = %v", tt.org, ok)
			}
			var names []string
			for _, tool := range r.Tools(tt.org) {
				names = append(names, tool.Def.Name)
			}
			want := []string{base().Name}
			if tt.want != "" {
				want = []string{base().Name, a.Name}
			}
			if len(names) != len(want) || names[0] != want[0] || len(want) == 2 && names[1] != want[1] {
				t.Errorf("Tools(%q) = %v, want %v", tt.org, names, want)
			}
			if _, ok := r.Get(tt.org, base().Name); !ok {
				t.Errorf("Get(%q) of the platform's tool: not served", tt.org)
			}
		})
	}
	// Replacing the group replaces it in every organization.
	if ps := r.SetVersions("published", []Version{{Organization: "org-b", Def: b, State: toolplane.StateActive}}); len(ps) != 0 {
		t.Fatal(ps)
	}
	if _, ok := r.Get("org-a", a.Name); ok {
		t.Error("org-a is still served a version the group no longer holds")
	}
}

// A platform tool ingested after an organization published a tool of its
// name is withheld from that organization (and reported), served to every
// other; the organization's own stays what its agents call.
func TestAnOrganizationsOwnToolIsNeverReplacedByAPlatformTool(t *testing.T) {
	t.Parallel()
	r, _, err := Build(nil, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	obj := `{"type":"object"}`
	own := remote("a", "1.0.0", obj)
	own.Description = "org-a's own."
	if ps := r.SetVersions("published", []Version{{Organization: "org-a", Def: own, State: toolplane.StateActive}}); len(ps) != 0 {
		t.Fatal(ps)
	}
	ps := r.SetGroup("conn-1", []toolplane.Definition{remote("a", "9.0.0", obj), remote("b", "1.0.0", obj)})
	if len(ps) != 1 || ps[0].Tool != own.Name {
		t.Errorf("problems = %v, want the one withheld tool", ps)
	}
	if got, _ := r.Get("org-a", own.Name); got == nil || got.Def.Version != "1.0.0" {
		t.Errorf("org-a is served %v, want its own 1.0.0", got)
	}
	if got, _ := r.Get("org-b", own.Name); got == nil || got.Def.Version != "9.0.0" {
		t.Errorf("org-b is served %v, want the platform's 9.0.0", got)
	}
	if _, ok := r.Get("org-a", "mcp.conn-1.b"); !ok {
		t.Error("org-a is not served the platform's other tool")
	}
}
