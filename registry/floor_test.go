package registry

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// guardedDefs answers a platform tool bound to handler key, guarded or
// not, and a published tool bound to the same handler that declares no
// guard of its own.
func guardedDefs(guarded bool) (platform, published toolplane.Definition) {
	platform = base()
	platform.Name = "crm.update_company"
	if guarded {
		platform.Annotations = toolplane.Annotations{Destructive: true, RequiresApproval: true}
		platform.Approval = &toolplane.ApprovalPolicy{Chain: []string{"finance", "cfo"}, OnTimeout: toolplane.OnTimeoutEscalate, TTL: toolplane.Duration(time.Hour)}
	}
	published = base()
	published.Name = "teama.update_fast"
	published.Effect, published.Repeatable = toolplane.EffectRead, nil
	return platform, published
}

func TestPublishedVersionIsServedHeldToItsBindingsDeclaration(t *testing.T) {
	t.Parallel()
	r, _, err := Build(nil, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	open, pub := guardedDefs(false)
	guarded, _ := guardedDefs(true)
	serve := func(platform toolplane.Definition) *Tool {
		t.Helper()
		if ps := r.SetGroup("platform", []toolplane.Definition{platform}); len(ps) > 0 {
			t.Fatal(ps)
		}
		tool, ok := r.Get("org-a", pub.Name)
		if !ok {
			t.Fatal("the published version is not served")
		}
		return tool
	}
	if ps := r.SetVersions("published", []Version{{Organization: "org-a", Def: pub, State: toolplane.StateActive}}); len(ps) > 0 {
		t.Fatal(ps)
	}

	// The platform declares the handler a write needing nobody: the
	// published read is served as a write, and nothing more.
	if tool := serve(open); tool.Def.Effect != toolplane.EffectWrite || len(tool.Raised) != 1 || tool.Def.Annotations.RequiresApproval {
		t.Fatalf("unguarded binding: effect %s, raised %v", tool.Def.Effect, tool.Raised)
	}

	// The binding's declaration becomes stricter (re-ingested with
	// approval, say): the version already served is held to it.
	tool := serve(guarded)
	d := tool.Def
	if d.Effect != toolplane.EffectWrite || d.Repeatable == nil || *d.Repeatable || !d.Annotations.Destructive || !d.Annotations.RequiresApproval ||
		d.Approval == nil || !slices.Equal(d.Approval.Chain, []string{"finance", "cfo"}) || d.Approval.OnTimeout != toolplane.OnTimeoutEscalate {
		t.Fatalf("held definition: %+v", d)
	}
	want := []string{"effect", "annotations.destructive", "annotations.requires_approval", "approval"}
	if !slices.Equal(tool.Raised, want) {
		t.Fatalf("raised %v, want %v", tool.Raised, want)
	}
	if f, ok := r.Floor(pub.Binding); !ok || !f.Guarded() || !slices.Equal(f.Declared, []string{"crm.update_company"}) {
		t.Fatalf("floor %+v", f)
	}
	// Pinned and unpinned lookups alike answer the held version.
	if v, ok := r.Resolve("org-a", pub.Name, "^1.0.0"); !ok || !v.Def.Annotations.RequiresApproval {
		t.Fatal("a pinned lookup answers the version as published")
	}

	// The platform tool goes away: nothing declares the handler, and the
	// version is served as published again.
	if ps := r.SetGroup("platform", nil); len(ps) > 0 {
		t.Fatal(ps)
	}
	tool, _ = r.Get("org-a", pub.Name)
	if tool.Def.Effect != toolplane.EffectRead || tool.Def.Annotations.RequiresApproval || len(tool.Raised) != 0 {
		t.Fatalf("without a declaration: effect %s raised %v", tool.Def.Effect, tool.Raised)
	}
}

func TestFloorHoldNamesEveryWeakerField(t *testing.T) {
	t.Parallel()
	no := false
	platform := base()
	platform.Kind = toolplane.KindVendor
	platform.Metered = true
	platform.Annotations = toolplane.Annotations{Destructive: true, RequiresApproval: true, Idempotent: true}
	platform.Replay = &toolplane.Replay{MaxAttempts: 2}
	platform.BatchArgument, platform.MaxBatchSize = "ids", 10
	platform.PolicyFacts = []string{"recipient_is_new"}
	platform.Connection = "hubspot"
	r, _, err := Build([]toolplane.Definition{platform}, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	f, ok := r.Floor(platform.Binding)
	if !ok {
		t.Fatal("no floor for a built-in tool's handler")
	}
	tests := []struct {
		name  string
		edit  func(d *toolplane.Definition)
		field []string
	}{
		{"as strict as the binding", func(d *toolplane.Definition) {}, nil},
		{"a read", func(d *toolplane.Definition) {
			d.Effect, d.Repeatable, d.Annotations.Destructive = toolplane.EffectRead, nil, false
		},
			[]string{"effect", "annotations.destructive"}},
		{"no approval", func(d *toolplane.Definition) { d.Annotations.RequiresApproval = false }, []string{"annotations.requires_approval"}},
		{"its own approvers", func(d *toolplane.Definition) { d.Approval = &toolplane.ApprovalPolicy{Chain: []string{"teama"}} }, []string{"approval"}},
		{"not labelled untrusted", func(d *toolplane.Definition) { d.Kind = toolplane.KindInternal }, []string{"annotations.open_world"}},
		{"not metered", func(d *toolplane.Definition) { d.Metered = false }, []string{"metered"}},
		{"more replays", func(d *toolplane.Definition) { d.Replay = &toolplane.Replay{MaxAttempts: 5} }, []string{"replay.max_attempts"}},
		{"a stricter write", func(d *toolplane.Definition) { d.Repeatable = &no; d.Replay = nil; d.Annotations.LongRunning = false }, nil},
		{"no batch limit", func(d *toolplane.Definition) { d.BatchArgument, d.MaxBatchSize = "", 0 }, []string{"batch_argument"}},
		{"another batch argument", func(d *toolplane.Definition) { d.BatchArgument = "filter" }, []string{"batch_argument"}},
		{"a larger batch", func(d *toolplane.Definition) { d.MaxBatchSize = 500 }, []string{"max_batch_size"}},
		{"a smaller batch", func(d *toolplane.Definition) { d.MaxBatchSize = 3 }, nil},
		{"no policy facts", func(d *toolplane.Definition) { d.PolicyFacts = nil }, []string{"policy_facts"}},
		{"another connection", func(d *toolplane.Definition) { d.Connection = "elsewhere" }, []string{"connection"}},
		{"no connection", func(d *toolplane.Definition) { d.Connection = "" }, []string{"connection"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			d := platform
			d.Name = "teama.fast"
			tt.edit(&d)
			held, problems := f.Hold(d)
			var fields []string
			for _, p := range problems {
				fields = append(fields, p.Field)
				if p.Tool != "teama.fast" || !containsAll(p.Message, "handler crm.update_company", "crm.update_company") {
					t.Errorf("problem does not name the tool and binding: %+v", p)
				}
			}
			if !slices.Equal(fields, tt.field) {
				t.Fatalf("fields %v, want %v", fields, tt.field)
			}
			// What Hold answers is never weaker than the binding.
			if held.BatchArgument != "ids" || held.MaxBatchSize > 10 || !slices.Contains(held.PolicyFacts, "recipient_is_new") {
				t.Errorf("held batch %s/%d, facts %v", held.BatchArgument, held.MaxBatchSize, held.PolicyFacts)
			}
			if _, again := f.Hold(held); len(again) != 0 {
				t.Errorf("the held definition is still weaker: %v", again)
			}
		})
	}
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}

// A remote tool no platform tool declares (its server lists it, but
// ingestion refused it) has ingestion's default as its floor: a published
// definition binding it is served as a guarded write, never as published.
func TestUningestedRemoteToolIsHeldToIngestionsDefault(t *testing.T) {
	t.Parallel()
	r, _, err := Build(nil, Options{Bindings: deployment})
	if err != nil {
		t.Fatal(err)
	}
	pub := base()
	pub.Name, pub.Kind = "mcp.conn-1.wipe", toolplane.KindMCP
	pub.Binding = toolplane.Binding{Remote: &toolplane.RemoteBinding{ConnectionID: "conn-1", RemoteName: "wipe"}}
	pub.Effect, pub.Repeatable = toolplane.EffectRead, nil
	if ps := r.SetVersions("published", []Version{{Organization: "org-a", Def: pub, State: toolplane.StateActive}}); len(ps) > 0 {
		t.Fatal(ps)
	}

	f, ok := r.Floor(pub.Binding)
	if !ok || !f.Default || !f.Guarded() || f.Effect != toolplane.EffectWrite || !f.Untrusted {
		t.Fatalf("floor of an uningested remote tool: %+v, %v", f, ok)
	}
	tool, ok := r.Get("org-a", pub.Name)
	if !ok {
		t.Fatal("the published version is not served")
	}
	want := toolplane.Definition{}
	RemoteDefault(&want)
	d := tool.Def
	if d.Effect != want.Effect || d.Annotations.Destructive != want.Annotations.Destructive ||
		d.Annotations.RequiresApproval != want.Annotations.RequiresApproval || !d.Untrusted() {
		t.Fatalf("served as %+v, want ingestion's default %+v", d, want)
	}
	if !slices.Contains(tool.Raised, "annotations.requires_approval") {
		t.Fatalf("raised %v", tool.Raised)
	}

	// A handler no platform tool declares still has no floor: a published
	// definition is then the whole contract of its own tool.
	if _, ok := r.Floor(base().Binding); ok {
		t.Fatal("a floor for a handler nothing declares")
	}
}
