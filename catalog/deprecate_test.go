package catalog_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/toolplane/toolplane"
)

// A deprecation keeps the owner's note (on the version and in the change
// log, never the last review's note), and its replacement may name
// another tool, at any version, a version or a range: stored as a
// reference and shown to agents by its model-facing name. A replacement
// that reaches nothing is refused naming what was not found, and the
// version stays active.
func TestDeprecationKeepsItsNoteAndNamesAnotherTool(t *testing.T) {
	t.Parallel()
	const note = "replaced by payments.get_order"
	tests := []struct {
		name, replacement string
		// wantRef is the stored reference; wantErr the text a refusal
		// must hold ("" for success).
		wantRef, wantErr, wantModel string
	}{
		{"another tool, any version", "payments.get_order", "payments.get_order", "", "use payments_get_order instead"},
		{"another tool at a range", "payments.get_order@^1.0.0", "payments.get_order@^1.0.0", "", "use payments_get_order instead"},
		{"another tool at a version", "payments.get_order@1.1.0", "payments.get_order@1.1.0", "", "use payments_get_order instead"},
		{"another version of the same tool", "2.0.0", "payments.refund_order@2.0.0", "", "version 2.0.0 of this tool replaces it"},
		{"a range of the same tool", "^2.0.0", "payments.refund_order@^2.0.0", "", "version ^2.0.0 of this tool replaces it"},
		{"the same tool by name", "payments.refund_order", "payments.refund_order", "", "another version of this tool replaces it"},
		{"no replacement", "", "", "", "Deprecated: it may be retired from 2026-12-01."},
		{"a tool that does not exist", "payments.nope", "", "replacement payments.nope not found: no tool named payments.nope", ""},
		{"another tool outside its versions", "payments.get_order@^3.0.0", "",
			"replacement payments.get_order@^3.0.0 not found: no version of payments.get_order within ^3.0.0 (it has 1.0.0, 1.1.0)", ""},
		{"a version of the same tool that does not exist", "9.9.9", "", "replacement payments.refund_order@9.9.9 not found", ""},
		{"the version deprecated itself", "1.0.0", "", "replacement payments.refund_order@1.0.0 not found", ""},
		{"a range that is not one", "payments.get_order@>=1.0.0", "", "replacement payments.get_order@>=1.0.0", ""},
		{"a retired tool", "payments.old", "", "replacement payments.old not found", ""},
		{"a tool only in review", "payments.pending", "", "replacement payments.pending not found", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			d := getOrder("1.0.0")
			d.Name, d.Binding.Handler.Key = "payments.refund_order", "payments.refund_order"
			if _, err := f.svc.Publish(f.ctx, d, owner); err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.Review(f.ctx, d.Name, "1.0.0", true, "ok", admin); err != nil {
				t.Fatal(err)
			}
			d2 := d
			d2.Version = "2.0.0"
			old := getOrder("1.0.0", func(d *toolplane.Definition) { d.Name = "payments.old" })
			for _, def := range []toolplane.Definition{getOrder("1.0.0"), getOrder("1.1.0"), d2, old} {
				if p, err := f.svc.Publish(f.ctx, def, owner); err != nil || p.Version.State != toolplane.StateActive {
					t.Fatalf("publish %s %s: %v", def.Name, def.Version, err)
				}
			}
			// A version in review is nothing an agent can call: no
			// replacement.
			pending := getOrder("1.0.0", func(d *toolplane.Definition) {
				d.Name, d.Effect, d.Annotations.Destructive = "payments.pending", toolplane.EffectWrite, true
				no := false
				d.Repeatable = &no
			})
			if p, err := f.svc.Publish(f.ctx, pending, owner); err != nil || p.Version.State != toolplane.StateInReview {
				t.Fatalf("publish payments.pending: %v", err)
			}
			sunset := time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)
			if _, err := f.svc.Deprecate(f.ctx, "payments.old", "1.0.0", sunset, "", "", owner); err != nil {
				t.Fatal(err)
			}
			if _, err := f.svc.Retire(f.ctx, "payments.old", "1.0.0", "gone", owner); err != nil {
				t.Fatal(err)
			}

			v, err := f.svc.Deprecate(f.ctx, d.Name, "1.0.0", sunset, tt.replacement, note, owner)
			if tt.wantErr != "" {
				if !errors.Is(err, toolplane.ErrInvalid) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("refusal %v, want ErrInvalid holding %q", err, tt.wantErr)
				}
				if got, _ := f.store.GetToolVersion(f.ctx, "default", d.Name, "1.0.0"); got.State != toolplane.StateActive {
					t.Fatalf("a refused deprecation left the version %s", got.State)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if v.DeprecationNote != note || v.Replacement != tt.wantRef || v.ReviewNote != "ok" {
				t.Errorf("answer: note %q replacement %q review note %q", v.DeprecationNote, v.Replacement, v.ReviewNote)
			}
			stored, err := f.store.GetToolVersion(f.ctx, "default", d.Name, "1.0.0")
			if err != nil || stored.DeprecationNote != note || stored.Replacement != tt.wantRef {
				t.Errorf("stored: %+v %v", stored, err)
			}
			cs, _, err := f.svc.Changes(f.ctx, "version.deprecate", d.Name+"@1.0.0", "", 10, admin)
			if err != nil || len(cs) != 1 {
				t.Fatalf("change log: %v %v", cs, err)
			}
			var detail map[string]any
			if err := json.Unmarshal(cs[0].Detail, &detail); err != nil || detail["note"] != note || detail["replacement"] != tt.wantRef {
				t.Errorf("change log detail %s", cs[0].Detail)
			}
			// The model is told, in the served version's description.
			tool, ok := f.reg.Resolve("default", d.Name, "^1.0.0")
			if !ok || tool.State != toolplane.StateDeprecated || !strings.Contains(tool.ModelDescription(), tt.wantModel) ||
				strings.Contains(tool.ModelDescription(), note) {
				t.Errorf("served: %v %q", ok, tool.ModelDescription())
			}
		})
	}
}
