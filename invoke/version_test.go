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
		{"pinned to the deprecated major", "^1.0.0", "crm.find 1.0.0 is deprecated and may be retired from 2027-03-01; move to 2.0.0", ""},
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
