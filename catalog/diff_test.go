package catalog_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/toolplane/toolplane"
	"github.com/toolplane/toolplane/compat"
)

// The compatibility report between two published versions is read by the
// people who read the catalogue, of their own organization's versions; it
// is the report Compare answers for the same two definitions.
func TestDiffComparesPublishedVersions(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.seedActive(t)
	if _, err := f.svc.Publish(f.ctx, getOrder("1.0.0"), owner); err != nil {
		t.Fatal(err)
	}
	wider := getOrder("1.1.0", func(d *toolplane.Definition) {
		d.InputSchema = json.RawMessage(`{"type":"object","properties":{"order_id":{"type":"string","maxLength":40},"note":{"type":"string"}},"required":["order_id"]}`)
	})
	if _, err := f.svc.Publish(f.ctx, wider, owner); err != nil {
		t.Fatal(err)
	}
	got, err := f.svc.Diff(f.ctx, "payments.get_order", "1.0.0", "1.1.0", person("ivy", "auditor"))
	if err != nil {
		t.Fatal(err)
	}
	from := getOrder("1.0.0")
	want, err := compat.Classify(&from, &wider)
	if err != nil {
		t.Fatal(err)
	}
	if got.Required != want.Required || got.Required != compat.Minor || len(got.Changes) != len(want.Changes) || got.Refused != "" {
		t.Fatalf("Diff = %+v, want %+v (MINOR, not refused)", got, want)
	}
	// Backwards, the optional field is gone: a change the gate refuses as
	// a minor.
	back, err := f.svc.Diff(f.ctx, "payments.get_order", "1.1.0", "1.0.0", admin)
	if err != nil || back.Required != compat.Major || back.Refused == "" {
		t.Fatalf("Diff backwards = %+v, %v; want MAJOR, refused", back, err)
	}

	tests := []struct {
		name string
		by   *toolplane.Credential
		from string
		want error
	}{
		{"an agent", &toolplane.Credential{OrganizationID: "default", Kind: toolplane.CredentialAgent, Subject: "bot"}, "1.0.0", toolplane.ErrForbidden},
		{"another organization", &toolplane.Credential{OrganizationID: "org-2", Kind: toolplane.CredentialPerson, Subject: "eve", Roles: []string{"platform_admin"}}, "1.0.0", toolplane.ErrNotFound},
		{"no such version", admin, "0.9.0", toolplane.ErrNotFound},
	}
	for _, tt := range tests {
		if c, err := f.svc.Diff(f.ctx, "payments.get_order", tt.from, "1.1.0", tt.by); !errors.Is(err, tt.want) || c != nil {
			t.Errorf("%s: Diff = %v, %v; want %v", tt.name, c, err, tt.want)
		}
	}
}
