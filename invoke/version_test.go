package invoke_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/invoke"
	"github.com/toolplane/toolplane/registry"
)

func TestCallsResolveToThePinnedVersionAndWarnWhenDeprecated(t *testing.T) {
	t.Parallel()
	var reg *registry.Registry
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { reg = c.Registry },
		tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"name": "Ada"})})
	published := func(version string) toolplane.Definition {
		return def("crm.find", toolplane.EffectRead, func(d *toolplane.Definition) {
			d.Version, d.Binding.Handler.Key = version, "crm.get"
		})
	}
	sunset := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC)
	if ps := reg.SetVersions("published", []registry.Version{
		{Def: published("1.0.0"), State: toolplane.StateDeprecated, SunsetAt: sunset, Replacement: "2.0.0"},
		{Def: published("2.0.0"), State: toolplane.StateActive},
	}); len(ps) != 0 {
		t.Fatal(ps)
	}
	tests := []struct {
		name, pin, wantWarning string
		wantCode               toolplane.Code
	}{
		{"no pin: the newest active version", "", "", ""},
		{"pinned to the deprecated major", "^1.0.0", "crm.find 1.0.0 is deprecated and may be retired from 2027-03-01; move to crm.find@2.0.0", ""},
		{"pinned to the active major", "^2.0.0", "", ""},
		{"pinned to a range nothing callable is in", "^3.0.0", "", toolplane.CodeToolUnavailable},
	}
	for _, tt := range tests {
		in := inv("crm.find")
		if tt.pin != "" {
			in.Principal.Pins = map[string]string{"crm.find": tt.pin}
		}
		r, err := e.iv.Invoke(context.Background(), "crm.find", args("to", "c-1"), in)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		switch {
		case tt.wantCode != "":
			if r.OK || r.Error.Code != tt.wantCode || !strings.Contains(r.Error.Message, tt.pin) {
				t.Errorf("%s: %+v", tt.name, r.Error)
			}
		case !r.OK || r.Meta.DeprecationWarning != tt.wantWarning:
			t.Errorf("%s: ok %v warning %q error %+v", tt.name, r.OK, r.Meta.DeprecationWarning, r.Error)
		}
	}
}

// A call resolves among the tools of the caller's organization: another
// organization's published version is no tool at all to it, pinned or not,
// and each organization's own version of one name runs for it.
func TestCallsResolveInTheCallersOrganization(t *testing.T) {
	t.Parallel()
	var reg *registry.Registry
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { reg = c.Registry },
		tool{def: def("crm.get", toolplane.EffectRead), fn: ok(map[string]any{"name": "Ada"})})
	published := func(version string) toolplane.Definition {
		return def("crm.find", toolplane.EffectRead, func(d *toolplane.Definition) {
			d.Version, d.Binding.Handler.Key = version, "crm.get"
		})
	}
	if ps := reg.SetVersions("published", []registry.Version{
		{Organization: "org-1", Def: published("1.0.0"), State: toolplane.StateActive},
		{Organization: "org-2", Def: published("2.0.0"), State: toolplane.StateActive},
	}); len(ps) != 0 {
		t.Fatal(ps)
	}
	tests := []struct {
		org, pin, want string // want is the version run, "" for tool_unavailable
	}{
		{"org-1", "", "1.0.0"},
		{"org-1", "^2.0.0", ""},
		{"org-2", "", "2.0.0"},
		{"org-2", "^1.0.0", ""},
		{"org-3", "", ""},
		{"org-3", "^1.0.0", ""},
	}
	for _, tt := range tests {
		in := inv("crm.find")
		in.OrganizationID = tt.org
		if tt.pin != "" {
			in.Principal.Pins = map[string]string{"crm.find": tt.pin}
		}
		r, err := e.iv.Invoke(context.Background(), "crm.find", args("to", "c-1"), in)
		if err != nil {
			t.Fatalf("%s %s: %v", tt.org, tt.pin, err)
		}
		switch {
		case tt.want == "":
			if r.OK || r.Error.Code != toolplane.CodeToolUnavailable {
				t.Errorf("%s %q: ok %v %+v; want tool_unavailable", tt.org, tt.pin, r.OK, r.Error)
			}
		case !r.OK:
			t.Errorf("%s %q: %+v", tt.org, tt.pin, r.Error)
		}
		if tt.want != "" {
			if got := e.iv.CheckApproval(&toolplane.Approval{OrganizationID: tt.org, Tool: "crm.find", ToolVersion: tt.want}); got != nil {
				t.Errorf("CheckApproval(%s, %s) = %v", tt.org, tt.want, got)
			}
		}
	}
	if err := e.iv.CheckApproval(&toolplane.Approval{OrganizationID: "org-3", Tool: "crm.find", ToolVersion: "1.0.0"}); err == nil {
		t.Error("CheckApproval of another organization's version passed")
	}
}

// A published copy of a batched tool bound to the same handler, that
// leaves out the batch limit, is held to it: the oversized call is
// refused as batch_too_large and reaches nothing.
func TestAPublishedCopyKeepsTheHandlersBatchLimit(t *testing.T) {
	t.Parallel()
	var reg *registry.Registry
	bulk := def("crm.bulk", toolplane.EffectWrite, func(d *toolplane.Definition) {
		d.BatchArgument, d.MaxBatchSize = "items", 2
	})
	e := newEnvWith(t, newStore(t), func(c *invoke.Config) { reg = c.Registry }, tool{def: bulk, fn: ok(map[string]any{})})
	copied := def("crm.bulk_fast", toolplane.EffectWrite, func(d *toolplane.Definition) { d.Binding.Handler.Key = "crm.bulk" })
	if ps := reg.SetVersions("published", []registry.Version{{Def: copied, State: toolplane.StateActive}}); len(ps) != 0 {
		t.Fatal(ps)
	}
	r, err := e.iv.Invoke(context.Background(), "crm.bulk_fast", map[string]any{"items": []any{"a", "b", "c"}}, inv("crm.bulk_fast"))
	code(t, r, err, toolplane.CodeBatchTooLarge)
	if e.count("crm.bulk") != 0 {
		t.Fatalf("handler ran %d times", e.count("crm.bulk"))
	}
}
